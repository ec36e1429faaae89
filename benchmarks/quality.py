"""The quality suite: every (dataset, method, repeat, fold) as one Dask task.

Usage (from the repository root)::

    python -m benchmarks.quality SUITE.yaml [--scheduler ADDR] [--workers N] [--out DIR] [--no-progress]

The suite is validated and every dataset loaded and checked before a cluster
starts. Each dataset is scattered to the cluster once; a task receives the
data by reference plus (method, seed, fold) and rebuilds its fold from the
seed (:func:`dimbsvm.evaluation.fold_indices`), so all methods see identical
training and test rows. The results directory (see :mod:`benchmarks.report`)
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

from dimbsvm.distributed import cluster_client, run_tasks
from dimbsvm.evaluation import evaluate_fold, fold_indices, positive_label, repeat_seeds
from dimbsvm.exceptions import DataError, DimbsvmError
from dimbsvm.jobs import check_job_data, load_job_data

from .environment import machine_info, package_versions, utc_now
from .suite import build_method, estimator_random_state, load_suite

__all__ = ["SuiteData", "load_suite_data", "suite_calls", "evaluate_method_fold", "run_suite", "run_benchmark",
           "main"]

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
    # check_job_data reads these keys of a job; the suite's protocol maps onto them.
    as_job = {"preprocessing": {"impute": protocol["impute"]}, "metrics": suite["metrics"],
              "cv": {"n_splits": protocol["n_splits"]}}
    loaded, seen = [], {}
    for source in suite["datasets"]:
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
    order = sorted(data, key=lambda d: -len(d.y) * d.X.shape[1])
    calls = []
    for item in order:
        X, y = refs[item.name]
        for method in suite["methods"]:
            for seed in seeds:
                for fold in range(protocol["n_splits"]):
                    calls.append({
                        "X": X, "y": y, "dataset": item.name, "method": method["name"],
                        "estimator": build_method(method, random_state=estimator_random_state(
                            protocol, seed=seed, fold=fold)),
                        "n_splits": protocol["n_splits"], "seed": seed, "fold": fold,
                        "metrics": tuple(suite["metrics"]), "scaler": protocol["scaler"],
                        "impute": protocol["impute"], "pos_label": item.pos_label,
                        "on_error": suite["execution"]["on_error"],
                    })
    return calls


def evaluate_method_fold(X, y, *, dataset: str, method: str, on_error: str = "raise", **kwargs) -> dict:
    """:func:`dimbsvm.evaluation.evaluate_fold` with the dataset and method named in the record.

    Parameters
    ----------
    X, y : arrays
    dataset, method : str
        Names for the record and for error messages.
    on_error : {"raise", "record"}, default="raise"
        A failing fit (e.g. a peer that cannot handle a fold with very few
        minority rows) either raises, naming dataset, method, seed and fold,
        or returns a record with the error message and NaN metrics, so one
        failure does not throw away a whole suite.
    **kwargs
        Passed to :func:`~dimbsvm.evaluation.evaluate_fold`.

    Returns
    -------
    record : dict
        ``{"dataset", "method", "seed", "fold", "n_train", "n_test", <metric>: value, ..., "error"}``;
        ``error`` is None unless the fold failed.
    """
    where = f"{method} on {dataset} (seed {kwargs.get('seed')}, fold {kwargs.get('fold')})"
    try:
        record = evaluate_fold(X, y, **kwargs)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        if on_error == "raise":
            raise RuntimeError(f"{where} failed: {message}") from exc
        logger.warning("%s failed: %s", where, message)
        train, test = fold_indices(y, n_splits=kwargs["n_splits"], seed=kwargs["seed"], fold=kwargs["fold"])
        record = {"seed": int(kwargs["seed"]), "fold": int(kwargs["fold"]), "n_train": int(len(train)),
                  "n_test": int(len(test)), **{name: float("nan") for name in kwargs.get("metrics", ())},
                  "error": message}
    return {"dataset": dataset, "method": method, "error": None, **record}


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
    refs = {item.name: (client.scatter(item.X, hash=False), client.scatter(item.y, hash=False))
            for item in data}
    calls = suite_calls(suite, data, refs)
    logger.info("suite %s: %d datasets x %d methods -> %d fold tasks", suite["name"], len(data),
                len(suite["methods"]), len(calls))
    return run_tasks(client, evaluate_method_fold, calls, retries=suite["execution"]["retries"],
                     progress=progress, label="folds")


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
