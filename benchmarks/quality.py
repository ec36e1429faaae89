"""The quality suite: every (dataset, method, repeat, fold) as one Dask task.

Usage (from the repository root)::

    python -m benchmarks.quality SUITE.yaml [--scheduler ADDR] [--workers N] [--out DIR] [--no-progress]

The suite is validated and every dataset loaded and checked before a cluster
starts. Each dataset is scattered to the cluster once; a task receives the
data by reference plus (method, seed, fold) and rebuilds its fold from the
seed (:func:`dimbsvm.evaluation.fold_indices`), so all methods see identical
training and test rows. The results directory (see :mod:`benchmarks.report`)
is written only when every task has finished.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dimbsvm.datasets import Dataset, load
from dimbsvm.distributed import cluster_client, run_tasks
from dimbsvm.evaluation import evaluate_fold, positive_label, repeat_seeds
from dimbsvm.exceptions import DataError, DimbsvmError
from dimbsvm.jobs import check_job_data

from .suite import build_method, load_suite

__all__ = ["SuiteData", "load_suite_data", "suite_calls", "evaluate_method_fold", "run_suite", "main"]

logger = logging.getLogger(__name__)


@dataclass
class SuiteData:
    """One loaded dataset of a suite, under the name the report uses."""

    name: str
    dataset: Dataset
    pos_label: object


def load_suite_data(suite: dict) -> list[SuiteData]:
    """Load and check every dataset of a validated suite, before any task runs.

    Raises
    ------
    DataError
        A dataset cannot be read, two entries have the same name, or the data
        does not fit the protocol (NaN without imputation, a class smaller
        than ``n_splits``, binary metrics on multi-class labels, ...).
    """
    protocol = suite["protocol"]
    # check_job_data reads these keys of a job; the suite's protocol maps onto them.
    as_job = {"preprocessing": {"impute": protocol["impute"]}, "metrics": suite["metrics"],
              "cv": {"n_splits": protocol["n_splits"]}}
    loaded, seen = [], {}
    for source in suite["datasets"]:
        dataset = load(source)
        name = dataset.name or Path(source).stem
        if name in seen:
            raise DataError(f"datasets {seen[name]!r} and {source!r} are both named {name!r}; "
                            "the report needs distinct names")
        seen[name] = source
        check_job_data(dataset, as_job)
        loaded.append(SuiteData(name=name, dataset=dataset, pos_label=positive_label(dataset.y)))
    return loaded


def suite_calls(suite: dict, data: list[SuiteData], refs: dict) -> list[dict]:
    """Keyword arguments of every task, largest datasets first.

    Parameters
    ----------
    suite : dict
        A validated suite.
    data : list of SuiteData
    refs : dict
        ``{dataset name: (X, y)}``, arrays or the futures of scattered arrays.
    """
    protocol = suite["protocol"]
    seeds = repeat_seeds(protocol["n_repeats"], protocol["random_state"])
    # Dask runs earlier submissions first; starting with the slow fits keeps
    # the workers busy to the end instead of waiting on one late large task.
    order = sorted(data, key=lambda d: -d.dataset.X.size)
    calls = []
    for item in order:
        X, y = refs[item.name]
        for method in suite["methods"]:
            for seed in seeds:
                for fold in range(protocol["n_splits"]):
                    calls.append({
                        "X": X, "y": y, "dataset": item.name, "method": method["name"],
                        "estimator": build_method(method, seed=seed, fold=fold),
                        "n_splits": protocol["n_splits"], "seed": seed, "fold": fold,
                        "metrics": tuple(suite["metrics"]), "scaler": protocol["scaler"],
                        "impute": protocol["impute"], "pos_label": item.pos_label,
                    })
    return calls


def evaluate_method_fold(X, y, *, dataset: str, method: str, **kwargs) -> dict:
    """:func:`dimbsvm.evaluation.evaluate_fold` with the dataset and method named in the record.

    A failure is re-raised naming the dataset, method, seed and fold, so an
    error from deep inside a peer says where it happened.
    """
    try:
        record = evaluate_fold(X, y, **kwargs)
    except Exception as exc:
        raise RuntimeError(f"{method} on {dataset} (seed {kwargs.get('seed')}, fold {kwargs.get('fold')}) "
                           f"failed: {type(exc).__name__}: {exc}") from exc
    return {"dataset": dataset, "method": method, **record}


def run_suite(suite: dict, client, *, data: list[SuiteData] | None = None, progress: bool = True) -> list[dict]:
    """Run every (dataset, method, repeat, fold) of a validated suite on ``client``.

    Parameters
    ----------
    suite : dict
        As returned by :func:`benchmarks.suite.validate_suite`.
    client : distributed.Client
    data : list of SuiteData, default=None
        Already loaded datasets (default: :func:`load_suite_data`).
    progress : bool, default=True
        Show task progress on stderr.

    Returns
    -------
    records : list of dict
        One per task: dataset, method, seed, fold, n_train, n_test and the
        suite's metrics.
    """
    if data is None:
        data = load_suite_data(suite)
    # Scattered once each; tasks get futures and Dask moves each array to a
    # worker at most once, whatever the number of methods and folds.
    refs = {item.name: (client.scatter(item.dataset.X, hash=False), client.scatter(item.dataset.y, hash=False))
            for item in data}
    calls = suite_calls(suite, data, refs)
    logger.info("suite %s: %d datasets x %d methods -> %d fold tasks", suite["name"], len(data),
                len(suite["methods"]), len(calls))
    return run_tasks(client, evaluate_method_fold, calls, retries=suite["execution"]["retries"],
                     progress=progress, label="folds")


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.quality``."""
    from .report import print_summary, write_results

    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("benchmarks").setLevel(logging.DEBUG if args.verbose > 1 else
                                             logging.INFO if args.verbose else logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.WARNING if args.verbose < 2 else logging.INFO)
    try:
        suite = load_suite(args.suite)
        data = load_suite_data(suite)
        out = Path(args.out) if args.out else Path("benchmarks") / "results" / suite["name"]
        _check_out(out)
        command = "python -m benchmarks.quality " + shlex.join(argv)
        n_workers = args.workers or suite["execution"].get("n_workers")
        started = _dt.datetime.now(_dt.UTC)
        tic = time.perf_counter()
        with cluster_client(args.scheduler, n_workers=n_workers) as client:
            cluster = {"scheduler": client.scheduler.address,
                       "n_workers": len(client.scheduler_info(n_workers=-1)["workers"]),
                       "embedded": not (args.scheduler or _env_scheduler())}
            records = run_suite(suite, client, data=data, progress=not args.no_progress)
        wall = time.perf_counter() - tic
        run = {"command": command, "started": started.isoformat(timespec="seconds"),
               "wall_time_s": round(wall, 1), "cluster": cluster,
               "datasets": {d.name: {"source": d.dataset.source, "n_samples": int(d.dataset.n_samples),
                                     "n_features": int(d.dataset.X.shape[1]),
                                     "n_minority": int(np.sum(d.dataset.y == d.pos_label))}
                            for d in data}}
        summary = write_results(out, suite, records, run)
    except (DimbsvmError, FileExistsError) as exc:
        print(f"benchmarks.quality: error: {exc}", file=sys.stderr)
        return 2
    print_summary(summary)
    print(f"results: {out}  ({len(records)} fold tasks in {wall:.0f} s)")
    return 0


def _check_out(out: Path) -> None:
    """Refuse to replace a directory that is not an earlier results directory."""
    if out.exists() and any(out.iterdir()) and not (out / "summary.json").is_file():
        raise FileExistsError(f"{out} exists and is not a benchmark results directory; choose another --out")


def _env_scheduler():
    import os

    return os.environ.get("DASK_SCHEDULER_ADDRESS")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality",
                                     description="Run a quality benchmark suite on a Dask cluster.")
    parser.add_argument("suite", help="suite file (YAML)")
    parser.add_argument("--scheduler", help="scheduler address (default: $DASK_SCHEDULER_ADDRESS, "
                                            "else an embedded LocalCluster)")
    parser.add_argument("--workers", type=int, help="workers of the embedded cluster (default: one per core)")
    parser.add_argument("--out", help="results directory (default: benchmarks/results/<suite name>); "
                                      "an earlier results directory there is replaced")
    parser.add_argument("--no-progress", action="store_true", help="do not show task progress")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
