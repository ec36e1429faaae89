"""Peak memory of ``dimbsvm ingest`` in this process, for one Parquet file written with row groups of different sizes.

Usage (from the repository root)::

    python -m benchmarks.ingest_row_groups --rows 1600000 --row-groups 1 16 --repeats 2 --cache CACHE_DIR \
        --checkout this=. --checkout before=PATH_OF_AN_EARLIER_CHECKOUT --out benchmarks/results/ingest-row-groups

The data (generated once into ``--cache``): ``--rows`` rows of 32 float64 features and a string label (5 %
``rare``), the same rows written once per ``--row-groups`` count (pyarrow, row groups of equal size). Each
measurement is a fresh process running ``python -m dimbsvm.cli ingest FILE STORE --target label`` with no
cluster (the source read in this process's threads), with ``PYTHONPATH`` set to a ``--checkout`` (so a run
measures the same files with two versions of dimbsvm); its peak resident memory is ``ru_maxrss`` of the
finished child. The baseline in the same script: ``pandas.read_parquet`` of the whole file in a fresh process
(what a user would compare with).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

N_FEATURES = 32


def make_file(cache: Path, rows: int, row_groups: int) -> Path:
    """The file of ``rows`` rows in ``row_groups`` row groups (written once)."""
    import pandas as pd

    path = cache / f"rows{rows}-groups{row_groups}.parquet"
    if not path.exists():
        rng = np.random.default_rng(0)  # the same rows whatever the row groups
        frame = pd.DataFrame({f"x{j}": rng.normal(size=rows) for j in range(N_FEATURES)})
        frame["label"] = np.where(rng.random(rows) < 0.05, "rare", "common")
        frame.to_parquet(path, row_group_size=-(-rows // row_groups))
    return path


def measure(checkout: str, path: Path, work: Path) -> dict:
    """One ingest of ``path`` with dimbsvm from ``checkout``, in a runner process of its own."""
    store = work / "store.zarr"
    shutil.rmtree(store, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()))
    runner = [sys.executable, "-c", "import resource, subprocess, sys, json, time; t = time.perf_counter(); "
              "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
              "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
              "time.perf_counter() - t]))",
              sys.executable, "-m", "dimbsvm.cli", "ingest", str(path), str(store), "--target", "label"]
    # (run from the work directory: `python -m` puts the current directory first on the path, before PYTHONPATH)
    out = subprocess.run(runner, env=env, check=True, capture_output=True, text=True, cwd=work).stdout
    peak, wall = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(store, ignore_errors=True)
    return {"peak_mib": peak, "seconds": wall}


def pandas_baseline(path: Path) -> dict:
    """``pandas.read_parquet`` of the whole file in a fresh process."""
    runner = [sys.executable, "-c", "import resource, sys, json, time, pandas as pd; t = time.perf_counter(); "
              "pd.read_parquet(sys.argv[1]); print(json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss "
              "/ 1024, time.perf_counter() - t]))", str(path)]
    peak, wall = json.loads(subprocess.run(runner, check=True, capture_output=True, text=True).stdout)
    return {"peak_mib": peak, "seconds": wall}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_600_000)
    parser.add_argument("--row-groups", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--checkout", action="append", default=None,
                        help="NAME=PATH of a dimbsvm checkout to measure (repeatable; default this=.)")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    checkouts = dict(item.split("=", 1) for item in (args.checkout or ["this=."]))
    cache = Path(args.cache or tempfile.mkdtemp(prefix="dimbsvm-row-groups-"))
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dimbsvm-row-groups-work-") as work:
        for groups in args.row_groups:
            path = make_file(cache, args.rows, groups)
            runs = {name: [measure(checkout, path, Path(work)) for _ in range(args.repeats)]
                    for name, checkout in checkouts.items()}
            runs["pandas.read_parquet"] = [pandas_baseline(path) for _ in range(args.repeats)]
            for name, measured in runs.items():
                row = {"row_groups": groups, "rows_per_group": -(-args.rows // groups), "what": name,
                       "file_mib": path.stat().st_size / 2**20,
                       "peak_mib_median": statistics.median(m["peak_mib"] for m in measured),
                       "seconds_median": statistics.median(m["seconds"] for m in measured), "runs": measured}
                rows.append(row)
                print(f"{groups:>3} row groups  {name:<20} peak {row['peak_mib_median']:6.0f} MiB  "
                      f"{row['seconds_median']:5.1f} s", flush=True)
    summary = {"benchmark": "ingest_row_groups", "when": utc_now(), "machine": machine_info(),
               "versions": package_versions(["dimbsvm", "pyarrow", "pandas", "dask", "zarr"]),
               "rows": args.rows, "checkouts": list(checkouts), "results": rows}
    if args.out:
        write_summary(Path(args.out), summary, render_markdown(summary))
    return 0


def render_markdown(summary: dict) -> str:
    lines = [f"# ingest peak memory by row-group size ({summary['rows']:,} rows x {N_FEATURES} float64 + a label)",
             "", "| row groups | rows a group | what | peak MiB (median) | seconds (median) |", "|---|---|---|---|---|"]
    lines += [f"| {r['row_groups']} | {r['rows_per_group']:,} | {r['what']} | {r['peak_mib_median']:.0f} | "
              f"{r['seconds_median']:.1f} |" for r in summary["results"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
