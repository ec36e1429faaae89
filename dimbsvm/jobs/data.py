"""A job's data as its tasks see it: opened, checked before any task starts, its labels coded.

Readers code binary labels by the class balance (the minority is 1; see
:func:`dimbsvm.datasets._labels.encode_labels`), so a batch whose balance
flipped would be coded the other way round. :func:`code_labels` fixes the
coding where it must not drift: the job's ``data.positive`` names the
positive class, and a retraining codes its data (and a separate holdout) as
its champion did, by class name.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from sklearn.utils import get_tags

from .._counts import unique_counts
from .._validation import is_dask_array
from ..datasets import load
from ..datasets._labels import label_key, positive_class_map, recode_labels
from ..estimators import fold_rows_needed, make_estimator, make_feature
from ..exceptions import DataError, StoreError
from ..model_selection.scoring import BINARY_METRICS
from ..model_selection.search import stage_params
from ..model_selection.splits import minority_class
from ..store.fingerprints import content_fingerprint, dataset_fingerprint
from ..store.rows import StoreLabels, StoreRows
from ..store.sparse_rows import SparseStoreRows, store_rows
from .sparse_checks import check_sparse_job
from ..store.location import is_url
from ..artifacts import positive_class
from .job_spec import JobSpec
from .spec import job_search
from .ingest_hint import ingest_command

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["JobData", "check_job_data", "class_names", "code_labels", "coded_as", "load_job_data", "values_per_row"]

logger = logging.getLogger(__name__)


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
    if is_url(source):  # object storage holds stores only (files there are ingested first)
        if nominal:
            raise DataError(f"data.nominal applies to CSV files; {source} is a store")
        return _store_data(source)
    path = Path(source)
    if _is_parquet(path):
        raise DataError(f"data source {source}: a job reads Parquet through a store; run "
                        f"{ingest_command(source)}, then give the store as data.source")
    if nominal and path.suffix.lower() != ".csv":
        raise DataError(f"data.nominal applies to CSV files; {source} is not one (its reader knows its "
                        "column types)")
    if path.suffix == ".zarr" and not path.exists():
        raise DataError(f"data source {source} does not exist")
    if path.is_dir() and (path / "zarr.json").exists():
        return _store_data(path)
    if not path.exists() and (os.sep in source or path.suffix):
        raise DataError(f"data source {source} does not exist")
    dataset = load(source, nominal=list(nominal)) if nominal else load(source)
    return JobData(X=dataset.X, y=dataset.y, meta=dict(dataset.meta(), fingerprint=dataset_fingerprint(dataset)))


_PARQUET_SUFFIXES = (".parquet", ".pq")


def _is_parquet(path: Path) -> bool:
    """A Parquet file, or a directory of them that is not a store."""
    if path.suffix.lower() in _PARQUET_SUFFIXES:
        return True
    return (path.is_dir() and not (path / "zarr.json").exists()
            and any(p.suffix.lower() in _PARQUET_SUFFIXES for p in path.iterdir()))


def _store_data(path) -> JobData:
    """A store's data: its rows and labels left in the store (tasks read them through handles).

    A store of at least :data:`SCAN_BYTES` of features that records its
    classes' counts (every store ingest writes) gives a labels handle that
    counts without reading: the driver of a job then holds no label (the
    checks, the coding and the plan need only the counts), and a damaged
    label chunk is met by the first task that reads it. A smaller store's
    labels (or an older store's) are read here, where a damaged chunk is
    found before any work starts, as its features are scanned.
    """
    from ..store.reading import open_store  # Zarr and Dask: imported for stores only

    stored = open_store(path)
    # the content fingerprint keys each process's cached chunks: a store rebuilt from other data is read again
    rows = store_rows(stored.path, stored.X.shape, stored.meta, content_fingerprint(stored.meta))
    counts = stored.meta.get("class_counts")
    if counts and math.prod(stored.X.shape) * stored.X.dtype.itemsize >= SCAN_BYTES:
        y = StoreLabels(stored.path, stored.X.shape[0], stored.meta.get("fingerprint", ""), counts=counts)
        return JobData(X=rows, y=y, meta=dict(stored.meta, source=str(path)), lazy_X=stored.X)
    try:
        y = np.asarray(stored.y.compute(scheduler="threads"))
        y.setflags(write=False)  # the store's labels: never changed, so counted once (unique_counts)
    except StoreError:
        raise
    except ValueError as exc:  # a chunk that fails its checksum or does not decode (truncated)
        raise _damaged(stored.path, exc) from exc
    return JobData(X=rows, y=y, meta=dict(stored.meta, source=str(path)), lazy_X=stored.X)


def values_per_row(data: JobData) -> float:
    """The values a row holds, which a solver's work per row grows with: its features (channels x length for
    series), or for a sparse store its stored values on average.

    Examples
    --------
    >>> values_per_row(JobData(X=np.zeros((4, 3)), y=np.zeros(4), meta={}))
    3.0
    """
    if isinstance(data.X, SparseStoreRows):
        return float(data.meta.get("nnz") or 0) / max(1, data.X.shape[0])
    if sp.issparse(data.X):
        return data.X.nnz / max(1, data.X.shape[0])
    return float(math.prod(data.X.shape[1:]))


def class_names(data: JobData) -> dict[str, int]:
    """Class name -> code of each class present in ``data.y``.

    Data without a class map (a store ingested from arrays keeps the
    caller's codes) names each class by its code.

    Examples
    --------
    >>> data = JobData(X=np.zeros((3, 1)), y=np.array([0, 1, 1]), meta={"class_map": {"b": 0, "a": 1, "c": 2}})
    >>> class_names(data)
    {'b': 0, 'a': 1}
    """
    present = set(unique_counts(data.y)[0].tolist())
    class_map = data.meta.get("class_map") or {label_key(code): code for code in present}
    return {str(name): int(code) for name, code in class_map.items() if int(code) in present}


def _alike_classes(names) -> str | None:
    """A sentence naming classes whose names differ only in case or surrounding spaces (``pos``, ``POS``), or None.

    Examples
    --------
    >>> _alike_classes({"pos": 0, "POS": 1, "neg": 2})
    "classes 'POS' and 'pos' differ only in case or spaces: if they are one class, write its name one way"
    >>> _alike_classes({"a": 0, "b": 1}) is None
    True
    """
    groups: dict = {}
    for name in names:
        groups.setdefault(str(name).strip().casefold(), []).append(str(name))
    alike = [sorted(group) for group in groups.values() if len(group) > 1]
    if not alike:
        return None
    first = alike[0]
    listed = " and ".join(repr(n) for n in first) if len(first) == 2 else ", ".join(repr(n) for n in first)
    return f"classes {listed} differ only in case or spaces: if they are one class, write its name one way"


def coded_as(data: JobData, class_map: dict[str, int], *, reference: str) -> JobData:
    """``data`` with its labels coded by ``class_map`` (the same classes, by name); itself where they already are.

    Parameters
    ----------
    data : JobData
    class_map : dict
        Class name -> code wanted.
    reference : str
        Where ``class_map`` comes from ("the champion v0002"), for messages.

    Raises
    ------
    DataError
        The classes of ``data`` are not those of ``class_map`` (a new class, a
        missing class), naming both.
    """
    names = class_names(data)
    if isinstance(data.y, StoreLabels):  # coded where the tasks read them: the present codes' new codes, checked
        present = np.array(sorted(names.values()), dtype=np.int64)
        new = recode_labels(present, names, class_map, source=data.name, reference=reference)
        y = data.y.recoded(dict(zip(present.tolist(), new.tolist())))
    else:
        y = recode_labels(data.y, names, class_map, source=data.name, reference=reference)
    if names == {name: class_map[name] for name in names}:
        return data
    logger.info("%s: labels coded as %s codes them (%s), not as the class balance would", data.name, reference,
                ", ".join(f"{name!r} -> {code}" for name, code in sorted(class_map.items(), key=lambda kv: kv[1])))
    labels, counts = unique_counts(y)
    meta = dict(data.meta, class_map=dict(class_map),
                class_counts={str(int(k)): int(c) for k, c in zip(labels, counts)})
    return dataclasses.replace(data, y=y, meta=meta)


def code_labels(data: JobData, *, positive=None, champion: dict | None = None,
                champion_id: str = "champion") -> tuple[JobData, object]:
    """The data with its labels coded as the job or the champion fixes them, and the positive label (a code).

    In order of precedence:

    * a champion's meta (a retraining): its ``class_map`` and positive class,
      so that the champion is scored against labels coded as it was trained
      and the challenger learns the same coding; ``positive``, if given, must
      name the champion's positive class;
    * ``positive`` (the job's ``data.positive``): that class is 1, the other 0;
    * neither: the data as read and its minority class
      (:func:`~dimbsvm.model_selection.splits.minority_class`), as always.

    Parameters
    ----------
    data : JobData
    positive : str or number, default=None
        The positive class as it appears in the data.
    champion : dict, default=None
        The champion model's meta (``class_map``, ``positive_label``).
    champion_id : str, default="champion"
        The champion's version, for messages.

    Returns
    -------
    data : JobData
        ``data`` itself where its coding is already the one fixed.
    pos_label : int
        The code of the positive class.

    Raises
    ------
    DataError
        The positive class does not occur in the data, the data's classes
        differ from the champion's, or ``positive`` is not the champion's
        positive class.

    Examples
    --------
    >>> data = JobData(X=np.zeros((3, 1)), y=np.array([1, 0, 0]), meta={"class_map": {"no": 0, "yes": 1}})
    >>> coded, pos_label = code_labels(data, positive="no")
    >>> coded.y.tolist(), coded.meta["class_map"], pos_label
    ([0, 1, 1], {'yes': 0, 'no': 1}, 1)
    """
    if champion is not None:
        return _champion_coding(data, positive, champion, champion_id)
    if positive is None:
        return data, minority_class(data.y)
    class_map = positive_class_map(list(class_names(data)), positive, source=data.name)
    return coded_as(data, class_map, reference="data.positive"), 1


def _champion_coding(data: JobData, positive, champion: dict, champion_id: str) -> tuple[JobData, object]:
    reference = f"the champion {champion_id}"
    name, code = positive_class(champion), champion.get("positive_label")
    if code is None:
        raise DataError(f"{reference} records no positive class in its meta; its labels cannot be matched to "
                        f"{data.name}'s")
    if positive is not None and name is not None and label_key(positive) != name:
        raise DataError(f"data.positive is {label_key(positive)!r}, but {reference} was trained with the positive "
                        f"class {name!r}; name that class, or retrain into a new registry")
    class_map = champion.get("class_map") or {}
    if not class_map and data.meta.get("class_map"):
        raise DataError(f"{reference} records no class names and {data.name} has them "
                        f"({', '.join(map(repr, class_names(data)))}); its labels cannot be matched by name")
    if not class_map:  # neither side has names: the codes are the caller's own (no balance rule), kept
        class_map = class_names(data)
        if code not in class_map.values():
            raise DataError(f"{data.name}: the positive label {code!r} of {reference} does not occur in the data; "
                            f"its labels are {sorted(class_map.values())}")
    return coded_as(data, {str(k): int(v) for k, v in class_map.items()}, reference=reference), code


#: More distinct labels than this, most of them on a single row, is not a class label.
MAX_CLASSES = 50


def check_job_data(data: JobData, job: JobSpec) -> None:
    """Reject data the job cannot use, before any task starts.

    Checks the shape, NaN/inf (for a store, a chunked Dask reduction that
    also finds damaged chunks; a large store whose meta records no bad rows
    is trusted instead, see :mod:`dimbsvm.store.finite`), the labels (at least two classes, a class
    label rather than a continuous or identifier column, two classes where
    the estimator or a metric needs two, ``data.positive`` one of the two
    classes), and that every fold is feasible:
    each class has at least ``cv.n_splits`` rows, and each training fold has
    more rows than a feature stage's ``references``/``n_neighbors`` or the
    estimator's ``n_neighbors`` ask for.

    :func:`~dimbsvm.jobs.checks.check_job` runs them before a run; a job it
    returns (a :class:`~dimbsvm.jobs.checks.CheckedJob`) is run without
    checking its data again (:func:`~dimbsvm.jobs.runner.run_checked`).

    Raises
    ------
    DataError
        Naming the data, the key or parameter, the numbers and the remedy.
    StoreError
        A chunk of the store is missing or damaged.
    """
    X, y = data.X, data.y
    name = job.data.source  # as the job names it
    search = job_search(job)
    shape = tuple(X.shape)
    if len(shape) == 3 and job.features and job.preprocessing.scaler == "none":
        pass  # time series: the first feature stage (e.g. similarity with dtw) reads them
    elif len(shape) != 2:
        raise DataError(
            f"{name}: the job's estimators need 2-D features, got shape {shape}; time series need "
            "a feature stage such as similarity (with preprocessing.scaler: none)")
    if shape[0] != y.shape[0]:
        raise DataError(f"{name}: X has {shape[0]} rows but y has {y.shape[0]} labels")
    if job.stored_features and not isinstance(X, StoreRows):
        raise DataError(f"{name}: a stored feature stage is kept in a dimbsvm Zarr store, and the data is not "
                        f"one; ingest it first (dimbsvm ingest {name} STORE.zarr) and name the store in data.source")
    if isinstance(X, SparseStoreRows) or sp.issparse(X):
        check_sparse_job(data, job, name)  # (its finite values and chunk files too)
    else:
        _check_finite(data, impute=job.preprocessing.impute != "none", name=name)
    labels, counts = unique_counts(y)
    if len(labels) < 2:
        raise DataError(f"{name}: only one class ({labels[0] if len(labels) else 'none'}) in the labels; "
                        "classification needs at least two")
    if job.data.positive is not None:  # a class of this data, and one of two
        positive_class_map(list(class_names(data)), job.data.positive, source=name)
    singletons = int((counts == 1).sum())
    if len(labels) > MAX_CLASSES and singletons > len(labels) / 2:
        raise DataError(
            f"{name}: the target has {len(labels)} distinct values, {singletons} of them on a single row: "
            "it is not a class label (a continuous or identifier column?); dimbsvm classifies, so choose a "
            "column of class labels as the target, or bin the values into classes")
    if len(labels) > 2:
        estimator = make_estimator(job.estimator.name, job.estimator.plain_params())
        alike = _alike_classes(class_names(data))
        if not get_tags(estimator).classifier_tags.multi_class:
            remedy = alike or "choose a multi-class estimator (svc, svc_balanced, linear_svc) or data with two classes"
            raise DataError(f"{name}: {len(labels)} classes, but estimator {job.estimator.name!r} "
                            f"({type(estimator).__name__}) is binary-only; {remedy}")
        binary_only = sorted(set(job.metrics) & set(BINARY_METRICS))
        if binary_only:
            remedy = alike or "drop them from 'metrics'"
            raise DataError(f"{name}: {len(labels)} classes, but metric(s) {', '.join(binary_only)} "
                            f"need two; {remedy}")
        binary_only = sorted(({search.scoring} | set(search.floor)) & set(BINARY_METRICS)) if search else []
        if binary_only:
            remedy = alike or "choose another 'search.scoring' / 'search.floor'"
            raise DataError(f"{name}: {len(labels)} classes, but the search's metric(s) {', '.join(binary_only)} "
                            f"need two; {remedy}")
        if alike:  # a multi-class job runs: said once, not refused (such classes may be meant)
            logger.warning("%s: %s", name, alike)
    n_splits = job.cv.n_splits
    if counts.min() < n_splits:
        small = labels[np.argmin(counts)]
        raise DataError(f"{name}: class {small} has {counts.min()} rows, fewer than cv.n_splits={n_splits}; "
                        "lower cv.n_splits or add data")
    if search is not None:
        inner = search.n_splits
        fewest = int(min(c - -(-c // n_splits) for c in counts))  # a class's rows in the smallest training fold
        if fewest < inner:
            small = labels[np.argmin(counts)]
            raise DataError(f"{name}: class {small} has {counts.min()} rows, so a training fold of "
                            f"{n_splits}-fold CV holds {fewest} of them, fewer than the search's cv={inner} inner "
                            "folds; lower search.cv or cv.n_splits, or add data")
    _check_fold_sizes(job, name, counts, search)


def _stage_settings(job: JobSpec, search):
    """``(index, stage, params)`` of every feature stage, once per distinct setting ``search`` gives it."""
    overrides = [stage_params(params) for params in search.candidates] if search is not None else [{}]
    for i, stage in enumerate(job.features):
        seen = []
        for override in overrides:
            params = {**stage.plain_params(), **override.get(i, {})}
            if params not in seen:
                seen.append(params)
                yield i, stage, params


def _check_fold_sizes(job: JobSpec, name: str, counts, search) -> None:
    """Stage and estimator sizes that every training fold must accommodate."""
    n_splits = job.cv.n_splits
    # stratified k-fold gives each class's rows to the folds as evenly as possible: the largest
    # test fold takes ceil(count / k) of every class, so the smallest training fold has this many rows
    train_counts = [c - -(-c // n_splits) for c in counts]
    train_rows = int(sum(train_counts))
    where = f"the smallest training fold ({n_splits}-fold CV of {int(sum(counts))} rows) has {train_rows} rows"
    if search is not None:  # a search fits on the inner training folds, smaller still
        inner = search.n_splits
        train_rows = int(sum(c - -(-c // inner) for c in train_counts))
        where = (f"the smallest inner training fold (the search's {inner} inner folds of {n_splits}-fold CV of "
                 f"{int(sum(counts))} rows) has {train_rows} rows")
    for i, stage, params in _stage_settings(job, search):
        needed = fold_rows_needed("feature", stage.name, make_feature(stage.name, params).get_params())
        _check_rows(needed, train_rows, f"{name}: features.{i} ({stage.name})", f"features.{i}.params", where)
    estimator_name = job.estimator.name
    estimator = make_estimator(estimator_name, job.estimator.plain_params())
    needed = fold_rows_needed("estimator", estimator_name, estimator.get_params())
    _check_rows(needed, train_rows, f"{name}: estimator {estimator_name!r}", "estimator.params", where)


def _check_rows(needed, train_rows: int, what: str, key: str, where: str) -> None:
    """Refuse a method whose parameters need more training rows than the smallest fold has."""
    if needed is not None and needed.rows > train_rows:
        raise DataError(f"{what} asks for {needed.asks}, but {where}; {needed.fix.format(key=key, rows=train_rows)}")


def _damaged(path, exc: BaseException) -> StoreError:
    """A ``StoreError`` naming the damaged chunk (found by re-reading the store) for a failed read."""
    from ..store.reading import find_damage

    try:
        damage = find_damage(path, checksums=True)
    except Exception:  # noqa: BLE001 - the original error is still reported
        damage = None
    detail = damage or f"a chunk failed to decode ({' '.join(str(exc).split())})"
    return StoreError(f"store {path}: {detail}; rebuild it with `dimbsvm ingest SOURCE {path} --overwrite`")


#: A store holding fewer feature bytes than this is scanned for NaN/inf (and damage) even when it records its
#: counts: the scan is cheap at this size, and finds a damaged chunk before any cluster starts.
SCAN_BYTES = 32 * 2**20


def _check_finite(data: JobData, *, impute: bool, name: str) -> None:
    if _recorded_finite(data, impute=impute):
        return
    X = data.lazy_X if data.lazy_X is not None else np.asarray(data.X)
    lazy = is_dask_array(X)  # a store's rows; in-memory data does not import Dask
    if lazy:
        import dask.array as da
    xp = da if lazy else np
    per_row = tuple(range(1, X.ndim))
    bad_inf = xp.isinf(X).any(axis=per_row)
    bad_nan = xp.isnan(X).any(axis=per_row)
    if X.ndim == 3:
        impute = True  # NaN right-pads series of unequal length; the feature stage handles it
    if lazy:
        try:
            bad_inf, bad_nan = da.compute(bad_inf, bad_nan)
        except StoreError:
            raise
        except ValueError as exc:  # a chunk that fails its checksum or does not decode
            raise _damaged(data.meta.get("source", data.name), exc) from exc
    if bad_inf.any():
        row = int(np.flatnonzero(bad_inf)[0])
        col = int(np.flatnonzero(np.isinf(np.asarray(X[row]).reshape(-1)))[0])
        raise DataError(f"{name}: infinite value in row {row}, column {_column_name(data, col)}; "
                        "remove or clip it")
    if bad_nan.any() and not impute:
        row = int(np.flatnonzero(bad_nan)[0])
        col = int(np.flatnonzero(np.isnan(np.asarray(X[row])))[0])
        raise DataError(
            f"{name}: {int(bad_nan.sum())} row(s) with missing values (NaN), first in row {row}, column "
            f"{_column_name(data, col)}; set preprocessing.impute to mean or median to impute them")


def _recorded_finite(data: JobData, *, impute: bool) -> bool:
    """Whether a store's meta records that its rows pass the check (no chunk read); False: scan them.

    A store written by dimbsvm records how many of its rows hold NaN and
    infinite values (:mod:`dimbsvm.store.finite`); reading every chunk to
    find none is client work proportional to the rows. Where the record
    shows bad values, or there is none, the rows are scanned as before, so
    the refusal names the first bad row and column.

    The scan also finds damaged chunks before anything starts. Stores under
    :data:`SCAN_BYTES` are still scanned: a damaged chunk
    fails the check, not a task on a cluster. Above it, missing chunk files
    are still looked for (a listing, no read), and a chunk whose bytes fail
    their checksum fails the first task that reads it, naming it the same way.
    """
    if data.lazy_X is None or not isinstance(data.X, StoreRows) or data.lazy_X.nbytes < SCAN_BYTES:
        return False
    from ..store.finite import recorded_nonfinite

    recorded = recorded_nonfinite(data.meta, data.lazy_X.shape[0])
    if recorded is None:
        return False
    nan_rows, inf_rows = recorded
    if inf_rows or (nan_rows and not impute and data.lazy_X.ndim != 3):  # 3-D: NaN pads series, imputed
        return False
    from ..store._zarr import missing_message, missing_chunks
    from ..store.location import join

    missing = missing_chunks(join(data.X.path, "X"))
    if missing:  # as the scan's read of the chunk said it
        raise StoreError(missing_message(data.X.path, "X", list(missing[0])))
    logger.debug("%s: the store records %d row(s) with NaN and none with infinite values; not scanned",
                 data.X.path, nan_rows)
    return True


def _column_name(data: JobData, col) -> str:
    names = data.meta.get("feature_names") or []
    return f"{col} ({names[col]})" if col < len(names) else str(col)


