"""A store job with and without each process's decoded-chunk cache, in this process and on two workers.

Usage (from the repository root)::

    python -m benchmarks.chunk_cache --out benchmarks/results/chunk-cache

The job: ``EnsembleOTHRClassifier`` of 10 ``LinearSVC`` members on bags of
20,000 rows (threshold search without smoothing), min-max scaling, 3-fold CV
and the final model (the ``large`` case of :mod:`benchmarks.small_jobs`), on
``make_imbalanced(n, 20 features, 5 % minority)`` stored as float64 in chunks
of 78,125 rows (zstd). Each fold passes over the store's chunks three times
(ranges and bags, out-of-bag margins, scoring) and the final model twice.
Arms, alternated in each repeat, timed as :func:`dimbsvm.jobs.runner.run_job`
(data checks, plan, folds, final model, report; not the process's start):
``here, no cache`` and ``here, cache`` run every task in this process;
``2 workers, ...`` on an embedded cluster of two single-threaded worker
processes started as ``dimbsvm run`` starts them (one cluster for every arm
of a size). ``no cache``: ``DIMBSVM_CHUNK_CACHE_SHARE=0``; ``cache, no
affinity``: chunk tasks go wherever the scheduler sends them; ``cache``: each
chunk's tasks sent to one worker (:meth:`~dimbsvm.parallel.TaskPlan.add`'s
``affinity``). Decodes: chunks read from the store (cache misses) summed over
the processes that ran tasks; hits: chunks served from a cache. Every arm's
fold records (times left out) are compared with the first arm's.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.results import docstring_text, publish, when_and_where
from dimbsvm.environment import utc_now

logger = logging.getLogger("benchmarks.chunk_cache")

ARMS = ("here, no cache", "here, cache", "2 workers, no cache", "2 workers, cache, no affinity", "2 workers, cache")
CHUNK_ROWS = 78_125
JOB = {"preprocessing": {"scaler": "minmax"},
       "estimator": {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 10,
                                                         "max_samples": 20_000, "smoothing": None,
                                                         "random_state": 0}},
       "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 0}, "metrics": ["g_mean", "auc"]}


def make_store(n: int, workdir: Path) -> Path:
    """The size's store in ``workdir`` (reused when there)."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.store import ingest

    path = workdir / f"cache-{n}.zarr"
    X, y = make_imbalanced(n, n_features=20, minority_fraction=0.05, chunks=2 * CHUNK_ROWS, random_state=0)
    ingest((X, y), path, dtype="float64", chunk_rows=CHUNK_ROWS)
    return path


def _use_cache(share: float) -> None:
    """Set this process's cache share and start its cache afresh (run here and on each worker)."""
    from dimbsvm.store import chunk_cache

    os.environ["DIMBSVM_CHUNK_CACHE_SHARE"] = str(share)
    chunk_cache._CACHE = None


def _lookups() -> tuple:
    from dimbsvm.store import chunk_cache

    cache = chunk_cache._CACHE
    return (cache.misses, cache.hits) if cache is not None else (0, 0)


def _run(arm, job, client, out):
    from dimbsvm.jobs.runner import run_job
    from dimbsvm.parallel import tasks

    share = 0.0 if "no cache" in arm else float(os.environ.get("BENCH_DEFAULT_SHARE", "0.25"))
    _use_cache(share)
    if client is not None:
        client.run(_use_cache, share)
    real = tasks._affinity_workers
    if "no affinity" in arm:
        tasks._affinity_workers = lambda client: []
    for left in (out, out.parent / f".{out.name}.partial"):  # (an interrupted benchmark's run would be resumed)
        shutil.rmtree(left, ignore_errors=True)
    try:
        start = time.perf_counter()
        result = run_job(job, client, out=out, progress=False)
        wall = time.perf_counter() - start
    finally:
        tasks._affinity_workers = real
    counts = [_lookups(), *(client.run(_lookups).values() if client is not None else [])]
    misses, hits = (sum(c[k] for c in counts) for k in (0, 1))
    records = [{k: v for k, v in r.items() if "time" not in k} for r in result.folds]
    return wall, misses, hits, records


def measure(n: int, repeats: int, workdir: Path, arms) -> list[dict]:
    from dimbsvm.distributed.client import cluster_client
    from dimbsvm.jobs import validate_job

    path = make_store(n, workdir)
    job = validate_job(dict(JOB, name=f"cache-{n}", data={"source": str(path)}))
    rows = {arm: {"n": n, "arm": arm, "walls": [], "decodes": None, "hits": None} for arm in arms}
    reference, same = None, True
    with cluster_client(n_workers=2) as client:
        client.run(lambda: None)
        for repeat in range(repeats):
            for arm in arms:
                wall, misses, hits, records = _run(arm, job, client if arm.startswith("2 workers") else None,
                                                   workdir / "run")
                reference = reference if reference is not None else records
                same &= records == reference
                row = rows[arm]
                row["walls"].append(wall)
                row["decodes"], row["hits"] = misses, hits
                logger.info("n=%d %s (repeat %d): %.1f s, %d decodes, %d hits", n, arm, repeat, wall, misses, hits)
    _use_cache(float(os.environ.get("BENCH_DEFAULT_SHARE", "0.25")))
    base = float(np.median(rows[arms[0]]["walls"]))
    for row in rows.values():
        row["wall_s"] = float(np.median(row["walls"]))
        row["ratio"] = row["wall_s"] / base
        row["same_records"] = same
    return list(rows.values())


def _count(row, key) -> str:
    return "-" if "no cache" in row["arm"] else f"{row[key]:,}"


def render_markdown(summary: dict) -> str:
    lines = ["| n | arm | repeats | run_job s, median (min-max) | / first arm | decodes | cache hits | same records |",
             "|---|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        lines.append(f"| {r['n']:,} | {r['arm']} | {len(r['walls'])} | {r['wall_s']:.1f} ({min(r['walls']):.1f}-"
                     f"{max(r['walls']):.1f}) | {r['ratio']:.2f} | {_count(r, 'decodes')} | {_count(r, 'hits')} | "
                     f"{'yes' if r['same_records'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--workdir", default="/tmp/dimbsvm-chunk-cache")
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--note", default="", help="a sentence about the machine's state")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started, wall = utc_now(), time.perf_counter()
    rows = [row for n in args.sizes for row in measure(n, args.repeats, workdir, tuple(args.arms))]
    command = "python -m benchmarks.chunk_cache"
    if args.sizes != [2_000_000, 10_000_000]:
        command += " --sizes " + " ".join(map(str, args.sizes))
    if args.repeats != 3:
        command += f" --repeats {args.repeats}"
    summary = {"kind": "chunk_cache", "title": "A store job with and without the decoded-chunk cache, in this "
                                                "process and on two workers (issue 33)",
               "command": command + (f" --out {args.out}" if args.out else ""),
               "description": docstring_text(__doc__, 3, note=args.note),
               **when_and_where(started, wall), "rows": rows}
    return publish(summary, render_markdown, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
