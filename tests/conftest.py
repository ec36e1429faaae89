"""Shared fixtures: a quick in-process Dask cluster and the repository's paths."""

from pathlib import Path

import pytest
from s3_server import moto_s3_server

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
                   features=(), pos_label=None, scaler=None):
    """The independent sequential truth for one fold: explicit split, scikit-learn pipeline, direct scoring.

    No dimbsvm engine code but the folds (``StratifiedBlockKFold``, tested row by row against their definition):
    ``MinMaxScaler`` (or ``scaler``) -> feature stages -> the estimator fitted by ``Pipeline.fit`` in this process,
    then G-mean from per-class recalls, F-measure and ROC-AUC from scikit-learn. A sparse ``X`` stays sparse.
    """
    import numpy as np
    from sklearn.base import clone
    from sklearn.metrics import f1_score, recall_score, roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    from dimbsvm.model_selection import StratifiedBlockKFold

    import scipy.sparse as sp

    X, y = (X.tocsr() if sp.issparse(X) else np.asarray(X)), np.asarray(y)
    labels, counts = np.unique(y, return_counts=True)
    pos = labels[np.lexsort((-labels, counts))[0]] if pos_label is None else pos_label
    train, test = list(StratifiedBlockKFold(n_splits, random_state=seed).split(X, y))[fold]
    model = make_pipeline(clone(scaler) if scaler is not None else MinMaxScaler(), *[clone(f) for f in features],
                          clone(estimator)).fit(X[train], y[train])
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


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API server (moto's server mode) on 127.0.0.1, for the whole session.

    Yields the environment a client needs to reach it (endpoint and dummy
    credentials, as s3fs and boto read them). Skipped when moto is absent.
    """
    with moto_s3_server() as endpoint:
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture
def small_tmpfs(tmp_path):
    """``small_tmpfs(size)``: a new tmpfs of ``size`` (``"256k"``, ``"3m"``) under ``tmp_path``, unmounted after the
    test (root only; the test is skipped where mounting is not permitted)."""
    import os
    import subprocess

    mounted = []

    def mount(size):
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root")
        path = tmp_path / f"disk-{len(mounted)}"
        path.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def s3_bucket(s3_server, monkeypatch, request):
    """A new bucket on the session's S3 server, with this test's environment pointing at the server."""
    import re

    import s3fs

    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + f"-{id(request) % 10**6}"
    s3fs.S3FileSystem().mkdir(name)
    return name


@pytest.fixture(scope="session")
def cli():
    """``cli(*args, cwd=ROOT, timeout=300)``: ``python -m dimbsvm.cli ARGS``, a process of its own, forked.

    For invocations that start no cluster (an error before any work, ``ingest``, ``validate``): the child of
    ``cli_forkserver.py``, which imported scikit-learn, Dask and Zarr once, runs ``dimbsvm.cli`` as
    ``__main__`` with its own exit status, stdout and stderr (a ``subprocess.CompletedProcess``). The
    environment is this session's at the first use, with this checkout first on ``PYTHONPATH``,
    ``PYTHONWARNINGS=ignore`` and no ``DASK_SCHEDULER_ADDRESS``; what the imports wrote on stderr is
    asserted empty on every call.
    """
    import os

    from cli_forkserver import serving

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # this checkout
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    with serving(env, ROOT) as run:
        yield run
