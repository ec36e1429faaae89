"""The quality suite: every (dataset, method, repeat, fold) through the fold engine, in one plan.

Usage::

    dimbsvm bench SUITE.yaml [--scheduler ADDR] [--workers N] [--out DIR] [--no-progress]

(the peers and the statistics need the ``bench`` extra:
``pip install "dimbsvm[bench]"``).

The suite is validated and every dataset loaded and checked before a cluster
starts. Each dataset is sent to the cluster once and its labels split once
per repeat; every fold is the fold engine's prepare / part / finish tasks
(:mod:`dimbsvm.model_selection.folds`), the same as ``dimbsvm run``'s, so all
methods see identical training and test rows and an ensemble's members fan
out here too. The results directory (see :mod:`dimbsvm.bench.report`)
is written only when every task has finished.

With ``--scheduler``, the scheduler and workers need the same software as
this process, as for any Dask work: dimbsvm installed with its ``bench``
extra (the peers come from imbalanced-learn).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..distributed import cluster_client
from ..parallel import TaskPlan, run_plan
from ..parallel.policy import TaskFailure
from ..exceptions import DataError, DimbsvmError
from ..jobs import check_job_data, load_job_data
from ..jobs.job_spec import CVSpec, DataSpec, EstimatorSpec, JobSpec, PreprocessingSpec
from ..model_selection.folds import FoldSetup, FoldSpec, add_fold
from ..model_selection.splits import minority_class, repeat_seeds, repeat_splits

from ..environment import machine_info, package_versions, utc_now
from .suite import build_method, estimator_random_state, load_suite, method_search

__all__ = ["SuiteData", "load_suite_data", "evaluate_method_fold", "run_suite", "run_benchmark", "bench", "check_bench_extra"]

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
        # the data checks of a job whose protocol is the suite's (the data checks alone: each method's own
        # needs are its estimator's to check, so the job's estimator is a multi-class one asking for nothing)
        as_job = JobSpec(data=DataSpec(source=source), estimator=EstimatorSpec("svc"),
                         preprocessing=PreprocessingSpec(scaler=protocol["scaler"], impute=protocol["impute"]),
                         metrics=tuple(suite["metrics"]), cv=CVSpec(n_splits=protocol["n_splits"]))
        data = load_job_data(source)
        if protocol["sparse"] and not sp.issparse(data.X):
            if not isinstance(data.X, np.ndarray):
                raise DataError(f"{source}: protocol.sparse holds datasets as CSR in memory; a store is read as "
                                "it was ingested (ingest svmlight files or sparse matrices for a sparse store)")
            data = dataclasses.replace(data, X=sp.csr_matrix(data.X))
        name = data.meta.get("name") or Path(source).stem
        if name in seen:
            raise DataError(f"datasets {seen[name]!r} and {source!r} are both named {name!r}; "
                            "the report needs distinct names")
        seen[name] = source
        check_job_data(data, as_job)
        loaded.append(SuiteData(name=name, source=str(data.meta.get("source", source)), X=data.X, y=data.y,
                                pos_label=minority_class(data.y)))
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
    setup = FoldSetup(estimator=estimator, pos_label=minority_class(y) if pos_label is None else pos_label,
                      scaler=scaler, impute=impute, metrics=metrics)
    finish, _, _ = add_fold(plan, spec, setup, X=X_ref, y=y_ref, labels=y)
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
        record = dict(result.record)
        if "params" in record:  # a searched method's choice, one column of the folds table
            record["params"] = json.dumps(record["params"], sort_keys=True)
        failures = (result.search or {}).get("failures") or []
        if failures:  # candidates that raised on inner folds were scored error_score: said, and counted
            logger.warning("%s on %s (seed %d, fold %d): %d inner fit(s) of the search failed and were scored as "
                           "its error_score; the first (candidate %d): %s", method, dataset, seed, fold,
                           len(failures), failures[0]["candidate"], failures[0]["error"])
            record["failed_inner_fits"] = len(failures)
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
        As returned by :func:`dimbsvm.bench.suite.validate_suite`.
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
            search = method_search(method)
            for seed in seeds:
                for fold, (train, test) in enumerate(splits[seed]):
                    estimator = build_method(method, random_state=estimator_random_state(protocol, seed=seed,
                                                                                          fold=fold))
                    spec = FoldSpec((seed, fold), train, test)
                    try:
                        setup = FoldSetup(estimator=estimator, pos_label=item.pos_label, scaler=protocol["scaler"],
                                          impute=protocol["impute"], metrics=metrics, search=search)
                        finish, _, _ = add_fold(plan, spec, setup, X=X_ref, y=y_ref, labels=item.y)
                    except ValueError as exc:  # a search's inner folds a class cannot fill, before any work
                        raise DataError(f"{item.name}, method {method['name']} (seed {seed}, fold {fold}): "
                                        f"{exc}") from None
                    folds[finish.id] = (item.name, method["name"], spec)
    logger.info("suite %s: %d datasets x %d methods -> %d folds, %d tasks", suite["name"], len(data),
                len(suite["methods"]), len(folds), len(plan.tasks))
    searched = any(m.get("search") for m in suite["methods"])  # progress counts inner folds too
    results = run_plan(plan, client=client, retries=suite["execution"]["retries"], progress=progress,
                       label="folds and inner folds" if searched else "folds", errors="return")
    return [_fold_record(results[i], dataset=name, method=method, spec=spec, metrics=metrics,
                         on_error=suite["execution"]["on_error"]) for i, (name, method, spec) in folds.items()]


def run_benchmark(suite: dict, client, *, out, command: str, data: list[SuiteData] | None = None,
                  progress: bool = True) -> dict:
    """Run a validated suite on ``client`` and write its results directory.

    Parameters
    ----------
    suite : dict
        As returned by :func:`dimbsvm.bench.suite.validate_suite`.
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
        As written to ``summary.json`` (see :mod:`dimbsvm.bench.report`).
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


#: Distributions the harness needs beyond dimbsvm's own (the ``bench`` extra), by import name.
BENCH_MODULES = {"pandas": "pandas", "scikit_posthocs": "scikit-posthocs", "statsmodels": "statsmodels",
                 "imblearn": "imbalanced-learn", "matplotlib": "matplotlib"}

#: Where results go without ``--out``.
DEFAULT_OUT = Path("bench-results")


def check_bench_extra() -> None:
    """Raise a one-line error naming the missing packages of the ``bench`` extra, if any."""
    import importlib.util

    missing = [dist for module, dist in BENCH_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise DimbsvmError(f"dimbsvm bench needs {', '.join(missing)}: pip install \"dimbsvm[bench]\"")


def bench(suite_path, *, out=None, scheduler=None, scheduler_file=None, cluster=None, n_workers=None, tls=None,
          dashboard_address=":0", timeout=20.0, progress=True, command="dimbsvm bench") -> tuple[dict, Path]:
    """``dimbsvm bench``: check the suite and its data, start or reach a cluster, run, write the results.

    Everything a user can get wrong (the suite, its datasets, ``out``, the
    ``bench`` extra) is checked before a cluster starts.

    Returns
    -------
    summary : dict
        As written to ``summary.json``.
    out : Path
        The results directory (default ``bench-results/<suite name>``).
    """
    check_bench_extra()
    suite = load_suite(suite_path)
    data = load_suite_data(suite)
    out = Path(out) if out else DEFAULT_OUT / suite["name"]
    _check_out(out)
    n_workers = n_workers or suite["execution"].get("n_workers")
    with cluster_client(scheduler, scheduler_file=scheduler_file, tls=tls, n_workers=n_workers, timeout=timeout,
                        cluster=cluster, **({} if scheduler or scheduler_file or cluster
                                            else {"dashboard_address": dashboard_address})) as client:
        summary = run_benchmark(suite, client, out=out, data=data, progress=progress, command=command)
    return summary, out


def _check_out(out: Path) -> None:
    """Refuse to replace a directory that is not an earlier results directory."""
    if out.exists() and any(out.iterdir()) and not (out / "summary.json").is_file():
        raise FileExistsError(f"{out} exists and is not a benchmark results directory; choose another --out")


def _is_embedded(client) -> bool:
    """Whether ``client`` runs on a cluster object in this process (a LocalCluster)."""
    return getattr(client, "cluster", None) is not None
