"""A job's data as its tasks see it: opened, and checked before any task starts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import dask.array as da
import numpy as np

from ..datasets import load
from ..model_selection.scoring import BINARY_METRICS
from ..exceptions import DataError
from ..store import StoreRows, dataset_fingerprint, open_store

__all__ = ["JobData", "check_job_data", "load_job_data"]


@dataclass
class JobData:
    """A job's data as tasks see it.

    ``X`` is an in-memory array for files, or a :class:`~dimbsvm.store.StoreRows`
    handle for a Zarr store, so that workers read the rows they need and the
    client never holds the features. ``y`` is always in memory: folds are
    built from it.
    """

    X: object
    y: np.ndarray
    meta: dict
    lazy_X: da.Array | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.meta.get("name") or self.meta.get("source", "data")


def load_job_data(source: str, *, nominal=()) -> JobData:
    """The job's data: a dimbsvm Zarr store directory, a data file or a bundled name.

    ``nominal`` names CSV columns to one-hot encode although they hold numbers
    (the job's ``data.nominal``); other sources reject it.
    """
    path = Path(source)
    if nominal and path.suffix.lower() != ".csv":
        raise DataError(f"data.nominal applies to CSV files; {source} is not one (its reader knows its "
                        "column types)")
    if path.suffix == ".zarr" and not path.exists():
        raise DataError(f"data source {source} does not exist")
    if path.is_dir() and (path / "zarr.json").exists():
        stored = open_store(path)
        y = np.asarray(stored.y.compute())
        return JobData(X=StoreRows(stored.path, stored.X.shape), y=y, meta=dict(stored.meta, source=str(path)),
                       lazy_X=stored.X)
    if not path.exists() and (os.sep in source or path.suffix):
        raise DataError(f"data source {source} does not exist")
    dataset = load(source, nominal=list(nominal)) if nominal else load(source)
    return JobData(X=dataset.X, y=dataset.y, meta=dict(dataset.meta(), fingerprint=dataset_fingerprint(dataset)))


def check_job_data(data: JobData, job: dict) -> None:
    """Reject data the job cannot use, before any task starts.

    For a store, the NaN/inf scan is a chunked Dask reduction (it runs on the
    current client's workers when there is one).

    Raises
    ------
    DataError
        NaN/inf without imputation, fewer than two classes, binary-only
        metrics on multi-class labels, or a class smaller than the number of
        folds.
    """
    X, y, name = data.X, data.y, data.name
    shape = tuple(X.shape)
    if len(shape) == 3 and job["features"] and job["preprocessing"]["scaler"] == "none":
        pass  # time series: the first feature stage (e.g. similarity with dtw) reads them
    elif len(shape) != 2:
        raise DataError(
            f"{name}: the job's estimators need 2-D features, got shape {shape}; time series need "
            "a feature stage such as similarity (with preprocessing.scaler: none)")
    if shape[0] != y.shape[0]:
        raise DataError(f"{name}: X has {shape[0]} rows but y has {y.shape[0]} labels")
    _check_finite(data, impute=job["preprocessing"]["impute"] != "none")
    labels, counts = np.unique(y, return_counts=True)
    if len(labels) < 2:
        raise DataError(f"{name}: only one class ({labels[0] if len(labels) else 'none'}) in the labels; "
                        "classification needs at least two")
    binary_only = sorted(set(job["metrics"]) & set(BINARY_METRICS))
    if len(labels) > 2 and binary_only:
        raise DataError(f"{name}: {len(labels)} classes, but metric(s) {', '.join(binary_only)} "
                        "need two; drop them from 'metrics'")
    n_splits = job["cv"]["n_splits"]
    if counts.min() < n_splits:
        small = labels[np.argmin(counts)]
        raise DataError(f"{name}: class {small} has {counts.min()} rows, fewer than cv.n_splits={n_splits}; "
                        "lower cv.n_splits or add data")


def _check_finite(data: JobData, *, impute: bool) -> None:
    X = data.lazy_X if data.lazy_X is not None else np.asarray(data.X)
    xp = da if isinstance(X, da.Array) else np
    per_row = tuple(range(1, X.ndim))
    bad_inf = xp.isinf(X).any(axis=per_row)
    bad_nan = xp.isnan(X).any(axis=per_row)
    if X.ndim == 3:
        impute = True  # NaN right-pads series of unequal length; the feature stage handles it
    if isinstance(X, da.Array):
        bad_inf, bad_nan = da.compute(bad_inf, bad_nan)
    if bad_inf.any():
        row = int(np.flatnonzero(bad_inf)[0])
        col = int(np.flatnonzero(np.isinf(np.asarray(X[row]).reshape(-1)))[0])
        raise DataError(f"{data.name}: infinite value in row {row}, column {_column_name(data, col)}; "
                        "remove or clip it")
    if bad_nan.any() and not impute:
        row = int(np.flatnonzero(bad_nan)[0])
        col = int(np.flatnonzero(np.isnan(np.asarray(X[row])))[0])
        raise DataError(
            f"{data.name}: {int(bad_nan.sum())} row(s) with missing values (NaN), first in row {row}, column "
            f"{_column_name(data, col)}; set preprocessing.impute to mean or median to impute them")


def _column_name(data: JobData, col) -> str:
    names = data.meta.get("feature_names") or []
    return f"{col} ({names[col]})" if col < len(names) else str(col)


