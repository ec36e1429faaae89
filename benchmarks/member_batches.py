"""Members batched per task on small folds, against one task per member: ``dimbsvm bench`` as whole processes.

Usage (from the repository root)::

    python -m benchmarks.member_batches --repeats 3 --out benchmarks/results/member-batches
    python -m benchmarks.results benchmarks/results/member-batches --update

Runs ``dimbsvm bench benchmarks/member-batches.yaml --workers 2`` (an embedded
cluster of two worker processes) as a fresh process, alternately with the fold
engine's default (:data:`dimbsvm.svm.ensemble_fold.MEMBER_TASK_ROWS`:
members of a small in-memory fold batched, a few tasks per fold) and with
``MEMBER_TASK_ROWS = 1`` (one task per member, what the engine did before),
set in the child process before the CLI runs. Wall time of each process
(imports, data loading and the report included); medians over ``--repeats``.
The two modes must give the same records: every fold's quality metrics in
``folds.csv`` are compared (fit times aside).
"""

from __future__ import annotations

import argparse
import csv
import logging
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.member_batches")

ROOT = Path(__file__).resolve().parents[1]
SUITE = "benchmarks/member-batches.yaml"
MODES = {"one task per member": 1, "batched (default)": None}
QUALITY = ("g_mean", "f_measure", "auc")
_CHILD = ("import sys\n"
          "rows = sys.argv.pop(1)\n"
          "if rows != 'default':\n"
          "    import dimbsvm.svm.ensemble_fold as ensemble_fold\n"
          "    ensemble_fold.MEMBER_TASK_ROWS = int(rows)\n"
          "from dimbsvm.cli import main\n"
          "sys.exit(main())\n")


def _markdown(text: str) -> str:
    """A docstring paragraph as one line of markdown (reST literals and roles made plain code).

    Examples
    --------
    >>> _markdown("with ``x = 1``,\\n :data:`a.B` set")
    'with `x = 1`, `a.B` set'
    """
    return re.sub(r":\w+:`", "`", " ".join(text.split()).replace("``", "`"))


def run_bench(suite: str, out: Path, member_task_rows: int | None, workers: int) -> float:
    """Seconds of one ``dimbsvm bench`` process with the given ``MEMBER_TASK_ROWS`` (None: the default)."""
    from benchmarks.serial_fraction import _env  # this checkout's dimbsvm, as serial_fraction's CLI runs

    argv = [sys.executable, "-c", _CHILD, "default" if member_task_rows is None else str(member_task_rows),
            "bench", suite, "--out", str(out), "--no-progress", "--workers", str(workers)]
    tic = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - tic
    if proc.returncode:
        raise RuntimeError(f"dimbsvm bench failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def quality_records(out: Path) -> list[tuple]:
    """``(dataset, method, seed, fold, metrics...)`` of every fold in ``out/folds.csv``, sorted."""
    with open(out / "folds.csv", newline="") as handle:
        return sorted(tuple(row[k] for k in ("dataset", "method", "seed", "fold", *QUALITY))
                      for row in csv.DictReader(handle))


def render_markdown(summary: dict) -> list[str]:
    """The table: seconds per mode, ratio, records equal.

    Examples
    --------
    >>> s = {"modes": {"a": {"seconds": [2.0, 4.0, 3.0]}, "b": {"seconds": [1.0, 1.5, 2.0]}}, "baseline": "a",
    ...      "records_equal": True, "folds": 40, "member_tasks": {"a": 10, "b": 2}}
    >>> render_markdown(s)[2]
    '| a | 3 | 3.00 (2.00-4.00) | 10 | 1.00 |'
    """
    base = statistics.median(summary["modes"][summary["baseline"]]["seconds"])
    lines = ["| mode | repeats | seconds, median (min-max) | member-fitting tasks | time / one task per member |",
             "|---|---|---|---|---|"]
    for mode, result in summary["modes"].items():
        seconds = result["seconds"]
        median = statistics.median(seconds)
        lines.append(f"| {mode} | {len(seconds)} | {median:.2f} ({min(seconds):.2f}-{max(seconds):.2f}) "
                     f"| {summary['member_tasks'][mode]:,} | {median / base:.2f} |")
    lines += ["", f"Records of the two modes equal ({summary['folds']} folds; G-mean, F-measure and ROC-AUC of "
              f"every fold): {'yes' if summary['records_equal'] else 'NO'}."]
    return lines


def member_tasks(suite: str, member_task_rows: int | None) -> int:
    """Member-fitting tasks the suite's plan holds with this ``MEMBER_TASK_ROWS`` (planned, not run)."""
    import dimbsvm.bench.quality as quality
    import dimbsvm.svm.ensemble_fold as ensemble_fold

    counted = {}

    def count(plan, **_):
        counted["n"] = sum(task.name in ("member", "members") for task in plan.tasks)
        raise _Planned

    default, run_plan = ensemble_fold.MEMBER_TASK_ROWS, quality.run_plan
    ensemble_fold.MEMBER_TASK_ROWS, quality.run_plan = member_task_rows or default, count
    try:
        quality.run_suite(quality.load_suite(str(ROOT / suite)), None, progress=False)
    except _Planned:
        pass
    finally:
        ensemble_fold.MEMBER_TASK_ROWS, quality.run_plan = default, run_plan
    return counted["n"]


class _Planned(Exception):
    """Stops :func:`member_tasks` once the plan is built."""


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.member_batches``."""
    from benchmarks.results import write_summary
    from benchmarks.serial_fraction import command_line

    parser = argparse.ArgumentParser(prog="python -m benchmarks.member_batches", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=SUITE)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/member-batches")
    parser.add_argument("--note", help="appended to the description")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    summary = {"kind": "member_batches", "title": "Ensemble members batched per task on small folds, against one "
               "task per member: dimbsvm bench on four small KEEL sets (2 workers, 2 cores)",
               "description": _markdown(__doc__.split("\n\n")[3]) + (" " + args.note if args.note else ""),
               "command": "python -m benchmarks.member_batches " + command_line(sys.argv[1:] if argv is None else argv),
               "date": utc_now(), "machine": machine_info(), "packages": package_versions(),
               "baseline": "one task per member", "modes": {mode: {"seconds": []} for mode in MODES},
               "member_tasks": {mode: member_tasks(args.suite, rows) for mode, rows in MODES.items()}}
    records = {}
    with tempfile.TemporaryDirectory(prefix="dimbsvm-batches-") as tmp:
        for repeat in range(args.repeats):
            for mode, rows in MODES.items():
                out = Path(tmp) / f"{repeat}-{rows}"
                seconds = run_bench(args.suite, out, rows, args.workers)
                summary["modes"][mode]["seconds"].append(seconds)
                records.setdefault(mode, quality_records(out))
                logger.info("repeat %d, %s: %.1f s", repeat, mode, seconds)
    first, second = records.values()
    summary.update(records_equal=first == second, folds=len(first))
    write_summary(args.out, summary, "\n".join(render_markdown(summary)))
    print("\n".join(render_markdown(summary)))
    return 0 if summary["records_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
