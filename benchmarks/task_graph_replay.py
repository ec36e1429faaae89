"""A recorded job's task graph replayed on more workers than ran it: the speed-up the graph and the client allow.

Usage (from the repository root)::

    python -m benchmarks.task_graph_replay --sizes 10000000 --workers 2 16 64 128 --out benchmarks/results/replay
    python -m benchmarks.results benchmarks/results/replay --update

For every size n the data is generated once into a Zarr store
(``benchmarks.strong_scaling.make_store``: 32 float32 features, 1 % minority,
``--chunks`` equal chunks) and ``dimbsvm run --scheduler-file`` runs the
serial-fraction benchmark's job (EnsembleOTHRClassifier(LinearSVC), 16
members, balanced bags of 20,000 rows, 2-fold CV and the final model) on a
fresh external cluster of two single-threaded workers, as
:mod:`benchmarks.serial_fraction` does, its scheduler recording the job's
task graph (:mod:`benchmarks.task_graph_recorder`): every submission of tasks
and its time, every task's dependencies and the seconds its worker spent on
it (the start-stops of its compute, transfers and disk).

The replay (:func:`replay`, pure) runs that graph on ``w`` simulated
single-threaded workers:

- a task takes the seconds it took when recorded (its start-stops summed);
- it starts once its dependencies have finished, its submission has been
  made, and a worker is free; a free worker takes, of the tasks that may
  start, the one Dask ranks first (the priority the scheduler gave it, where
  recorded; else its submission's order: the plan submits tasks one by one,
  and Dask ranks a task by when it was submitted). The previous rule, every
  task taken in the order it started when recorded even while later ones
  could start, is kept as ``rule="recorded"`` and shown beside it: it holds
  the recording's two-worker order at every width, so its folds ran one
  after another where a scheduler with free workers overlaps them;
- the client's own time is kept where it was: a submission is made the same
  seconds after the task that finished last before it (in the recording) as
  it was, and the client's time before the first submission and after the last
  task is added as recorded.

Assumptions, stated because they flatter: a task's seconds do not grow with
more workers (no more transfers, no contention for memory bandwidth or disk;
RESULTS.md's 16-core strong-scaling measurement found the workers' total CPU
growing 2.4x from 1 to 16 workers, which this replay does not model); the
client's work that overlapped tasks still overlaps; every task that may start
is seen at once by every free worker (no queueing delay, no data locality). So
the replay is an upper
bound of what the graph allows. Its check: replayed on the 2 workers it was
recorded on, it should give the wall time measured (the table shows both).
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.task_graph_replay")

TITLE = "A recorded job's task graph replayed on 2, 16, 64 and 128 simulated workers (issue 49, item 4)"


def load_graph(path) -> tuple[dict, list]:
    """The recorder's file as ``(tasks, submissions)``.

    ``tasks``: ``{key: {"deps", "start", "stop", "seconds"}}`` (wall times of
    the first and last start-stop; seconds: their durations summed);
    ``submissions``: ``[(time, [key, ...])]`` in time order.
    """
    tasks, submissions = {}, []
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "graph":
            submissions.append((record["time"], record["tasks"]))
        elif record["startstops"]:
            parts = record["startstops"]
            tasks[record["key"]] = {"deps": record["deps"], "start": min(p["start"] for p in parts),
                                    "stop": max(p["stop"] for p in parts),
                                    "seconds": sum(p["stop"] - p["start"] for p in parts),
                                    "worker": record.get("worker"), "priority": record.get("priority"),
                                    "computes": [(p["start"], p["stop"]) for p in parts if p["action"] == "compute"]}
    return tasks, sorted(submissions, key=lambda s: s[0])


def replay(tasks: dict, submissions: list, start: float, stop: float, n_workers: int, rule: str = "ready") -> dict:
    """The wall time of the recorded run with ``n_workers`` single-threaded workers (the module's rules).

    Parameters
    ----------
    tasks, submissions
        :func:`load_graph`'s.
    start, stop : float
        Wall times the client started and ended.
    n_workers : int
    rule : {"ready", "recorded"}, default="ready"
        How a free worker picks its next task. ``"ready"``: among the tasks
        whose dependencies have finished and whose submission has been made,
        the one Dask ranks first (its recorded priority, else its submission
        and recorded start), as Dask's scheduler and workers do.
        ``"recorded"``: every task in the order it started when recorded, a
        worker waiting for the next one's dependencies even while later
        tasks are ready (the recording's two-worker order kept at any width:
        pessimistic, the replay's rule before 2026-11-29).

    Returns
    -------
    dict
        ``wall`` (seconds from the client's start to its end), ``busy``
        (the tasks' seconds summed), ``critical`` (the longest chain of
        dependencies and submissions, with the client's time: the wall time
        no number of workers beats), ``kinds`` (per kind of task, the name
        before its first ``-``: ``first`` start and ``last`` finish in the
        replay, seconds from the client's start, and ``busy`` seconds).

    Examples
    --------
    Two independent one-second tasks submitted at once, after a second of
    the client's own, and a second of it after them:

    >>> tasks = {"a": {"deps": [], "start": 1, "stop": 2, "seconds": 1.0},
    ...          "b": {"deps": [], "start": 2, "stop": 3, "seconds": 1.0}}
    >>> replay(tasks, [(1.0, ["a", "b"])], 0.0, 4.0, 1)["wall"], replay(tasks, [(1.0, ["a", "b"])], 0.0, 4.0, 2)["wall"]
    (4.0, 3.0)
    """
    if rule not in ("ready", "recorded"):
        raise ValueError(f"rule must be 'ready' or 'recorded', not {rule!r}")
    submitted, rank = {}, {}  # a task's submission: the first one at or before its recorded start
    for index, (when, keys) in enumerate(submissions):
        for key in keys:
            if key in tasks and key not in submitted and when <= tasks[key]["start"] + 1e-3:
                submitted[key], rank[key] = when, index
    stops = sorted((tasks[key]["stop"], key) for key in tasks)

    def anchor(when):
        """The task that finished last before ``when`` (None: none did), and the client's seconds after it."""
        import bisect

        at = bisect.bisect_left(stops, (when, "")) - 1
        return (None, when - start) if at < 0 else (stops[at][1], when - stops[at][0])

    anchors = {when: anchor(when) for when in set(submitted.values())}
    # what a task waits for: its dependencies, and the task its submission came after plus the client's seconds
    # (a dependency recorded as starting later, a shared value computed again under its key, is not waited for)
    waits = {key: ([dep for dep in task["deps"] if dep in tasks and tasks[dep]["start"] <= task["start"]],
                   anchors.get(submitted.get(key), (None, task["start"] - start))) for key, task in tasks.items()}
    order = sorted(tasks, key=lambda key: tasks[key]["start"])
    began = (_in_recorded_order if rule == "recorded" else _ready_first)(tasks, waits, order, rank, n_workers)
    finish = {key: began[key] + tasks[key]["seconds"] for key in tasks}
    earliest = {}
    for key in order:  # dependencies and anchors started earlier when recorded
        deps, (after, think) = waits[key]
        earliest[key] = max([(earliest.get(after, 0.0) if after is not None else 0.0) + think,
                             *(earliest[dep] for dep in deps if dep in earliest)]) + tasks[key]["seconds"]
    last = max(task["stop"] for task in tasks.values())
    tail = stop - last  # the client's own time after the last task, as recorded
    kinds = {}  # each kind of task: its first start and last finish in the replay, and its seconds
    for key, task in tasks.items():
        kind = key.split("-")[0]
        first, end, busy = kinds.get(kind, (float("inf"), 0.0, 0.0))
        kinds[kind] = (min(first, began[key]), max(end, finish[key]), busy + task["seconds"])
    return {"wall": max(finish.values()) + tail, "busy": sum(task["seconds"] for task in tasks.values()),
            "critical": max(earliest.values()) + tail,
            "kinds": {kind: {"first": a, "last": b, "busy": c} for kind, (a, b, c) in kinds.items()}}


def _released(key, waits, finish) -> float:
    """When ``key`` may start: its dependencies finished and its submission made (all of them known)."""
    deps, (after, think) = waits[key]
    return max([(finish[after] if after is not None else 0.0) + think, *(finish[dep] for dep in deps)])


def _in_recorded_order(tasks, waits, order, rank, n_workers) -> dict:
    """Start times: each task in ``order`` on the worker free first, once it is released."""
    free = [0.0] * n_workers  # seconds from the client's start at which each worker is free
    began, finish = {}, {}
    for key in order:
        worker = heapq.heappop(free)
        began[key] = max(_released(key, waits, finish), worker)
        finish[key] = began[key] + tasks[key]["seconds"]
        heapq.heappush(free, finish[key])
    return began


def _ready_first(tasks, waits, order, rank, n_workers) -> dict:
    """Start times: whenever a worker is free, the released task ranked first (event by event)."""
    position = {key: i for i, key in enumerate(order)}

    def priority(key):
        recorded = tasks[key].get("priority")
        return (0, tuple(recorded), position[key]) if recorded else (1, (rank.get(key, -1),), position[key])

    after_me = {key: [] for key in tasks}  # the tasks each one releases
    missing = {}
    for key, (deps, (after, _)) in waits.items():
        before = set(deps) | ({after} if after is not None else set())
        missing[key] = len(before)
        for other in before:
            after_me[other].append(key)
    began, finish = {}, {}
    arriving = [(_released(key, waits, finish), priority(key), key) for key in tasks if not missing[key]]
    heapq.heapify(arriving)
    ready, running, idle, now = [], [], n_workers, 0.0
    while arriving or ready or running:
        while arriving and arriving[0][0] <= now:
            _, rank_of, key = heapq.heappop(arriving)
            heapq.heappush(ready, (rank_of, key))
        while idle and ready:
            _, key = heapq.heappop(ready)
            began[key], idle = now, idle - 1
            heapq.heappush(running, (now + tasks[key]["seconds"], position[key], key))
        now = min(running[0][0] if running else float("inf"), arriving[0][0] if arriving else float("inf"))
        while running and running[0][0] <= now:
            done, _, key = heapq.heappop(running)
            finish[key], idle = done, idle + 1
            for other in after_me[key]:
                missing[other] -= 1
                if not missing[other]:
                    heapq.heappush(arriving, (_released(other, waits, finish), priority(other), other))
    return began


def record_run(store: Path, workdir: Path, *, n_members: int, bag: int, memory_limit: str, n_workers: int = 2) -> dict:
    """``dimbsvm run`` of the job on ``n_workers`` recorded workers: the graph file, the client's start and stop."""
    from benchmarks.serial_fraction import ExternalCluster, _env, job_spec

    job_file = workdir / "job.yaml"
    job_file.write_text(json.dumps(job_spec(store, n_members, bag), indent=2) + "\n")  # JSON is YAML
    run_dir, graph = workdir / "run", workdir / "graph.jsonl"
    shutil.rmtree(run_dir, ignore_errors=True)
    graph.unlink(missing_ok=True)
    with ExternalCluster(workdir, n_workers=n_workers, memory_limit=memory_limit,
                         scheduler_args=["--preload", "benchmarks.task_graph_recorder"],
                         scheduler_env={"DIMBSVM_TASK_GRAPH": str(graph)}) as cluster:
        start = time.time()
        proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "run", str(job_file), "--scheduler-file",
                               str(cluster.scheduler_file), "--out", str(run_dir), "--no-progress"],
                              cwd=workdir, env=_env(), capture_output=True, text=True)
        stop = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"dimbsvm run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"graph": graph.read_text(), "start": start, "stop": stop}


def render_markdown(summary: dict) -> str:
    workers = summary["workers"]
    recorded_on = summary.get("recorded_on", 2)
    lines = [f"| n | tasks | measured wall s ({recorded_on} worker{'s' if recorded_on > 1 else ''}) | busy s | client s | critical path s | "
             + " | ".join(f"replayed {w} s (speed-up)" for w in workers) + " | Amdahl's bound at 16 |",
             "|---" * (7 + len(workers)) + "|"]
    for run in summary["runs"]:
        one = run["replayed"]["1"]["wall"]
        cells = [f"{run['replayed'][str(w)]['wall']:.1f} ({one / run['replayed'][str(w)]['wall']:.2f}x)"
                 for w in workers]
        if "amdahl" in run:
            cells.append(f"{run['amdahl'].get('16', {}).get('speedup', float('nan')):.2f}x")
        lines.append(f"| {run['n']:,} | {run['tasks']:,} | {run['measured']:.1f} | {run['busy']:.1f} | "
                     f"{run.get('client', float('nan')):.1f} | {run['critical']:.1f} | " + " | ".join(cells) + " |")
    if any("in_recorded_order" in run for run in summary["runs"]):
        lines += ["", "The same graphs replayed by the previous rule (every task in the order it started when "
                  "recorded, a worker waiting for the next one's dependencies even while later tasks could start):",
                  "", "| n | " + " | ".join(f"in recorded order, {w} s (speed-up)" for w in workers) + " |",
                  "|---" * (1 + len(workers)) + "|"]
        for run in summary["runs"]:
            walls = run.get("in_recorded_order")
            if walls:
                lines.append(f"| {run['n']:,} | " + " | ".join(
                    f"{walls[str(w)]:.1f} ({walls['1'] / walls[str(w)]:.2f}x)" for w in workers) + " |")
    for run in summary["runs"]:
        at = run["replayed"].get("16", {}).get("kinds")
        if not at:
            continue
        lines += ["", f"Replayed on 16 workers at n = {run['n']:,}: each kind of task's first start and last finish "
                  "(seconds from the client's start) and its seconds; workers on average = seconds / (last - first).",
                  "", "| kind | tasks' seconds | first start s | last finish s | workers on average |",
                  "|---|---|---|---|---|"]
        for kind, span in sorted(at.items(), key=lambda item: item[1]["first"]):
            if span["busy"] >= 0.5:
                width = max(span["last"] - span["first"], 1e-9)
                lines.append(f"| {kind} | {span['busy']:.1f} | {span['first']:.1f} | {span['last']:.1f} | "
                             f"{span['busy'] / width:.1f} |")
    lines += ["", "Speed-ups are against the same graph replayed on one worker (by the same rule); Amdahl's bound: the serial-fraction "
              "benchmark's projection from the same run (T1 = o + s + 2p over Tn = o + s + 2p/n; an upper bound "
              "that assumes n ready tasks throughout the parallel part). busy: the tasks' seconds summed; "
              "client: the replay with every task taking no time (the client's own seconds on the way: start-up, "
              "checks, planning between submissions, the report); critical path: the longest chain of tasks and "
              "the client's seconds, what no number of workers beats."]
    return "\n".join(lines)


def main(argv=None) -> int:
    from benchmarks.results import docstring_text, write_summary
    from benchmarks.serial_fraction import amdahl, command_line, decompose
    from benchmarks.strong_scaling import BAG, N_MEMBERS, make_store

    parser = argparse.ArgumentParser(prog="python -m benchmarks.task_graph_replay",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000_000])
    parser.add_argument("--chunks", type=int, default=64, help="equal chunks of the store")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 16, 64, 128])
    parser.add_argument("--members", type=int, default=N_MEMBERS)
    parser.add_argument("--bag", type=int, default=BAG)
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--recorded-on", type=int, default=2,
                        help="workers the job is recorded on (1 checks the replay's rules against a measured run on 2)")
    parser.add_argument("--workdir", help="where the stores and the cluster's files go (default: temporary)")
    parser.add_argument("--out", default="benchmarks/results/replay")
    parser.add_argument("--note", help="appended to the description")
    parser.add_argument("--replay-only", action="store_true",
                        help="replay the graphs an earlier run kept in --workdir (graph-N.jsonl, window-N.json) "
                             "instead of running the job again")
    args = parser.parse_args(argv)
    if args.replay_only and not args.workdir:
        parser.error("--replay-only replays the graphs kept in --workdir: name it")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dimbsvm-replay-"))
    workdir.mkdir(parents=True, exist_ok=True)
    workers = sorted(set(args.workers) | {1})
    summary = {"kind": "task_graph_replay", "title": TITLE, "date": utc_now(), "machine": machine_info(),
               "packages": package_versions(),
               "command": "python -m benchmarks.task_graph_replay " + command_line(
                   sys.argv[1:] if argv is None else argv),
               "description": docstring_text(__doc__, 3, note=args.note or ""), "workers": args.workers,
               "recorded_on": args.recorded_on, "runs": []}
    tic = time.perf_counter()
    try:
        for n in args.sizes:
            store = None
            if args.replay_only:
                recorded = json.loads((workdir / f"window-{n}.json").read_text())
            else:
                store = make_store(n, args.chunks, workdir)
                recorded = record_run(store, workdir, n_members=args.members, bag=args.bag,
                                      memory_limit=args.memory_limit, n_workers=args.recorded_on)
                (workdir / f"graph-{n}.jsonl").write_text(recorded["graph"])
                (workdir / f"window-{n}.json").write_text(json.dumps({"start": recorded["start"],
                                                                      "stop": recorded["stop"]}))
            tasks, submissions = load_graph(workdir / f"graph-{n}.jsonl")
            replayed = {str(w): replay(tasks, submissions, recorded["start"], recorded["stop"], w) for w in workers}
            in_order = {str(w): replay(tasks, submissions, recorded["start"], recorded["stop"], w,
                                       rule="recorded")["wall"] for w in workers}
            instant = {key: dict(task, seconds=0.0) for key, task in tasks.items()}
            client = replay(instant, submissions, recorded["start"], recorded["stop"], 1)["wall"]
            # the serial-fraction benchmark's decomposition of the same run, and Amdahl's bound from it
            split = decompose([(task["worker"], a, b) for task in tasks.values() for a, b in task["computes"]],
                              recorded["start"], recorded["stop"])
            run = {"n": n, "tasks": len(tasks), "submissions": len(submissions), "client": client,
                   "amdahl": {str(w): amdahl(split["o"], split["s"], split["p"], w) for w in args.workers},
                   "measured": recorded["stop"] - recorded["start"], "busy": replayed["1"]["busy"],
                   "critical": replayed["1"]["critical"], "replayed": replayed, "in_recorded_order": in_order}
            summary["runs"].append(run)
            logger.info("n=%d: measured %.1f s on 2 workers, replayed %s", n, run["measured"],
                        {w: round(r["wall"], 1) for w, r in replayed.items()})
            summary["wall_seconds"] = time.perf_counter() - tic
            write_summary(args.out, summary, render_markdown(summary))
            if store is not None:
                shutil.rmtree(store, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(render_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
