"""The driver's own cost: the ``dimbsvm run`` process's memory and CPU against the rows of the store it runs on.

Usage (from the repository root)::

    python -m benchmarks.client_memory --sizes 1000000 10000000 --out benchmarks/results/client-memory
    python -m benchmarks.results benchmarks/results/client-memory --update

For every size n the data is generated once into a Zarr store
(``benchmarks.strong_scaling.make_store``: ``make_imbalanced``, 32 float32
features, 1 % minority, ``--chunks`` equal chunks). Then, on a fresh external
cluster (``dask scheduler`` and two single-threaded ``dask worker`` processes on
127.0.0.1, as :class:`benchmarks.serial_fraction.ExternalCluster` starts them),
``dimbsvm run --scheduler-file`` runs the serial-fraction benchmark's job
(EnsembleOTHRClassifier(LinearSVC), 16 members, balanced bags of 20,000 rows,
2-fold CV and the final model) as a subprocess, ``--repeats`` times.

Measured on the driver only (the workers are not its descendants): while it
runs, this process reads the proportional set size (PSS: shared pages divided
among their sharers) of the ``dimbsvm run`` process and of every process it
started (the report's side process and the copy it forks to draw) from
``/proc`` every ``--poll`` seconds; ``peak tree``: the largest sum seen,
``peak driver``: the
``dimbsvm run`` process's own ``VmHWM`` at its last reading. ``CPU s``: user and
system seconds of the driver and its descendants (``RUSAGE_CHILDREN`` before and
after; the workers are still running, so they are not counted). Per size the
medians over the repeats, and the growth from the smallest size per million
rows: what a row costs the driver. Beside them: the largest worker's peak
resident memory (``VmHWM``, from the run's ``resources.json``), the store's
bytes on disk, and the G-mean's standard deviation over the folds (the spread
two sizes' G-means are compared within). ``--chunk-rows`` keeps the chunks'
size, rather than their number, equal across sizes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

logger = logging.getLogger("benchmarks.client_memory")

TITLE = "The driver's memory and CPU against rows: `dimbsvm run` of the ensemble job on two workers (2 cores)"


def _status(pid: int) -> dict:
    """``VmHWM`` and ``Pss`` of process ``pid`` in bytes (empty once it is gone).

    The proportional set size, not the resident size, is what a tree of
    processes adds up to: the report's side process draws in a forked copy
    of itself, whose pages are shared with it until written.
    """
    out = {}
    for name, keys in (("status", ("VmHWM",)), ("smaps_rollup", ("Pss",))):
        try:
            text = Path(f"/proc/{pid}/{name}").read_text()
        except OSError:
            return {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key in keys:
                out[key] = int(value.split()[0]) * 1024
    return out


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                kids = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for kid in map(int, kids):
                found.append(kid)
                todo.append(kid)
    return found


def watch_process(proc: subprocess.Popen, poll: float) -> dict:
    """Poll ``proc`` and its descendants until it exits: the peak summed PSS and its own last ``VmHWM``."""
    peak_tree = driver_hwm = 0
    while proc.poll() is None:
        own = _status(proc.pid)
        driver_hwm = max(driver_hwm, own.get("VmHWM", 0))
        tree = own.get("Pss", 0) + sum(_status(kid).get("Pss", 0) for kid in _children(proc.pid))
        peak_tree = max(peak_tree, tree)
        time.sleep(poll)
    return {"peak_tree_bytes": peak_tree, "peak_driver_bytes": driver_hwm}


def run_driver(store: Path, workdir: Path, *, n_members: int, bag: int, memory_limit: str, poll: float) -> dict:
    """``dimbsvm run`` of the job on a fresh two-worker external cluster, its process tree watched."""
    from benchmarks.serial_fraction import ExternalCluster, _env, job_spec

    job_file = workdir / "job.yaml"
    job_file.write_text(json.dumps(job_spec(store, n_members, bag), indent=2) + "\n")  # JSON is YAML
    run_dir = workdir / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    with ExternalCluster(workdir, memory_limit=memory_limit):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with open(workdir / "driver.log", "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "run", str(job_file), "--scheduler-file",
                                     str(workdir / "scheduler.json"), "--out", str(run_dir), "--no-progress"],
                                    cwd=workdir, env=_env(), stdout=log, stderr=subprocess.STDOUT)
            watched = watch_process(proc, poll)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"dimbsvm run failed ({proc.returncode}):\n"
                           f"{(workdir / 'driver.log').read_text()[-4000:]}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    resources = json.loads((run_dir / "resources.json").read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dict(watched, wall_seconds=wall, cpu_seconds=cpu, g_mean=metrics["summary"]["g_mean"]["mean"],
                g_mean_std=metrics["summary"]["g_mean"]["std"],
                peak_worker_bytes=resources.get("peak_worker_memory_max_bytes") or 0)


def per_size(runs: list[dict]) -> list[dict]:
    """Medians over the repeats of each size, and the growth from the smallest size per million rows."""
    sizes = sorted({run["n"] for run in runs})
    rows = []
    for n in sizes:
        mine = [run for run in runs if run["n"] == n]
        rows.append({"n": n, "repeats": len(mine), **{key: float(np.median([run[key] for run in mine])) for key in
                                                      ("peak_tree_bytes", "peak_driver_bytes", "cpu_seconds",
                                                       "wall_seconds")},
                     "g_mean": mine[0]["g_mean"], "g_mean_std": mine[0].get("g_mean_std"),
                     "peak_worker_bytes": max(run.get("peak_worker_bytes", 0) for run in mine),
                     "store_bytes": mine[0].get("store_bytes")})
    base = rows[0]
    for row in rows[1:]:
        millions = (row["n"] - base["n"]) / 1e6
        row["tree_mb_per_million"] = (row["peak_tree_bytes"] - base["peak_tree_bytes"]) / 2**20 / millions
        row["driver_mb_per_million"] = (row["peak_driver_bytes"] - base["peak_driver_bytes"]) / 2**20 / millions
        row["cpu_s_per_million"] = (row["cpu_seconds"] - base["cpu_seconds"]) / millions
    return rows


def render_markdown(summary: dict) -> str:
    """The table: per size the medians, and the growth per million rows."""
    lines = ["| n | store on disk GB | repeats | peak tree MB | peak driver MB | peak worker MB | CPU s | wall s | "
             "tree MB per 10^6 rows | driver MB per 10^6 rows | CPU s per 10^6 rows | G-mean (std over folds) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in per_size(summary["runs"]):
        store = f"{row['store_bytes'] / 1e9:.2f}" if row.get("store_bytes") else "-"
        worker = f"{row['peak_worker_bytes'] / 2**20:.0f}" if row.get("peak_worker_bytes") else "-"
        spread = f" ({row['g_mean_std']:.4f})" if row.get("g_mean_std") is not None else ""
        lines.append(f"| {row['n']:,} | {store} | {row['repeats']} | {row['peak_tree_bytes'] / 2**20:.0f} | "
                     f"{row['peak_driver_bytes'] / 2**20:.0f} | {worker} | {row['cpu_seconds']:.1f} | "
                     f"{row['wall_seconds']:.1f} | {_growth(row, 'tree_mb_per_million', '.1f')} | "
                     f"{_growth(row, 'driver_mb_per_million', '.1f')} | {_growth(row, 'cpu_s_per_million', '.2f')} | "
                     f"{row['g_mean']:.4f}{spread} |")
    return "\n".join(lines)


def _growth(row: dict, key: str, spec: str) -> str:
    """A growth per million rows as the table shows it; ``-`` for the smallest size (the baseline)."""
    return format(row[key], spec) if key in row else "-"


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.client_memory``."""
    from benchmarks.results import docstring_text, write_summary
    from benchmarks.serial_fraction import command_line
    from benchmarks.strong_scaling import BAG, N_MEMBERS, make_store
    from dimbsvm.environment import machine_info, package_versions, utc_now

    parser = argparse.ArgumentParser(prog="python -m benchmarks.client_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--chunks", type=int, default=64, help="equal chunks of the store")
    parser.add_argument("--chunk-rows", type=int, help="rows per chunk instead (chunks: rows / this, rounded up)")
    parser.add_argument("--members", type=int, default=N_MEMBERS)
    parser.add_argument("--bag", type=int, default=BAG)
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--repeats", type=int, default=2, help="runs per size, each on a fresh cluster")
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between readings of /proc")
    parser.add_argument("--workdir", help="where the stores and the cluster's files go (default: temporary)")
    parser.add_argument("--out", default="benchmarks/results/client-memory")
    parser.add_argument("--note", help="appended to the description")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dimbsvm-client-"))
    workdir.mkdir(parents=True, exist_ok=True)
    summary = {"kind": "client_memory", "title": TITLE, "date": utc_now(), "machine": machine_info(),
               "packages": package_versions(),
               "command": "python -m benchmarks.client_memory " + command_line(sys.argv[1:] if argv is None else argv),
               "description": docstring_text(__doc__, 3, note=args.note or ""), "runs": []}
    tic = time.perf_counter()
    try:
        for n in args.sizes:
            store = make_store(n, -(-n // args.chunk_rows) if args.chunk_rows else args.chunks, workdir)
            store_bytes = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
            for repeat in range(args.repeats):
                run = run_driver(store, workdir, n_members=args.members, bag=args.bag,
                                 memory_limit=args.memory_limit, poll=args.poll)
                summary["runs"].append(dict(run, n=n, repeat=repeat, store_bytes=store_bytes))
                logger.info("n=%d: peak tree %.0f MB, driver %.0f MB, CPU %.1f s, wall %.1f s", n,
                            run["peak_tree_bytes"] / 2**20, run["peak_driver_bytes"] / 2**20, run["cpu_seconds"],
                            run["wall_seconds"])
                summary["wall_seconds"] = time.perf_counter() - tic
                write_summary(args.out, summary, render_markdown(summary))
            shutil.rmtree(store, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(render_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
