"""The quality suite: every (dataset, method, repeat, fold) through the fold engine, in one plan.

Usage (from the repository root)::

    python -m benchmarks.quality SUITE.yaml [--scheduler ADDR] [--workers N] [--out DIR] [--no-progress]

The suite is validated and every dataset loaded and checked before a cluster
starts. Each dataset is sent to the cluster once and its labels split once
per repeat; every fold is the fold engine's prepare / part / finish tasks
(:mod:`dimbsvm.model_selection.folds`), the same as ``dimbsvm run``'s, so all
methods see identical training and test rows and an ensemble's members fan
out here too. The results directory (see :mod:`benchmarks.report`)
is written only when every task has finished.

With ``--scheduler``, the scheduler and workers need the same software as
this process, as for any Dask work: dimbsvm, imbalanced-learn, and this
``benchmarks`` package on their ``PYTHONPATH`` (it is not installed with
dimbsvm). Run as ``python -m benchmarks.quality``, the task function lives in
``__main__``, which Dask ships by value, so there a checkout on the client is
enough.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dimbsvm.distributed import cluster_client
from dimbsvm.distributed.policy import TaskFailure
from dimbsvm.distributed.tasks import TaskPlan, run_plan
from dimbsvm.model_selection.folds import FoldSpec, add_fold
from dimbsvm.model_selection.splits import positive_label, repeat_seeds, repeat_splits
from dimbsvm.exceptions import DataError, DimbsvmError
from dimbsvm.jobs import check_job_data, load_job_data

from .environment import machine_info, package_versions, utc_now
from .suite import build_method, estimator_random_state, load_suite

__all__ = ["SuiteData", "load_suite_data", "evaluate_method_fold", "run_suite", "run_benchmark", "main"]

logger = logging.getLogger(__name__)


@dataclass
class SuiteData:
    """One dataset of a suite as tasks see it, under the name the report uses.

    ``X`` is an array, or a row-reading handle for a dimbsvm Zarr store (as
    :func:`dimbsvm.jobs.load_job_data` returns it); ``y`` is in memory.
    """

    name: str
    source: str
    X: object
    y: np.ndarray
    pos_label: object

    def describe(self) -> dict:
        """Source, shape and minority count, for the report."""
        return {"source": self.source, "n_samples": int(len(self.y)), "n_features": int(self.X.shape[1]),
                "n_minority": int(np.sum(self.y == self.pos_label))}


def load_suite_data(suite: dict) -> list[SuiteData]:
    """Load and check every dataset of a validated suite, before any task runs.

    Datasets are read as jobs read them (:func:`dimbsvm.jobs.load_job_data`:
    bundled or KEEL names, data files, Zarr stores) and checked by the job
    runner's own checks.

    Raises
    ------
    DataError
        A dataset cannot be read, two entries have the same name, or the data
        does not fit the protocol (NaN without imputation, a class smaller
        than ``n_splits``, binary metrics on multi-class labels, ...).
    """
    protocol = suite["protocol"]
    loaded, seen = [], {}
    for source in suite["datasets"]:
        # check_job_data reads these keys of a job; the suite's protocol maps onto them (the data checks
        # alone: each method's own needs are its estimator's to check)
        as_job = {"data": {"source": source}, "features": [], "estimator": {"name": "svc", "params": {}},
                  "preprocessing": {"impute": protocol["impute"], "scaler": protocol["scaler"]},
                  "metrics": suite["metrics"], "cv": {"n_splits": protocol["n_splits"]}}
        data = load_job_data(source)
        name = data.meta.get("name") or Path(source).stem
        if name in seen:
            raise DataError(f"datasets {seen[name]!r} and {source!r} are both named {name!r}; "
                            "the report needs distinct names")
        seen[name] = source
        check_job_data(data, as_job)
        loaded.append(SuiteData(name=name, source=str(data.meta.get("source", source)), X=data.X, y=data.y,
                                pos_label=positive_label(data.y)))
    return loaded


def evaluate_method_fold(X, y, *, dataset: str, method: str, estimator, n_splits: int, seed: int, fold: int,
                         metrics=("g_mean", "f_measure"), scaler="minmax", impute="none", pos_label=None,
                         on_error: str = "raise") -> dict:
    """One (dataset, method, seed, fold) through the fold engine, in this process, named in its record.

    Parameters
    ----------
    X, y : arrays
    dataset, method : str
        Names for the record and for error messages.
    estimator : estimator
    n_splits, seed, fold : int
        The fold (see :func:`dimbsvm.model_selection.splits.repeat_splits`).
    on_error : {"raise", "record"}, default="raise"
        A failing fit (e.g. a peer that cannot handle a fold with very few
        minority rows) either raises, naming dataset, method, seed and fold,
        or returns a record with the error message and NaN metrics, so one
        failure does not throw away a whole suite.

    Returns
    -------
    record : dict
        ``{"dataset", "method", "seed", "fold", "n_train", "n_test", <metric>: value, ..., "error"}``;
        ``error`` is None unless the fold failed.
    """
    y = np.asarray(y)
    plan = TaskPlan()
    X_ref, y_ref = plan.share(X), plan.share(y)
    train, test = repeat_splits(y, n_splits=n_splits, seed=seed)[fold]
    spec = FoldSpec((seed, fold), train, test)
    finish, _, _ = add_fold(plan, spec, X=X_ref, y=y_ref, labels=y, estimator=estimator, scaler=scaler,
                            impute=impute, features=(), metrics=metrics,
                            pos_label=positive_label(y) if pos_label is None else pos_label)
    result = run_plan(plan, client=None, errors="return")[finish.id]
    return _fold_record(result, dataset=dataset, method=method, spec=spec, metrics=metrics, on_error=on_error)


def _fold_record(result, *, dataset, method, spec, metrics, on_error) -> dict:
    """The suite's record of one finished fold, or of its failure (raised when ``on_error="raise"``)."""
    seed, fold = spec.key
    if isinstance(result, TaskFailure):
        message = f"{type(result.error).__name__}: {result.error}"
        where = f"{method} on {dataset} (seed {seed}, fold {fold})"
        if on_error == "raise":
            raise RuntimeError(f"{where} failed: {message}") from result.error
        logger.warning("%s failed: %s", where, message)
        record = {"seed": int(seed), "fold": int(fold), "n_train": int(len(spec.train)),
                  "n_test": int(len(spec.test)), **{name: float("nan") for name in metrics}, "error": message}
    else:
        record = result["record"]
    return {"dataset": dataset, "method": method, "error": None, **record}


def run_suite(suite: dict, client, *, data: list[SuiteData] | None = None, progress: bool = True) -> list[dict]:
    """Run every (dataset, method, repeat, fold) of a validated suite through the fold engine.

    All folds of all datasets and methods are one plan: each dataset is sent
    to the cluster once, its labels split once per repeat here, and each fold
    is prepare / part / finish tasks (an ensemble's members are tasks of
    their own), so all methods see identical training and test rows.

    Parameters
    ----------
    suite : dict
        As returned by :func:`benchmarks.suite.validate_suite`.
    client : distributed.Client or None
    data : list of SuiteData, default=None
        Already loaded datasets (default: :func:`load_suite_data`).
    progress : bool, default=True
        Show task progress on stderr.

    Returns
    -------
    records : list of dict
        One per fold: dataset, method, seed, fold, n_train, n_test and the
        suite's metrics (largest datasets first).
    """
    if data is None:
        data = load_suite_data(suite)
    protocol = suite["protocol"]
    metrics = tuple(suite["metrics"])
    seeds = repeat_seeds(protocol["n_repeats"], protocol["random_state"])
    plan, folds = TaskPlan(), {}
    # Dask runs earlier submissions first; starting with the slow fits keeps
    # the workers busy to the end instead of waiting on one late large task.
    for item in sorted(data, key=lambda d: -len(d.y) * d.X.shape[1]):
        X_ref, y_ref = plan.share(item.X), plan.share(item.y)
        splits = {seed: repeat_splits(item.y, n_splits=protocol["n_splits"], seed=seed) for seed in seeds}
        for method in suite["methods"]:
            for seed in seeds:
                for fold, (train, test) in enumerate(splits[seed]):
                    estimator = build_method(method, random_state=estimator_random_state(protocol, seed=seed,
                                                                                          fold=fold))
                    spec = FoldSpec((seed, fold), train, test)
                    finish, _, _ = add_fold(plan, spec, X=X_ref, y=y_ref, labels=item.y, estimator=estimator,
                                            scaler=protocol["scaler"], impute=protocol["impute"], features=(),
                                            metrics=metrics, pos_label=item.pos_label)
                    folds[finish.id] = (item.name, method["name"], spec)
    logger.info("suite %s: %d datasets x %d methods -> %d folds, %d tasks", suite["name"], len(data),
                len(suite["methods"]), len(folds), len(plan.tasks))
    results = run_plan(plan, client=client, retries=suite["execution"]["retries"], progress=progress,
                       label="folds", errors="return")
    return [_fold_record(results[i], dataset=name, method=method, spec=spec, metrics=metrics,
                         on_error=suite["execution"]["on_error"]) for i, (name, method, spec) in folds.items()]


def run_benchmark(suite: dict, client, *, out, command: str, data: list[SuiteData] | None = None,
                  progress: bool = True) -> dict:
    """Run a validated suite on ``client`` and write its results directory.

    Parameters
    ----------
    suite : dict
        As returned by :func:`benchmarks.suite.validate_suite`.
    client : distributed.Client
    out : path-like
        Results directory; an earlier results directory there is replaced.
    command : str
        The command line to record in the report.
    data : list of SuiteData, default=None
        Already loaded datasets (default: :func:`load_suite_data`).
    progress : bool, default=True

    Returns
    -------
    summary : dict
        As written to ``summary.json`` (see :mod:`benchmarks.report`).
    """
    from .report import write_results

    out = Path(out)
    _check_out(out)
    if data is None:
        data = load_suite_data(suite)
    started = utc_now()
    tic = time.perf_counter()
    records = run_suite(suite, client, data=data, progress=progress)
    run = {
        "command": command, "started": started, "finished": utc_now(),
        "wall_time_s": round(time.perf_counter() - tic, 1),
        "cluster": {"scheduler": client.scheduler.address,
                    "n_workers": len(client.scheduler_info(n_workers=-1)["workers"]),
                    "embedded": _is_embedded(client)},
        "machine": machine_info(), "versions": package_versions(),
        "datasets": {d.name: d.describe() for d in data},
    }
    return write_results(out, suite, records, run)


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.quality``."""
    from .report import print_summary

    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("benchmarks").setLevel(logging.DEBUG if args.verbose > 1 else
                                             logging.INFO if args.verbose else logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.WARNING if args.verbose < 2 else logging.INFO)
    try:
        # Everything a user can get wrong is checked before a cluster starts.
        suite = load_suite(args.suite)
        data = load_suite_data(suite)
        out = Path(args.out) if args.out else Path("benchmarks") / "results" / suite["name"]
        _check_out(out)
        n_workers = args.workers or suite["execution"].get("n_workers")
        with cluster_client(args.scheduler, n_workers=n_workers) as client:
            summary = run_benchmark(suite, client, out=out, data=data, progress=not args.no_progress,
                                    command="python -m benchmarks.quality " + shlex.join(argv))
    except (DimbsvmError, FileExistsError) as exc:
        print(f"benchmarks.quality: error: {exc}", file=sys.stderr)
        return 2
    print_summary(summary)
    print(f"results: {out}  ({summary['run']['n_tasks']} fold tasks in {summary['run']['wall_time_s']:.0f} s)")
    return 0


def _check_out(out: Path) -> None:
    """Refuse to replace a directory that is not an earlier results directory."""
    if out.exists() and any(out.iterdir()) and not (out / "summary.json").is_file():
        raise FileExistsError(f"{out} exists and is not a benchmark results directory; choose another --out")


def _is_embedded(client) -> bool:
    """Whether ``client`` runs on a cluster object in this process (a LocalCluster)."""
    return getattr(client, "cluster", None) is not None


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
