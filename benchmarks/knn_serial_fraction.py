"""Serial fraction of the partitioned kNN graph build on two workers: Amdahl's projection to 16 and 64.

Usage (from the repository root)::

    python -m benchmarks.knn_serial_fraction --sizes 1000000 10000000 --out benchmarks/results/knn-serial-fraction
    python -m benchmarks.results benchmarks/results/knn-serial-fraction --update

The same decomposition as :mod:`benchmarks.serial_fraction` (issue 34, item 4),
applied to the stored partitioned build of a kNN graph
(:func:`dimbsvm.model_selection.graph_build.knn_graph`, k = 10, the build's
defaults) instead of a job. Data: :mod:`benchmarks.knn_scale`'s clustered blobs
(32 float32 features, 50 centres), ingested once into a Zarr store under
``--cache``, shared with ``knn_scale``.

For every size a fresh external cluster (``dask scheduler`` and two
single-threaded ``dask worker`` processes on 127.0.0.1,
:class:`benchmarks.serial_fraction.ExternalCluster`) is started; its workers
compile pynndescent's numba code first (:func:`~dimbsvm.distributed.warmup.warm_up_workers`,
reported apart: every worker pays it once, at the same time as the others, so
it adds the same seconds at any number of workers). Then this process calls
``knn_graph`` on the store with a client of that cluster while Dask's task
stream is recorded. T is the call's wall time (the client's routing, planning
and merging included, Python's start and imports not); it is split into o (no
task running), s (one worker busy) and p (both busy), and projected as
``Tn = o + s + 2p/n``. Recall is measured against the exact neighbours of
``knn_scale``'s fixed 2,000-row sample, so a change to the build that moved
the graph would show.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.knn_serial_fraction")

TITLE = "Serial fraction of the partitioned kNN graph build on 2 workers: Amdahl's projection to 16 and 64 (2 cores)"
DESCRIPTION = (
    "`knn_graph(store, 10, client=...)` (the partitioned build, its defaults: width 32, overlap 2, partitions of "
    "at most 200,000 rows, refinement while the stage's sample recall is under 0.95) on knn_scale's clustered "
    "blobs (32 float32 features, 50 centres, chunks of 50,000 rows), called from this process against an external "
    "cluster: `dask scheduler` and two `dask worker --nthreads 1 --nworkers 1` processes (nanny, dimbsvm's malloc "
    "preload) on 127.0.0.1, a fresh cluster per size and repeat, numba compiled on every worker before the clock "
    "starts (warm-up, reported apart; every worker pays it at the same time, so it is a constant in Tn). T: the "
    "call's wall time; o: no task running; s: exactly one worker busy; p: both (the `compute` part of each task's "
    "task-stream record). T1 = o + s + 2p, Tn = o + s + 2p/n: Amdahl's upper bound, which assumes n ready tasks "
    "throughout p; the ready-task table checks it. Recall: against the exact neighbours of knn_scale's fixed "
    "2,000-row sample.")


def build_size(store: Path, exact, n: int, workdir: Path, *, memory_limit: str) -> dict:
    """The partitioned build of ``store`` on a fresh two-worker external cluster, its task stream analysed."""
    import zarr
    from distributed import Client, get_task_stream

    from benchmarks.knn_scale import K, SAMPLE, fixed_sample
    from benchmarks.serial_fraction import ExternalCluster, _scheduler_transitions, analyse
    from dimbsvm.distributed.warmup import warm_up_workers
    from dimbsvm.graph import open_knn_graph
    from dimbsvm.graph.knn import recall_of
    from dimbsvm.model_selection.graph_build import knn_graph

    shutil.rmtree(store / "knn", ignore_errors=True)  # the benchmark's own stage: time a fresh build
    with ExternalCluster(workdir, memory_limit=memory_limit) as cluster, \
            Client(scheduler_file=str(cluster.scheduler_file), timeout=30) as client:
        warm = warm_up_workers(client)
        with get_task_stream(client) as stream:
            start = time.time()
            knn_graph(str(store), K, random_state=0, client=client, recall_sample=SAMPLE)
            stop = time.time()
        transitions = client.run_on_scheduler(_scheduler_transitions)
        records = stream.data
    meta = open_knn_graph(store).meta
    found = zarr.open_array(str(store / "knn" / "indices"), mode="r").get_orthogonal_selection(
        (fixed_sample(n), slice(None)))
    result = analyse(records, transitions, start, stop)
    result.update(warm_up_s=max(warm.values()), recall=recall_of(found, exact), stage_recall=meta.get("recall"),
                  rounds=meta.get("rounds"), round_widths=meta.get("round_widths"),
                  n_partitions=meta.get("n_partitions"), timings=meta.get("timings"))
    return result


def render_markdown(summary: dict) -> list[str]:
    """The job benchmark's tables, then each build's warm-up, recall and partitions."""
    from benchmarks.serial_fraction import render_markdown as decomposition

    lines = decomposition(summary, started="the `knn_graph` call")
    lines += ["", "Builds: numba warm-up (not in T; the slowest worker's), graph and recall:", "",
              "| n | repeat | warm-up s | partitions | refinement rounds | recall (stage sample) "
              "| recall (fixed sample) | T16 + warm-up s | speed-up 16 with warm-up |", "|---" * 9 + "|"]
    for r in summary["runs"]:
        a16, warm = r["amdahl_16"], r["warm_up_s"]
        t16 = a16["Tn"] + warm
        lines.append(f"| {r['n']:,} | {r.get('repeat', 0)} | {warm:.1f} | {r['n_partitions']} | {r['rounds']} "
                     f"| {r['stage_recall']:.4f} | {r['recall']:.4f} | {t16:.1f} "
                     f"| {(a16['T1'] + warm) / t16:.2f} |")
    return lines


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.knn_serial_fraction``."""
    from benchmarks.knn_scale import D, PACKAGES, data_store
    from benchmarks.results import write_summary
    from benchmarks.serial_fraction import command_line

    parser = argparse.ArgumentParser(prog="python -m benchmarks.knn_serial_fraction",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--repeats", type=int, default=1, help="builds per size, each on a fresh cluster")
    parser.add_argument("--cache", default="/tmp/knn-cache", help="stores and exact answers (shared with knn_scale)")
    parser.add_argument("--out", default="benchmarks/results/knn-serial-fraction")
    parser.add_argument("--note", help="appended to the description (e.g. what else ran on the machine)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    summary = {"kind": "knn_serial_fraction", "command": "python -m benchmarks.knn_serial_fraction " + command_line(
        sys.argv[1:] if argv is None else argv), "date": utc_now(), "machine": machine_info(),
        "packages": package_versions(PACKAGES), "title": TITLE,
        "description": DESCRIPTION + (" " + args.note if args.note else ""), "runs": []}
    tic = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="dimbsvm-knn-serial-"))
    try:
        for n in args.sizes:
            store, exact = data_store(argparse.Namespace(n=n, d=D, cache=args.cache, chunk_rows=args.chunk_rows))
            for repeat in range(args.repeats):
                run = build_size(store, exact, n, workdir, memory_limit=args.memory_limit)
                summary["runs"].append(dict(run, n=n, repeat=repeat, chunks=-(-n // args.chunk_rows)))
                logger.info("n=%d: T %.1f s = o %.1f + s %.1f + p %.1f; projected speed-up 16: %.2f, 64: %.2f; "
                            "recall %.4f", n, run["T"], run["o"], run["s"], run["p"], run["amdahl_16"]["speedup"],
                            run["amdahl_64"]["speedup"], run["recall"])
                summary["wall_seconds"] = time.perf_counter() - tic
                write_summary(args.out, summary, "\n".join(render_markdown(summary)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(render_markdown(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
