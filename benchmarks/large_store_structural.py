"""A job with a stored structural stage over a store larger than each worker's memory limit.

Usage (from the repository root)::

    python -m benchmarks.large_store_structural [--rows 300000] [--features 256] [--memory-limit 500MiB]
        [--workers 2] [--max-partition-rows 5000] [--out benchmarks/results/large-store-structural]

Writes a float64 store of ``rows x features`` (synthetic, 2 % minority), starts
``--workers`` nanny-managed worker processes with ``--memory-limit`` each, and
runs a job through :func:`dimbsvm.jobs.run_job`: the stored structural stage
(its kNN graph built once into the store, exact within partitions of at most
``--max-partition-rows`` rows), then 2-fold CV of a 2-member EnSVM-OTHR on
linear SVMs with bags of 4000 rows. Records the store's size against the
limit, the phases' wall times, every worker's peak resident memory, whether a
worker was restarted, the graph's recall on its sample and the folds' G-mean.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from dimbsvm.environment import machine_info, package_versions, utc_now


def _store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path, "X").rglob("*") if p.is_file())


def run(args) -> dict:
    from distributed import Client, LocalCluster

    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.jobs import load_job_data, run_job, validate_job
    from dimbsvm.jobs.runner import peak_memory_bytes
    from dimbsvm.graph.stored import open_knn_graph
    from dimbsvm.store import ingest

    work = Path(tempfile.mkdtemp(prefix="large-structural-", dir=args.workdir))
    store = work / "data.zarr"
    tic = time.perf_counter()
    X, y = make_imbalanced(args.rows, n_features=args.features, minority_fraction=0.02, chunks=20_000,
                           random_state=3)
    ingest((X, y), store, dtype="float64")
    ingest_s = time.perf_counter() - tic
    job = validate_job({
        "name": "large-structural", "data": {"source": str(store)},
        "features": [{"name": "structural", "params": {"n_neighbors": 10, "method": "exact"}, "stored": True,
                      "k_store": 30, "max_partition_rows": args.max_partition_rows}],
        "estimator": {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 2,
                                                          "bootstrap": "balanced", "max_samples": 4000,
                                                          "smoothing": None, "random_state": 0}},
        "cv": {"n_splits": 2, "n_repeats": 1, "random_state": 0},
        "metrics": ["g_mean", "f_measure", "fit_time"], "output": {"model": False}})
    data = load_job_data(str(store))
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=args.memory_limit) as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)
        limit = min(w["memory_limit"] for w in client.scheduler_info(n_workers=-1)["workers"].values())
        tic = time.perf_counter()
        result = run_job(job, client, out=work / "run", progress=False, data=data)
        job_s = time.perf_counter() - tic
        restarted = client.run(os.getpid) != pids
        peaks = client.run(peak_memory_bytes)
    resources = json.loads((work / "run" / "resources.json").read_text())
    stage = next(p for p in (store / "stages").iterdir() if p.name.startswith("knn-"))
    meta = open_knn_graph(store, f"stages/{stage.name}").meta
    # where the store and the run are left: told here, not recorded (summary.json names no path of this machine)
    print(f"store and run left in {work}", file=sys.stderr)
    return {
        "rows": args.rows, "features": args.features, "store_bytes_on_disk": _store_bytes(store),
        "features_bytes_float64": args.rows * args.features * 8,
        "worker_memory_limit_bytes": int(limit), "workers": args.workers,
        "max_partition_rows": args.max_partition_rows, "ingest_s": round(ingest_s, 1),
        "job_s": round(job_s, 1), "phase_seconds": resources["phase_seconds"],
        "peak_worker_memory_bytes": sorted(peaks.values()), "worker_restarted": restarted,
        "graph_recall": meta.get("recall"), "graph_cpu_s": meta.get("cpu_s"),
        "graph_peak_rss_bytes": meta.get("peak_rss_bytes"), "graph_partition_sizes_max": max(meta["partition_sizes"]),
        "graph_partitions": len(meta["partition_sizes"]), "graph_members_per_row": meta.get("members_per_row"),
        "g_mean": [round(f["g_mean"], 4) for f in result.folds],
    }


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_store_structural", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--memory-limit", default="500MiB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-partition-rows", type=int, default=5000)
    parser.add_argument("--workdir", default=None, help="where the store and run go (default: the temp dir)")
    parser.add_argument("--out", default="benchmarks/results/large-store-structural")
    args = parser.parse_args(argv)
    result = {"command": "python -m benchmarks.large_store_structural " + shlex.join(argv), "date": utc_now(),
              "machine": machine_info(), "versions": package_versions(), **run(args)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
