"""What a job over sparse rows may ask for, checked before any task starts.

A sparse store keeps rows as CSR (:mod:`dimbsvm.store.sparse`), and an
svmlight file is read into CSR: the tasks read CSR rows, and every step of
the job must keep them sparse. Scaling
that shifts (``minmax``) or centres (``standard``) turns every zero into a
value, so only ``maxabs`` (or ``none``) is taken. The structural stage,
refitted per fold, builds its kNN graph on the CSR rows; the other feature
stages and the kernel methods that build dense kernel or distance matrices
are refused with the alternative named. The store's record of NaN and
infinite values (written with its completion marker) stands in for a scan
of its chunks.
"""

from __future__ import annotations

from ..exceptions import DataError, StoreError

__all__ = ["SPARSE_ESTIMATORS", "SPARSE_FEATURES", "SPARSE_SCALERS", "check_sparse_job"]

#: Scalers that keep a zero zero.
SPARSE_SCALERS = ("maxabs", "none")
#: Feature stages (job names) that take CSR rows and keep them sparse: the kNN graph of the fold's training rows
#: with pynndescent's (or scikit-learn's exact) sparse metrics, its neighbourhood columns appended as CSR.
SPARSE_FEATURES = ("structural",)
#: Estimators (job names) whose fit and decision take CSR rows as they are.
SPARSE_ESTIMATORS = ("svc", "svc_balanced", "linear_svc", "othr", "thr", "ensemble_othr", "recommended")


def check_sparse_job(data, job, name: str) -> None:
    """Refuse what a job over sparse ``data`` (a sparse store, or CSR rows in memory) cannot do, in one line.

    Raises
    ------
    DataError
        A scaler other than ``maxabs``/``none``, imputation, a feature
        stage, an estimator that densifies, or rows holding NaN or infinite
        values (as the store records them, or found in memory).
    StoreError
        A chunk file of the store is missing.
    """
    from ..store.finite import recorded_nonfinite
    from ..store.sparse import chunk_lengths, find_sparse_damage, sparse_nonfinite_rows
    from ..store.sparse_rows import SparseStoreRows

    in_store = isinstance(data.X, SparseStoreRows)  # else CSR rows in memory
    nnz = data.meta.get("nnz") if in_store else data.X.nnz
    what = f"{name} is sparse {'store' if in_store else 'data'} ({nnz} stored values in {data.X.shape[0]} x " \
           f"{data.X.shape[1]})"
    scaler = job.preprocessing.scaler
    if scaler not in SPARSE_SCALERS:
        raise DataError(f"{what}: preprocessing.scaler {scaler} would turn every zero into a value (dense rows); "
                        "use maxabs, which keeps zeros zero, or none")
    if job.preprocessing.impute != "none":
        raise DataError(f"{what}: preprocessing.impute is for dense data; a sparse store's missing entries are "
                        "zeros already (set impute: none)")
    for stage in job.features:
        if stage.name not in SPARSE_FEATURES:
            raise DataError(f"{what}: feature stage {stage.name!r} reads dense rows and is not run on sparse data; "
                            f"{', '.join(SPARSE_FEATURES)} (not stored) takes CSR rows, or ingest a dense copy")
    # (a stored stage is built on min-max scaled rows: the job's own checks refuse it with maxabs or none)
    if job.estimator.name not in SPARSE_ESTIMATORS:
        raise DataError(f"{what}: estimator {job.estimator.name!r} builds dense kernel or distance matrices and is "
                        f"not run on a sparse store; one of {', '.join(SPARSE_ESTIMATORS)} takes CSR rows")
    if not in_store:  # its stored values are the ones to look at
        nan_rows, inf_rows = (int(v) for v in sparse_nonfinite_rows(data.X))
    else:
        recorded = recorded_nonfinite(data.meta, data.X.shape[0])
        if recorded is None:
            raise StoreError(f"{name}: the sparse store records no count of NaN and infinite values (its ingest "
                             "did not finish?); ingest it again")
        nan_rows, inf_rows = recorded
    if nan_rows or inf_rows:
        raise DataError(f"{what}: {nan_rows} row(s) hold NaN and {inf_rows} row(s) infinite values; remove or "
                        "replace them in the source")
    if in_store:
        damage = find_sparse_damage(data.X.path, chunk_lengths(data.X.shape[0], data.X.chunk_rows),
                                    data.X.shape[1], checksums=False)
        if damage:
            raise StoreError(f"store {data.X.path}: {damage}; rebuild it with `dimbsvm ingest SOURCE "
                             f"{data.X.path} --overwrite`")
