"""Serial fraction of a job on two workers: the wall time split by how many workers are busy.

Usage (from the repository root)::

    python -m benchmarks.serial_fraction --sizes 1000000 4000000 --out benchmarks/results/serial-fraction
    python -m benchmarks.results benchmarks/results/serial-fraction --update

For every size n the data is generated once into a Zarr store
(``benchmarks.strong_scaling.make_store``: ``make_imbalanced``, 32 float32
features, 1 % minority, ``--chunks`` equal chunks). Then, on a fresh external
cluster (``dask scheduler`` and two ``dask worker --nthreads 1 --nworkers 1``
processes on 127.0.0.1, started as subprocesses as ``deploy/`` starts them:
nanny, dimbsvm's malloc preload), ``dimbsvm run --scheduler-file`` runs the
strong-scaling benchmark's ``job`` (EnsembleOTHRClassifier(LinearSVC), 16
members, balanced bags of 20,000 rows, 2-fold CV and the final model) as a
subprocess, while this process records Dask's task stream and, afterwards,
the scheduler's transition log.

The client's wall time T (from starting ``dimbsvm run`` to its exit, so
Python's start and imports included) is split by the number of workers running
a task (the ``compute`` part of each task's start-stops):

- ``o``: no task running (imports, checks, client-side work, report);
- ``s``: exactly one worker busy;
- ``p``: both workers busy.

Amdahl's projection: one worker takes ``T1 = o + s + 2p``, n workers at best
``Tn = o + s + 2p / n`` (an upper bound on the speed-up ``T1 / Tn``, reached
only if the parallel part always has n ready tasks). Whether it has is read
from the scheduler's transition log: a task counts as *ready* from when it
enters ``queued``, ``processing`` or ``no-worker`` (its inputs are in memory)
to when it leaves them; the table shows the time-weighted histogram of ready
tasks, and how much of ``s`` had at least two ready tasks (one worker idle for
want of scheduling, not of work).

Per task kind (Dask's key prefix): tasks, busy seconds and the seconds it ran
alone (the other worker idle); and the longest gaps with no task running,
with the kinds of the tasks before and after.

The arithmetic (:func:`step_seconds`, :func:`decompose`, :func:`amdahl`,
:func:`kinds_alone`, :func:`gaps`, :func:`ready_events`) is pure: intervals
in, numbers out, no cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.serial_fraction")

ROOT = Path(__file__).resolve().parents[1]
#: Scheduler states in which a task's inputs are all in memory and it waits for, or holds, a worker thread.
READY_STATES = frozenset({"queued", "processing", "no-worker"})
#: Bins of the ready-tasks histogram: (low, high) inclusive, high None for no bound.
READY_BINS = ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 64), (65, None))
PROJECT_WORKERS = (16, 64)
TITLE = "Serial fraction of the ensemble job on 2 workers: Amdahl's projection to 16 and 64 (2 cores)"
DESCRIPTION = (
    "`dimbsvm run --scheduler-file` of the strong-scaling benchmark's job (EnsembleOTHRClassifier(LinearSVC), "
    "16 members, balanced bags of 20,000 rows, 2-fold CV and the final model; data checks and report included) "
    "on `make_imbalanced` stores (32 float32 features, 1 % minority, the table's equal chunks), against an external "
    "cluster: "
    "`dask scheduler` and two `dask worker --nthreads 1 --nworkers 1` processes (nanny, dimbsvm's malloc "
    "preload) on 127.0.0.1, a fresh cluster per size. T: the CLI's wall time, from starting the process to its "
    "exit (Python's start and imports included); o: no task running on either worker; s: exactly one busy; p: "
    "both (a task is running during the `compute` part of its task-stream record; transfers are not counted). "
    "T1 = o + s + 2p, Tn = o + s + 2p/n, speed-up T1/Tn: Amdahl's upper bound, which assumes n ready tasks "
    "throughout p. Ready tasks: from the scheduler's transition log (low-level-log-length raised to keep every "
    "transition), a task counts from entering `queued`/`processing`/`no-worker` to leaving them. `--repeats` "
    "runs per size, each on a fresh cluster (the store is generated once per size); the per-kind, gap and "
    "ready-task tables are the first repeat's.")


# --- the arithmetic: intervals in, numbers out ------------------------------------------------------------------

def step_seconds(events: Iterable[tuple[float, int]], start: float, stop: float) -> dict[int, float]:
    """Seconds a step function spends at each level within ``[start, stop]``.

    Parameters
    ----------
    events : iterable of (float, int)
        ``(time, change)`` pairs; the function is 0 before the first event and
        moves by ``change`` at each event's time. Events at the same time are
        applied together.
    start, stop : float
        The window; events before ``start`` set the level at ``start``.

    Returns
    -------
    dict of int to float
        ``{level: seconds}``, levels with zero seconds left out.

    Examples
    --------
    >>> step_seconds([(1.0, 1), (3.0, 1), (4.0, -2)], 0.0, 5.0)
    {0: 2.0, 1: 2.0, 2: 1.0}
    """
    seconds: dict[int, float] = {}
    level, at = 0, start
    for when, change in sorted(events):
        if when > at:
            seconds[level] = seconds.get(level, 0.0) + min(when, stop) - at
            at = when
        if at >= stop:
            break
        level += change
    if stop > at:
        seconds[level] = seconds.get(level, 0.0) + stop - at
    return {k: v for k, v in seconds.items() if v > 0}


def _merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as disjoint sorted intervals."""
    out: list[list[float]] = []
    for begin, end in sorted(intervals):
        if out and begin <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([begin, end])
    return [(b, e) for b, e in out]


def busy_events(tasks: Iterable[tuple[str, float, float]]) -> list[tuple[float, int]]:
    """``(time, +-1)`` events of the number of busy workers, from ``(worker, start, stop)`` task runs.

    A worker is busy while any of its tasks runs (its runs are merged first,
    so a worker counts once even if two of its intervals touch or overlap).
    """
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for worker, begin, end in tasks:
        by_worker.setdefault(worker, []).append((begin, end))
    events = []
    for intervals in by_worker.values():
        for begin, end in _merged(intervals):
            events += [(begin, 1), (end, -1)]
    return events


def decompose(tasks: Iterable[tuple[str, float, float]], start: float, stop: float) -> dict[str, float]:
    """Split the window ``[start, stop]`` of a two-worker run by the number of busy workers.

    Parameters
    ----------
    tasks : iterable of (str, float, float)
        ``(worker, start, stop)`` of every task run.
    start, stop : float
        The client's wall time window.

    Returns
    -------
    dict
        ``T`` (stop - start), ``o`` (no worker busy), ``s`` (one), ``p``
        (two or more; with two single-threaded workers, exactly two).

    Examples
    --------
    >>> decompose([("a", 1, 5), ("b", 3, 7)], 0, 10)
    {'T': 10, 'o': 4.0, 's': 4.0, 'p': 2.0}
    """
    levels = step_seconds(busy_events(tasks), start, stop)
    return {"T": stop - start, "o": levels.get(0, 0.0), "s": levels.get(1, 0.0),
            "p": sum(v for k, v in levels.items() if k >= 2)}


def amdahl(o: float, s: float, p: float, n: int) -> dict[str, float]:
    """Amdahl's projection of a two-worker decomposition to ``n`` workers.

    ``T1 = o + s + 2p`` (one worker runs both workers' share of ``p``),
    ``Tn = o + s + 2p / n``; ``speedup = T1 / Tn`` is an upper bound (it
    assumes ``n`` ready tasks throughout the parallel part).

    Examples
    --------
    >>> amdahl(1.0, 1.0, 4.0, 4)
    {'T1': 10.0, 'Tn': 4.0, 'speedup': 2.5}
    """
    t1 = o + s + 2 * p
    tn = o + s + 2 * p / n
    return {"T1": t1, "Tn": tn, "speedup": t1 / tn if tn > 0 else float("nan")}


def kinds_alone(tasks: Sequence[tuple[str, str, float, float]]) -> dict[str, dict[str, float]]:
    """Per task kind: runs, busy seconds, and seconds it ran with no other worker busy.

    Parameters
    ----------
    tasks : sequence of (str, str, float, float)
        ``(kind, worker, start, stop)`` of every task run.

    Returns
    -------
    dict
        ``{kind: {"tasks": int, "seconds": float, "alone": float}}``.

    Examples
    --------
    >>> kinds_alone([("read", "a", 0, 4), ("fit", "b", 2, 6)])
    {'read': {'tasks': 1, 'seconds': 4, 'alone': 2.0}, 'fit': {'tasks': 1, 'seconds': 4, 'alone': 2.0}}
    """
    out: dict[str, dict[str, float]] = {}
    for kind, _, begin, end in tasks:
        entry = out.setdefault(kind, {"tasks": 0, "seconds": 0, "alone": 0.0})
        entry["tasks"] += 1
        entry["seconds"] += end - begin
    # sweep over the elementary segments between all task boundaries; a segment with exactly one running
    # task (on one worker) is that task's kind running alone
    bounds = sorted({t for _, _, b, e in tasks for t in (b, e)})
    if len(bounds) < 2:
        return out
    bounds = np.asarray(bounds)
    running = np.zeros(len(bounds) - 1, dtype=np.int64)
    owner = np.full(len(bounds) - 1, -1, dtype=np.int64)
    workers_seen = [set() for _ in range(len(bounds) - 1)]
    for index, (_, worker, begin, end) in enumerate(tasks):
        first, last = np.searchsorted(bounds, [begin, end])
        for segment in range(first, last):
            if worker not in workers_seen[segment]:
                workers_seen[segment].add(worker)
                running[segment] += 1
            owner[segment] = index
    for segment in np.flatnonzero(running == 1):
        kind = tasks[owner[segment]][0]
        out[kind]["alone"] += float(bounds[segment + 1] - bounds[segment])
    return out


def gaps(tasks: Sequence[tuple[str, float, float]], start: float, stop: float,
         top: int = 10) -> list[dict]:
    """The longest intervals of ``[start, stop]`` with no task running, longest first.

    Parameters
    ----------
    tasks : sequence of (str, float, float)
        ``(kind, start, stop)`` of every task run, all workers together.
    start, stop : float
        The client's wall time window.
    top : int, default=10

    Returns
    -------
    list of dict
        ``at`` (seconds from ``start``), ``seconds``, ``before`` (the kind of
        the last task to end before the gap; ``"(start)"`` at the window's
        start) and ``after`` (the kind of the first task to start after it;
        ``"(end)"`` at its end).

    Examples
    --------
    >>> [g["seconds"] for g in gaps([("a", 1, 2), ("b", 5, 6)], 0, 10)]
    [4, 3, 1]
    >>> gaps([("a", 1, 2), ("b", 5, 6)], 0, 10)[1]
    {'at': 2, 'seconds': 3, 'before': 'a', 'after': 'b'}
    """
    ordered = sorted(tasks, key=lambda t: t[1])
    found, covered, last_kind = [], start, "(start)"
    for kind, begin, end in ordered:
        if begin > covered:
            found.append({"at": covered - start, "seconds": begin - covered, "before": last_kind, "after": kind})
        if end >= covered:
            covered, last_kind = end, kind
    if stop > covered:
        found.append({"at": covered - start, "seconds": stop - covered, "before": last_kind, "after": "(end)"})
    return sorted(found, key=lambda g: -g["seconds"])[:top]


def ready_events(transitions: Iterable[tuple[str, str, str, float]]) -> list[tuple[float, int]]:
    """``(time, +-1)`` events of the number of ready tasks, from the scheduler's transitions.

    Parameters
    ----------
    transitions : iterable of (str, str, str, float)
        ``(key, from state, to state, time)``, as in
        ``Scheduler.transition_log`` (the state actually reached).

    Examples
    --------
    >>> ready_events([("x", "waiting", "processing", 1.0), ("x", "processing", "memory", 2.0)])
    [(1.0, 1), (2.0, -1)]
    """
    events = []
    for _, before, after, when in transitions:
        was, now = before in READY_STATES, after in READY_STATES
        if now and not was:
            events.append((when, 1))
        elif was and not now:
            events.append((when, -1))
    return events


def joint_seconds(events_a, events_b, start: float, stop: float) -> dict[tuple[int, int], float]:
    """Seconds spent at each pair of levels of two step functions (as in :func:`step_seconds`).

    Examples
    --------
    >>> joint_seconds([(0, 1), (2, -1)], [(1, 3)], 0, 4)
    {(1, 0): 1.0, (1, 3): 1.0, (0, 3): 2.0}
    """
    tagged = [(t, c, 0) for t, c in events_a] + [(t, c, 1) for t, c in events_b]
    seconds: dict[tuple[int, int], float] = {}
    levels, at = [0, 0], start
    for when, change, which in sorted(tagged):
        if when > at:
            key = tuple(levels)
            seconds[key] = seconds.get(key, 0.0) + min(when, stop) - at
            at = when
        if at >= stop:
            break
        levels[which] += change
    if stop > at:
        key = tuple(levels)
        seconds[key] = seconds.get(key, 0.0) + stop - at
    return {k: v for k, v in seconds.items() if v > 0}


def ready_histogram(seconds: dict[int, float]) -> dict[str, float]:
    """``{level: seconds}`` gathered into :data:`READY_BINS` (labels ``"0"``, ``"3-4"``, ``">64"``)."""
    out = {}
    for low, high in READY_BINS:
        label = f">{low - 1}" if high is None else (str(low) if low == high else f"{low}-{high}")
        out[label] = sum(v for k, v in seconds.items() if k >= low and (high is None or k <= high))
    return out


def analyse(stream: list[dict], transitions: list[tuple], start: float, stop: float) -> dict:
    """Everything the report shows, from a task stream (``get_task_stream``'s records) and transitions."""
    from dask.utils import key_split

    runs = [(key_split(task["key"]), task["worker"], part["start"], part["stop"])
            for task in stream for part in task["startstops"] if part["action"] == "compute"]
    runs = [r for r in runs if r[3] > start and r[2] < stop]
    transfer = sum(part["stop"] - part["start"] for task in stream for part in task["startstops"]
                   if part["action"] == "transfer")
    parts = decompose([(w, b, e) for _, w, b, e in runs], start, stop)
    result = dict(parts, tasks=len(runs), transfer_seconds=transfer,
                  first_task=min((b for _, _, b, _ in runs), default=stop) - start,
                  after_last_task=stop - max((e for *_, e in runs), default=start))
    for n in PROJECT_WORKERS:
        result[f"amdahl_{n}"] = amdahl(parts["o"], parts["s"], parts["p"], n)
    result["kinds"] = kinds_alone(runs)
    result["gaps"] = gaps([(k, b, e) for k, _, b, e in runs], start, stop)
    ready = ready_events(transitions)
    busy = busy_events([(w, b, e) for _, w, b, e in runs])
    joint = joint_seconds(busy, ready, start, stop)
    by_ready: dict[int, float] = {}
    for (_, r), v in joint.items():
        by_ready[r] = by_ready.get(r, 0.0) + v
    result["ready_histogram"] = ready_histogram(by_ready)
    inside = [(b, r, v) for (b, r), v in joint.items() if b >= 1]  # while at least one task runs
    result["ready_while_running"] = {
        "seconds": sum(v for _, _, v in inside),
        **{f"at_least_{n}": sum(v for _, r, v in inside if r >= n) for n in (2, *PROJECT_WORKERS)}}
    result["s_with_2_ready"] = sum(v for (b, r), v in joint.items() if b == 1 and r >= 2)
    result["transitions"] = len(transitions)
    return result


# --- the cluster -------------------------------------------------------------------------------------------------

def _env(log_length: int | None = None) -> dict:
    """Environment of the cluster's and the CLI's processes: this checkout's dimbsvm, no inherited MALLOC_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               DASK_LOGGING__DISTRIBUTED="warning", PYTHONWARNINGS="ignore")
    if log_length:
        env["DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH"] = str(log_length)
    return env


class ExternalCluster:
    """``dask scheduler`` and single-threaded ``dask worker`` processes on 127.0.0.1, started as subprocesses.

    Parameters
    ----------
    workdir : Path
        Where the scheduler file and the processes' logs go.
    n_workers : int, default=2
    memory_limit : str, default="6GiB"
        Per worker.
    log_length : int, default=2_000_000
        The scheduler's ``distributed.admin.low-level-log-length``: its
        transition log must hold every transition of the job (default 1,000).
    scheduler_args : sequence of str, default=()
        More arguments of ``dask scheduler`` (e.g. a ``--preload``).
    scheduler_env : dict, default=None
        More environment variables of the scheduler's process.
    """

    def __init__(self, workdir: Path, *, n_workers: int = 2, memory_limit: str = "6GiB",
                 log_length: int = 2_000_000, scheduler_args: Sequence[str] = (), scheduler_env: dict | None = None):
        self.workdir = Path(workdir)
        self.scheduler_file = self.workdir / "scheduler.json"
        self.n_workers, self.memory_limit, self.log_length = n_workers, memory_limit, log_length
        self.scheduler_args, self.scheduler_env = list(scheduler_args), dict(scheduler_env or {})
        self.procs: list[subprocess.Popen] = []

    def _start(self, args: list[str], name: str, env: dict) -> None:
        with open(self.workdir / f"{name}.log", "w") as log:
            self.procs.append(subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=self.workdir, env=env,
                                               stdout=log, stderr=subprocess.STDOUT))

    def __enter__(self) -> ExternalCluster:
        from distributed import Client

        self.scheduler_file.unlink(missing_ok=True)
        self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                     str(self.scheduler_file), *self.scheduler_args], "scheduler",
                    _env(self.log_length) | self.scheduler_env)
        deadline = time.monotonic() + 60
        while not self.scheduler_file.exists():
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the scheduler did not start; see {self.workdir / 'scheduler.log'}")
            time.sleep(0.1)
        for i in range(self.n_workers):
            # as deploy/ starts workers: a nanny with dimbsvm's malloc settings
            self._start(["worker", "--scheduler-file", str(self.scheduler_file), "--nthreads", "1", "--nworkers",
                         "1", "--nanny", "--preload-nanny", "dimbsvm.distributed.worker_memory", "--host",
                         "127.0.0.1", "--no-dashboard", "--memory-limit", self.memory_limit, "--name", f"w{i}"],
                        f"worker{i}", _env())
        with Client(scheduler_file=str(self.scheduler_file), timeout=30) as client:
            client.wait_for_workers(self.n_workers, timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs = []


def _scheduler_transitions(dask_scheduler) -> list[tuple]:
    """``(key prefix, from, to, time)`` of every transition in the scheduler's log."""
    from dask.utils import key_split

    return [(key_split(t.key), t.start, t.finish, t.timestamp) for t in dask_scheduler.transition_log]


def job_spec(store: Path, n_members: int, bag: int) -> dict:
    """The strong-scaling benchmark's job: EnsembleOTHRClassifier(LinearSVC), 2-fold CV and the final model."""
    return {"name": "serial-fraction", "data": {"source": str(store)},
            "estimator": {"name": "ensemble_othr", "params": {
                "estimator": "linear_svc", "n_estimators": n_members, "bootstrap": "balanced",
                "max_samples": bag, "random_state": 0}},
            "cv": {"n_splits": 2, "n_repeats": 1, "random_state": 0},
            "metrics": ["g_mean", "f_measure"]}


def run_size(store: Path, workdir: Path, *, n_members: int, bag: int, memory_limit: str) -> dict:
    """``dimbsvm run`` of the job on a fresh two-worker external cluster, with its task stream analysed."""
    from distributed import Client, get_task_stream

    job_file = workdir / "job.yaml"
    job_file.write_text(json.dumps(job_spec(store, n_members, bag), indent=2) + "\n")  # JSON is YAML
    run_dir = workdir / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    with ExternalCluster(workdir, memory_limit=memory_limit) as cluster, \
            Client(scheduler_file=str(cluster.scheduler_file), timeout=30) as client:
        with get_task_stream(client) as stream:
            start = time.time()
            proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "run", str(job_file), "--scheduler-file",
                                   str(cluster.scheduler_file), "--out", str(run_dir), "--no-progress"],
                                  cwd=workdir, env=_env(), capture_output=True, text=True)
            stop = time.time()
        if proc.returncode != 0:
            raise RuntimeError(f"dimbsvm run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        transitions = client.run_on_scheduler(_scheduler_transitions)
        records = stream.data
    shutil.rmtree(run_dir, ignore_errors=True)
    return analyse(records, transitions, start, stop)


# --- report ------------------------------------------------------------------------------------------------------

def render_markdown(summary: dict, *, started: str = "`dimbsvm run`") -> list[str]:
    """The decomposition table, then per size (first repeat) the task kinds, the longest gaps and the ready tasks.

    ``started``: what the gaps' times count from.
    """
    lines = ["| n | repeat | chunks | tasks | T s | o s | s s | p s | first task at s | after last task s "
             "| T1 s | T16 s | speed-up 16 | T64 s | speed-up 64 |", "|---" * 15 + "|"]
    for r in summary["runs"]:
        a16, a64 = r["amdahl_16"], r["amdahl_64"]
        lines.append(f"| {r['n']:,} | {r.get('repeat', 0)} | {r['chunks']} | {r['tasks']:,} | {r['T']:.1f} | {r['o']:.1f} | {r['s']:.1f} "
                     f"| {r['p']:.1f} | {r['first_task']:.1f} | {r['after_last_task']:.1f} | {a16['T1']:.1f} "
                     f"| {a16['Tn']:.1f} | {a16['speedup']:.2f} | {a64['Tn']:.1f} | {a64['speedup']:.2f} |")
    for r in summary["runs"]:
        if r.get("repeat"):
            continue  # the first repeat's details (every repeat's are in summary.json)
        kinds = sorted(r["kinds"].items(), key=lambda kv: -kv[1]["alone"])
        run = f"n = {r['n']:,}, repeat 0"
        lines += ["", f"{run}: task kinds by seconds run alone (the other worker idle):", "",
                  "| kind | tasks | busy s | alone s |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['tasks']} | {v['seconds']:.2f} | {v['alone']:.2f} |" for k, v in kinds]
        lines += ["", f"{run}: longest intervals with no task running (at: seconds after the start of "
                  f"{started}):", "", "| at s | seconds | last task before | first task after |", "|---|---|---|---|"]
        lines += [f"| {g['at']:.1f} | {g['seconds']:.2f} | {g['before']} | {g['after']} |" for g in r["gaps"][:6]]
        hist = r["ready_histogram"]
        ready = r["ready_while_running"]
        lines += ["", f"{run}: ready tasks (queued or processing on the scheduler), seconds of T at each "
                  "count; {:.1f} of the {:.1f} s with a task running had at least 2 ready, {:.1f} at least 16, "
                  "{:.1f} at least 64; {:.1f} s of s had at least 2 ready:".format(
                      ready["at_least_2"], ready["seconds"], ready["at_least_16"], ready["at_least_64"],
                      r["s_with_2_ready"]), "",
                  "| " + " | ".join(hist) + " |", "|---" * len(hist) + "|",
                  "| " + " | ".join(f"{v:.1f}" for v in hist.values()) + " |"]
    return lines


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as a shell would take it, an argument with an apostrophe in double quotes where that is safe.

    Examples
    --------
    >>> print(command_line(["--sizes", "1000", "--note", "the lead's benchmarks ran"]))
    --sizes 1000 --note "the lead's benchmarks ran"
    """
    def quoted(arg):
        if "'" in arg and not any(c in arg for c in '"$`\\!'):
            return f'"{arg}"'
        return shlex.quote(arg)

    return " ".join(map(quoted, argv))


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.serial_fraction``."""
    from benchmarks.results import write_summary
    from benchmarks.strong_scaling import BAG, N_MEMBERS, make_store

    parser = argparse.ArgumentParser(prog="python -m benchmarks.serial_fraction",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000, 10_000_000])
    parser.add_argument("--chunks", type=int, default=64, help="equal chunks of the store")
    parser.add_argument("--members", type=int, default=N_MEMBERS)
    parser.add_argument("--bag", type=int, default=BAG, help="max_samples of each member's balanced bag")
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--repeats", type=int, default=1, help="runs per size, each on a fresh cluster")
    parser.add_argument("--workdir", help="where the stores and the cluster's files go (default: a temporary "
                        "directory)")
    parser.add_argument("--out", default="benchmarks/results/serial-fraction")
    parser.add_argument("--note", help="appended to the description (e.g. what else ran on the machine)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dimbsvm-serial-"))
    workdir.mkdir(parents=True, exist_ok=True)
    summary = {"kind": "serial_fraction", "command": "python -m benchmarks.serial_fraction " + command_line(
        sys.argv[1:] if argv is None else argv), "date": utc_now(), "machine": machine_info(),
        "packages": package_versions(), "title": TITLE,
        "description": DESCRIPTION + (" " + args.note if args.note else ""), "runs": []}
    tic = time.perf_counter()
    try:
        for n in args.sizes:
            store = make_store(n, args.chunks, workdir)
            for repeat in range(args.repeats):
                run = run_size(store, workdir, n_members=args.members, bag=args.bag,
                               memory_limit=args.memory_limit)
                summary["runs"].append(dict(run, n=n, repeat=repeat, chunks=args.chunks, members=args.members,
                                            bag=args.bag))
                logger.info("n=%d: T %.1f s = o %.1f + s %.1f + p %.1f; projected speed-up 16: %.2f, 64: %.2f", n,
                            run["T"], run["o"], run["s"], run["p"], run["amdahl_16"]["speedup"],
                            run["amdahl_64"]["speedup"])
                summary["wall_seconds"] = time.perf_counter() - tic
                write_summary(args.out, summary, "\n".join(render_markdown(summary)))
            shutil.rmtree(store, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(render_markdown(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
