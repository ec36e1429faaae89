"""Shared fixtures: a quick in-process Dask cluster and the repository's paths."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def client():
    """An in-process LocalCluster (threads) for quick distributed tests."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(params=["in-process", "distributed"])
def scheduler(request):
    """Where the engine runs tasks: ``None`` (in this process, in order) or the in-process cluster's client.

    Every fold/member/stage behaviour that takes this fixture is tested on both.
    """
    return None if request.param == "in-process" else request.getfixturevalue("client")


def reference_fold(X, y, estimator, *, n_splits, seed, fold, metrics=("g_mean", "f_measure", "auc"),
                   features=(), pos_label=None):
    """The independent sequential truth for one fold: explicit split, scikit-learn pipeline, direct scoring.

    No dimbsvm engine code: ``StratifiedKFold`` with shuffling, ``MinMaxScaler`` ->
    feature stages -> the estimator fitted by ``Pipeline.fit`` in this process, then
    G-mean from per-class recalls, F-measure and ROC-AUC from scikit-learn.
    """
    import numpy as np
    from sklearn.base import clone
    from sklearn.metrics import f1_score, recall_score, roc_auc_score
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    X, y = np.asarray(X), np.asarray(y)
    labels, counts = np.unique(y, return_counts=True)
    pos = labels[np.lexsort((-labels, counts))[0]] if pos_label is None else pos_label
    train, test = list(StratifiedKFold(n_splits, shuffle=True, random_state=seed).split(X, y))[fold]
    model = make_pipeline(MinMaxScaler(), *[clone(f) for f in features], clone(estimator)).fit(X[train], y[train])
    y_pred = model.predict(X[test])
    record = {"seed": seed, "fold": fold, "n_train": len(train), "n_test": len(test)}
    recalls = recall_score(y[test], y_pred, average=None, labels=labels, zero_division=0)
    if "g_mean" in metrics:
        record["g_mean"] = float(np.prod(recalls) ** (1 / len(recalls)))
    if "f_measure" in metrics:
        record["f_measure"] = float(f1_score(y[test], y_pred, pos_label=pos, zero_division=0))
    if "auc" in metrics:
        scores = model.decision_function(X[test])
        sign = 1 if list(model.classes_).index(pos) == 1 else -1
        record["auc"] = float(roc_auc_score(y[test] == pos, sign * scores))
    final = model[-1]
    for attr, key in (("threshold_", "threshold"), ("thresholds_", "member_thresholds")):
        value = getattr(final, attr, None)
        if value is not None:
            record[key] = np.asarray(value, dtype=float).tolist() if np.ndim(value) else float(value)
    return record


@pytest.fixture(scope="session")
def sequential_fold():
    """:func:`reference_fold`, the sequential truth that engine results are compared against."""
    return reference_fold


def _arrays_in(value):
    import numpy as np

    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _arrays_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _arrays_in(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _arrays_in(getattr(value, name))


@pytest.fixture(scope="session")
def graph_array_sizes():
    """``sizes(plan)``: the sizes of every NumPy array inside a TaskPlan's task arguments (what the graph carries)."""
    def sizes(plan):
        return [a.size for task in plan.tasks for value in task.kwargs.values() for a in _arrays_in(value)]

    return sizes
