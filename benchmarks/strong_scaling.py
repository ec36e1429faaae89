"""Strong scaling: the same job on the same data with 1, 2, 4, ... worker processes.

Usage (from the repository root)::

    python -m benchmarks.strong_scaling --sizes 1000000 --workers 1 2 --out benchmarks/results/strong
    python -m benchmarks.strong_scaling --sizes 10000000 --workers 1 2 4 8 16 --chunks 128 --out DIR
    python -m benchmarks.strong_scaling --merge DIR_A DIR_B --labels A B --title T --out DIR   # one table

For every n the data is generated once (``make_imbalanced``: 32 features,
1 % minority, stored as float32) into a Zarr store cut into ``--chunks`` equal chunks - the same
chunking for every worker count, so every configuration does the same work.
Then, for every worker count, on a fresh embedded cluster of single-threaded
worker processes (cluster start not timed):

- ``features``: similarity features, distances of every row to 64 references
  written to the store (``write_distance_blocks``);
- ``ensemble``: ``EnsembleOTHRClassifier(LinearSVC, 16 members, balanced bags
  of 20,000 rows)`` on the first 80 % of rows through the fold engine
  (prepare / 16 member tasks / finish: pooled out-of-bag threshold and the
  last 20 % of rows scored); the member phase is timed from the task stream;
- ``job``: the job a user runs, 2-fold CV and the final model of the same
  ensemble submitted together (:func:`dimbsvm.jobs.run_job`), with the
  cluster's utilisation: busy task seconds / (wall seconds x workers).

``--start warm``: before the timed stages, the same job runs once on a small
store (64,000 rows, the same chunk count), so that every worker has imported
what the tasks import, as on a cluster that has run a task before; without
it each fresh worker imports scikit-learn, SciPy and dimbsvm inside the
timed stage (1.5-3 CPU s a process). Each worker's idle CPU (Dask's
heartbeats, memory monitor and profiler) is measured over a few seconds
before the stages; *above idle* is the workers' CPU less that rate times the
stage's worker-seconds, which is what a stage's work costs: on a machine with
fewer cores than workers the idle cost grows with the workers for no work.

Per stage: wall seconds, CPU seconds (worker processes and this one),
speed-up and parallel efficiency against one worker, peak worker memory
(``VmHWM``, not ``ru_maxrss``, which carries the spawning process's peak),
and per task kind the seconds its thread spent on a CPU and off it (Dask's
fine performance metrics). A summary JSON is written to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dimbsvm.environment import machine_info, package_versions, peak_rss_bytes, utc_now

logger = logging.getLogger("benchmarks.strong_scaling")

N_FEATURES = 32
MINORITY = 0.01
N_MEMBERS = 16
BAG = 20_000


def _cpu_seconds(dask_worker=None) -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss(dask_worker=None) -> int:
    return peak_rss_bytes()


def _execute_seconds(dask_worker) -> dict:
    """The worker's cumulative seconds of task execution per (task kind, activity), from Dask's fine
    performance metrics: ``thread-cpu`` (the task thread on a CPU) and ``thread-noncpu`` (the task running
    but its thread not on a CPU: waiting for a CPU, for I/O or for another thread, such as zarr's decoding)."""
    seconds = {}
    for key, value in dask_worker.digests_total.items():  # ("execute", span id, task kind, activity, unit)
        if isinstance(key, tuple) and len(key) == 5 and key[0] == "execute" and key[4] == "seconds":
            name = f"{key[2]}|{key[3]}"
            seconds[name] = seconds.get(name, 0.0) + value
    return seconds


def fine_phases(before: dict, after: dict) -> dict:
    """``{task kind: {"thread_cpu": s, "thread_noncpu": s}}`` over all workers between two snapshots
    (``{worker: _execute_seconds()}``; a worker absent from ``before`` counts from zero)."""
    out = {}
    for worker, seconds in after.items():
        for name, value in seconds.items():
            kind, activity = name.split("|")
            if activity in ("thread-cpu", "thread-noncpu"):
                delta = value - before.get(worker, {}).get(name, 0.0)
                phase = out.setdefault(kind, {"thread_cpu": 0.0, "thread_noncpu": 0.0})
                phase[activity.replace("-", "_")] += delta
    return out


def _ensemble():
    from sklearn.svm import LinearSVC

    from dimbsvm.svm import EnsembleOTHRClassifier

    return EnsembleOTHRClassifier(LinearSVC(C=1.0, dual=False), n_estimators=N_MEMBERS, bootstrap="balanced",
                                  max_samples=BAG, random_state=0)


def make_store(n: int, chunks: int, workdir: Path, compression: str = "zstd") -> Path:
    """Generate the data once into a store of ``chunks`` equal chunks (``syn-<n>.zarr``; ``syn-<n>-lz4.zarr``)."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.store import ingest

    chunk_rows = -(-n // chunks)
    X, y = make_imbalanced(n, n_features=N_FEATURES, minority_fraction=MINORITY, chunks=chunk_rows, random_state=0)
    path = workdir / (f"syn-{n}.zarr" if compression == "zstd" else f"syn-{n}-{compression}.zarr")
    ingest((X, y), path, chunk_rows=chunk_rows, dtype="float32", compression=compression)
    return path


def _task_phases(stream) -> dict:
    """Per task kind (key prefix): busy seconds, first start, last stop."""
    phases = {}
    for task in stream:
        kind = str(task["key"]).split("-")[0]
        for part in task["startstops"]:
            if part["action"] != "compute":
                continue
            phase = phases.setdefault(kind, {"busy": 0.0, "start": np.inf, "stop": -np.inf, "tasks": 0})
            phase["busy"] += part["stop"] - part["start"]
            phase["start"] = min(phase["start"], part["start"])
            phase["stop"] = max(phase["stop"], part["stop"])
            phase["tasks"] += 1
    return {k: dict(v, wall=v["stop"] - v["start"]) for k, v in phases.items()}


IDLE_SECONDS = 5.0


def _idle_rate(client, seconds: float = IDLE_SECONDS) -> float:
    """CPU seconds a worker of ``client`` spends per second while no task runs."""
    before = sum(client.run(_cpu_seconds).values())
    start = time.perf_counter()
    time.sleep(seconds)
    spent = sum(client.run(_cpu_seconds).values()) - before
    return spent / ((time.perf_counter() - start) * len(client.scheduler_info()["workers"]))


def _job_stage(store: Path, rows, y, meta, lazy_X, client, run_dir: Path, bag: int = BAG):
    from dimbsvm.jobs import JobData, run_job, validate_job

    job = validate_job({"name": "strong", "data": {"source": str(store)},
                        "estimator": {"name": "ensemble_othr", "params": {
                            "estimator": "linear_svc", "n_estimators": N_MEMBERS, "bootstrap": "balanced",
                            "max_samples": bag, "random_state": 0}},
                        "cv": {"n_splits": 2, "n_repeats": 1, "random_state": 0},
                        "metrics": ["g_mean", "f_measure"]})
    data = JobData(X=rows, y=y, meta=dict(meta, source=str(store)), lazy_X=lazy_X)
    shutil.rmtree(run_dir, ignore_errors=True)
    result = run_job(job, client, out=run_dir, progress=False, data=data)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def _warm_up(warm_store: Path, client) -> None:
    """The job once on a small store: every worker imports what the tasks import."""
    from dimbsvm.store import StoreRows, open_store

    stored = open_store(warm_store)
    _job_stage(warm_store, StoreRows(warm_store, stored.X.shape), np.asarray(stored.y.compute()), stored.meta,
               stored.X, client, warm_store.parent / "run-warm", bag=2_000)


def run_config(store: Path, n_workers: int, stages, memory_limit: str, malloc: str = "dimbsvm",
               warm_store: Path | None = None) -> dict:
    """Every stage on a fresh cluster of ``n_workers`` single-threaded worker processes.

    ``malloc``: ``"dimbsvm"`` starts the workers with dimbsvm's malloc settings
    (:mod:`dimbsvm.distributed.worker_memory`, as ``dimbsvm run`` does),
    ``"dask"`` with Dask's defaults.
    """
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster, get_task_stream

    from dimbsvm.distributed.worker_memory import spawning_workers
    from dimbsvm.features import write_distance_blocks
    from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
    from dimbsvm.store import StoreRows, open_store

    stored = open_store(store)
    n = int(stored.X.shape[0])
    y = np.asarray(stored.y.compute())
    rows = StoreRows(store, stored.X.shape)
    out = {"n": n, "workers": n_workers, "malloc": malloc, "warm": warm_store is not None, "stages": {}}
    # (each cluster's nannies leave this process's environment as they found it, so arms do not mix)
    with spawning_workers(parse_bytes(memory_limit), malloc=malloc == "dimbsvm"), \
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                         memory_limit=memory_limit) as cluster, Client(cluster) as client:
        client.run(lambda: None)  # workers up before any timing
        if warm_store is not None:
            _warm_up(warm_store, client)
        out["idle_cpu_per_worker_second"] = idle = _idle_rate(client)

        def measured(name, func):
            cpu_workers = sum(client.run(_cpu_seconds).values())
            cpu_here = _cpu_seconds()
            fine_before = client.run(_execute_seconds)
            start = time.perf_counter()
            with get_task_stream(client) as stream:
                result = func()
            wall = time.perf_counter() - start
            stage = {"wall": wall, "cpu_workers": sum(client.run(_cpu_seconds).values()) - cpu_workers,
                     "cpu_client": _cpu_seconds() - cpu_here, "phases": _task_phases(stream.data),
                     "fine": fine_phases(fine_before, client.run(_execute_seconds))}
            busy = sum(p["busy"] for p in stage["phases"].values())
            stage["utilisation"] = busy / (wall * n_workers) if wall > 0 else None
            stage["cpu_idle"] = idle * wall * n_workers
            out["stages"][name] = stage
            logger.info("n=%d workers=%d %s: %.1f s wall, utilisation %.2f", n, n_workers, name, wall,
                        stage["utilisation"] or 0)
            return result

        if "features" in stages:
            rng = np.random.default_rng(0)
            references = stored.X[np.sort(rng.choice(n, 64, replace=False))].compute().astype(np.float64)
            measured("features", lambda: write_distance_blocks(
                store, references, "euclidean", store=store, name=f"strong-{n_workers}", dtype="float32",
                fingerprint=f"strong-{n}-{n_workers}", client=client))
        if "ensemble" in stages:
            n_train = int(0.8 * n)
            spec = FoldSpec((0, 0), np.arange(n_train), np.arange(n_train, n),  # a holdout fold
                            split={"test_from": n_train})
            [result], _ = measured("ensemble", lambda: run_folds(
                FoldSetup(_ensemble(), 1, scaler="minmax", impute="none", metrics=("g_mean", "f_measure")), rows, y,
                [spec], client=client, retries=0, task_labels=rows.labels()))
            out["quality"] = {k: result["record"][k] for k in ("g_mean", "f_measure")}
        if "job" in stages:
            measured("job", lambda: _job_stage(store, rows, y, stored.meta, stored.X, client,
                                               store.parent / f"run-{n}-{n_workers}"))
        out["peak_worker_rss_bytes"] = max(client.run(_peak_rss).values())
    return out


def with_speedups(runs: list[dict]) -> list[dict]:
    """Speed-up and efficiency of every stage against the one-worker run of the same n."""
    base = {(r["n"], r.get("malloc"), r.get("warm"), r.get("repeat"), name): s["wall"] for r in runs
            if r["workers"] == 1 for name, s in r["stages"].items()}
    for r in runs:
        for name, s in r["stages"].items():
            one = base.get((r["n"], r.get("malloc"), r.get("warm"), r.get("repeat"), name))
            if one:
                s["speedup"] = one / s["wall"]
                s["efficiency"] = s["speedup"] / r["workers"]
    return runs


def merge(directories, *, labels, title=None, description=None) -> dict:
    """One summary from several runs' summaries (e.g. before and after a change), each run labelled."""
    merged = None
    for directory, label in zip(directories, labels, strict=True):
        summary = json.loads((Path(directory) / "summary.json").read_text())
        if merged is None:
            merged = dict(summary, runs=[], command=[])
        merged["command"].append(summary["command"])
        merged["runs"].extend(dict(run, label=label) for run in summary["runs"])
    merged["title"], merged["description"] = title, description
    return merged


def outside_tasks(stage: dict) -> float:
    """Seconds of a stage's wall time outside the span of its tasks: the client's work alone (before the
    first task starts and after the last one ends: label split, checks, report)."""
    phases = stage["phases"].values()
    if not phases:
        return stage["wall"]
    return stage["wall"] - (max(p["stop"] for p in phases) - min(p["start"] for p in phases))


def render_markdown(summary: dict) -> str:
    """The strong-scaling table, as RESULTS.md shows it."""
    labelled = any("label" in r for r in summary["runs"])
    mallocs = any("malloc" in r for r in summary["runs"])  # (runs before the option have none)
    starts = any("warm" in r for r in summary["runs"])
    lines = ["| " + ("code | " if labelled else "") + ("malloc | " if mallocs else "") +
             ("workers start | " if starts else "") + "n | workers | stage | wall s | CPU s (workers) | speed-up "
             "| efficiency | utilisation | member phase s | outside tasks s | peak worker GiB |",
             "|---" * (11 + labelled + mallocs + starts) + "|"]
    for r in summary["runs"]:
        for name, s in r["stages"].items():
            member = s["phases"].get("member", {}).get("wall")
            lines.append(
                ("| " + r["label"] + " " if labelled else "") + ("| " + r.get("malloc", "dask") + " " if mallocs else "")
                + (("| warm " if r.get("warm") else "| cold ") if starts else "")
                + f"| {r['n']:,} | {r['workers']} | {name} | {s['wall']:.1f} | {s['cpu_workers']:.1f} | "
                f"{s.get('speedup', float('nan')):.2f} | {s.get('efficiency', float('nan')):.2f} | "
                f"{(s['utilisation'] or 0):.2f} | {'' if member is None else f'{member:.1f}'} | "
                f"{outside_tasks(s):.1f} | {r['peak_worker_rss_bytes'] / 2**30:.2f} |")
    if max((r.get("repeat") or 0 for r in summary["runs"]), default=0) > 0:
        lines += ["", "Medians over the repeats (speed-up: the median of each repeat's ratio to its own one-worker "
                  "run):", "", "| malloc | workers start | n | workers | stage | repeats | wall s | speed-up | "
                  "task busy s |", "|---|---|---|---|---|---|---|---|---|"]
        groups = {}
        for r in summary["runs"]:
            for name, s in r["stages"].items():
                start = "warm" if r.get("warm") else "cold"
                groups.setdefault((r.get("malloc", "dask"), start, r["n"], r["workers"], name), []).append(s)
        for (malloc, start, n, workers, name), stages in groups.items():
            busy = [sum(p["busy"] for p in s["phases"].values()) for s in stages]
            lines.append(f"| {malloc} | {start} | {n:,} | {workers} | {name} | {len(stages)} | "
                         f"{np.median([s['wall'] for s in stages]):.1f} | "
                         f"{np.median([s.get('speedup', np.nan) for s in stages]):.2f} | {np.median(busy):.1f} |")
    if any("cpu_idle" in s for r in summary["runs"] for s in r["stages"].values()):
        lines += ["", *render_cpu(summary)]
    if any(s.get("fine") for r in summary["runs"] for s in r["stages"].values()):
        lines += ["", *render_fine(summary)]
    return "\n".join(lines)


def render_cpu(summary: dict) -> list:
    """The workers' CPU per run and stage, all of it and above their idle rate, each against the one-worker run
    of the same size, start and repeat."""
    def key(r, name):
        return r["n"], r.get("warm"), r.get("repeat"), r.get("label"), name

    one = {key(r, name): s for r in summary["runs"] if r["workers"] == 1 for name, s in r["stages"].items()}
    lines = ["Workers' CPU seconds: all of it, their idle rate times the stage's worker-seconds, and the rest "
             "(above idle), each also as a multiple of the one-worker run's:", "",
             "| workers start | n | workers | repeat | stage | CPU s | idle s | above idle s | CPU x one | "
             "above idle x one |", "|---" * 10 + "|"]
    for r in summary["runs"]:
        for name, s in r["stages"].items():
            if "cpu_idle" not in s:
                continue
            above = s["cpu_workers"] - s["cpu_idle"]
            base = one.get(key(r, name))
            ratios = ("", "") if base is None else (f"{s['cpu_workers'] / base['cpu_workers']:.2f}",
                                                   f"{above / (base['cpu_workers'] - base['cpu_idle']):.2f}")
            lines.append(f"| {'warm' if r.get('warm') else 'cold'} | {r['n']:,} | {r['workers']} | "
                         f"{r.get('repeat', 0)} | {name} | {s['cpu_workers']:.1f} | {s['cpu_idle']:.1f} | "
                         f"{above:.1f} | {ratios[0]} | {ratios[1]} |")
    return lines


def render_fine(summary: dict, kinds=("read", "oob", "assemble", "member", "bag", "score")) -> list:
    """Per run and stage, each task kind's seconds of thread CPU and of waiting (Dask's fine metrics), summed
    over workers: ``cpu / waiting``."""
    labelled = any("label" in r for r in summary["runs"])
    starts = any("warm" in r for r in summary["runs"])
    lines = ["Task seconds by kind, summed over workers: thread CPU / thread not on a CPU (Dask's fine "
             "performance metrics: waiting for a CPU, for I/O or for another thread such as zarr's decoding):", "",
             "| " + ("code | " if labelled else "") + ("workers start | " if starts else "") + "workers | repeat | "
             "stage | " + " | ".join(kinds) + " |", "|---" * (3 + labelled + starts + len(kinds)) + "|"]
    for r in summary["runs"]:
        for name, s in r["stages"].items():
            fine = s.get("fine")
            if not fine:
                continue
            cells = [f"{fine[k]['thread_cpu']:.2f} / {fine[k]['thread_noncpu']:.2f}" if k in fine else ""
                     for k in kinds]
            lines.append(("| " + r["label"] + " " if labelled else "")
                         + (("| warm " if r.get("warm") else "| cold ") if starts else "")
                         + f"| {r['workers']} | {r.get('repeat', 0)} "
                         f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.strong_scaling",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunks", type=int, default=64, help="equal chunks of the store (same for every run)")
    parser.add_argument("--stages", nargs="+", default=["features", "ensemble", "job"],
                        choices=["features", "ensemble", "job"])
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--malloc", nargs="+", choices=["dimbsvm", "dask"], default=["dimbsvm"],
                        help="workers' malloc settings: dimbsvm's (as dimbsvm run starts them) and/or Dask's defaults")
    parser.add_argument("--start", nargs="+", choices=["cold", "warm"], default=["cold"],
                        help="workers as started (cold) and/or after the job ran once on a small store (warm)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration, alternating")
    parser.add_argument("--compression", choices=["zstd", "lz4"], default="zstd", help="the store's chunk codec")
    parser.add_argument("--workdir", help="where the stores go (default: a temporary directory)")
    parser.add_argument("--out", default="benchmarks/results/strong_scaling")
    parser.add_argument("--merge", nargs="+", metavar="DIR", help="combine these results directories into --out "
                        "(no run), labelling their runs with --labels")
    parser.add_argument("--labels", nargs="+", help="one label per --merge directory (the code each ran)")
    parser.add_argument("--title")
    parser.add_argument("--description")
    args = parser.parse_args(argv)
    if args.merge:
        merged = merge(args.merge, labels=args.labels or [Path(d).name for d in args.merge], title=args.title,
                       description=args.description)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "summary.json").write_text(json.dumps(merged, indent=2, default=float) + "\n")
        print(render_markdown(merged))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dimbsvm-strong-"))
    workdir.mkdir(parents=True, exist_ok=True)
    summary = {"kind": "strong_scaling", "command": "python -m benchmarks.strong_scaling " + " ".join(
        sys.argv[1:] if argv is None else argv), "date": utc_now(), "machine": machine_info(),
        "packages": package_versions(), "runs": []}
    try:
        for n in args.sizes:
            start = time.perf_counter()
            store = make_store(n, args.chunks, workdir, args.compression)
            summary.setdefault("ingest_seconds", {})[str(n)] = time.perf_counter() - start
            warm_store = make_store(64_000, args.chunks, workdir, args.compression) if "warm" in args.start else None
            for repeat in range(args.repeats):
                for malloc, start_as, workers in itertools.product(args.malloc, args.start, args.workers):
                    run = run_config(store, workers, args.stages, args.memory_limit, malloc,
                                     warm_store=warm_store if start_as == "warm" else None)
                    summary["runs"].append(dict(run, repeat=repeat))
                    with_speedups(summary["runs"])
                    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(render_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
