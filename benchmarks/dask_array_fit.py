"""The client's memory while ``EnsembleOTHRClassifier`` fits a Dask array on a cluster: over its chunks, or computed here.

Usage (from the repository root)::

    python -m benchmarks.dask_array_fit                       # 2x10^6 and 8x10^6 rows x 32, float64
    python -m benchmarks.dask_array_fit --sizes 1000000 --memory-limit 3GiB

For each size n, ``make_imbalanced(n, 32, 1 % minority)`` is a lazily
generated Dask array (float64, 250,000-row chunks: 8x10^6 rows are 2 GB),
and on a fresh ``LocalCluster`` of two single-threaded worker processes
``EnsembleOTHRClassifier(LinearSVC(), n_estimators=8, max_samples=20_000,
random_state=0)`` is fitted two ways, each in a fresh Python process (so one
way's peak is not the other's):

- ``chunks``: ``fit(X, y)`` with the client: the members fitted over the
  array's chunks on the workers (:mod:`dimbsvm.svm.ensemble_chunks`);
- ``computed``: ``fit(X.compute(), y.compute())`` with the client: the array
  brought into this process, the members' tasks sent it (what ``fit(X, y)``
  did before, and does for settings the chunks cannot serve).

Measured in that process: its resident memory before the fit (after the
cluster started) and its peak during the fit (``VmHWM`` reset is not
available, so the process's resident memory is sampled every 20 ms), the
growth between them, and the fit's wall seconds. ``same fit``: the two
ways' shared shifts and decision values on the first 1,000 rows are equal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.ingest_scale import PeakSampler

N_FEATURES = 32
MINORITY = 0.01
CHUNK_ROWS = 250_000


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(n: int, way: str, memory_limit: str) -> dict:
    """One fit of ``way`` (``chunks`` or ``computed``) on ``n`` rows, in this process."""
    import numpy as np
    from distributed import Client, LocalCluster
    from sklearn.svm import LinearSVC

    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.svm.ensemble import EnsembleOTHRClassifier

    X, y = make_imbalanced(n, N_FEATURES, MINORITY, chunks=CHUNK_ROWS, random_state=0)
    X = X.astype(np.float64)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        model = EnsembleOTHRClassifier(LinearSVC(), n_estimators=8, max_samples=20_000, random_state=0,
                                       client=client)
        before = _rss_bytes()
        tic = time.perf_counter()
        with PeakSampler([os.getpid()], interval=0.02) as sampler:
            if way == "chunks":
                model.fit(X, y)
            else:
                model.fit(X.compute(), y.compute())
        wall = time.perf_counter() - tic
        head = np.asarray(X[:100_000])
        scores = model.decision_function(head)
    peak = max(sampler.peaks[os.getpid()], _rss_bytes())
    return {"n": n, "way": way, "rss_before_bytes": before, "peak_bytes": peak, "growth_bytes": peak - before, "wall_s": wall, "threshold": float(model.threshold_),
            "scores_head": scores[:1000].tolist()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000_000, 8_000_000])
    parser.add_argument("--memory-limit", default="5GiB", help="per worker")
    parser.add_argument("--one", nargs=2, metavar=("N", "WAY"), help=argparse.SUPPRESS)  # a measuring process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.memory_limit)))
        return
    from dimbsvm.environment import machine_info, package_versions, utc_now

    runs = []
    for n in args.sizes:
        for way in ("chunks", "computed"):
            out = subprocess.run([sys.executable, "-m", "benchmarks.dask_array_fit", "--memory-limit",
                                  args.memory_limit, "--one", str(n), way], capture_output=True, text=True,
                                 check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for n in args.sizes:
        pair = {run["way"]: run for run in runs if run["n"] == n}
        for run in pair.values():
            run["same_fit"] = (pair["chunks"]["threshold"] == pair["computed"]["threshold"]
                               and pair["chunks"]["scores_head"] == pair["computed"]["scores_head"])
    summary = {"benchmark": "dask_array_fit", "when": utc_now(), "machine": machine_info(),
               "packages": package_versions(), "memory_limit": args.memory_limit,
               "runs": [{k: v for k, v in run.items() if k != "scores_head"} for run in runs]}
    print(json.dumps(summary, indent=2))
    print()
    print("| n | features GB | way | client before MB | client peak MB | growth MB | wall s | same fit |")
    print("|---|---|---|---|---|---|---|---|")
    for run in summary["runs"]:
        print(f"| {run['n']:,} | {run['n'] * N_FEATURES * 8 / 1e9:.2f} | {run['way']} | "
              f"{run['rss_before_bytes'] / 2**20:.0f} | {run['peak_bytes'] / 2**20:.0f} | "
              f"{run['growth_bytes'] / 2**20:.0f} | {run['wall_s']:.1f} | {'yes' if run['same_fit'] else 'no'} |")


if __name__ == "__main__":
    main()
