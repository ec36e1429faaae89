"""Labels that do not drift (issue 30, item 1): the positive class is fixed by the job or by the champion.

The binary reader rule codes the minority as 1, so a batch whose class
balance flipped is coded the other way round. These tests retrain on real
data (the bundled KEEL set ecoli1, its classes renamed ``im``/``other`` in
CSV files so that the reader's minority rule applies) and check the holdout
metrics against ones computed here, independently, with
:func:`dimbsvm.metrics.g_mean` on labels coded by name.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split

from dimbsvm.datasets import load_csv, load_keel
from dimbsvm.datasets._labels import positive_class_map, recode_labels
from dimbsvm.exceptions import DataError
from dimbsvm.jobs import load_job_data, validate_job
from dimbsvm.jobs.data import code_labels
from dimbsvm.jobs.registry import ModelRegistry
from dimbsvm.jobs.retrain import retrain
from dimbsvm.metrics import g_mean

ROOT = Path(__file__).resolve().parents[1]
HOLDOUT = {"fraction": 0.3, "random_state": 1}


def _ecoli_batch(path: Path, *, n_other=None, names=("im", "other"), seed=0, columns=None):
    """ecoli1 as a CSV with classes ``names`` (positive, negative); ``n_other`` negative rows only (a flip).

    ``columns`` writes the feature columns in that order. Returns the
    features (in ecoli1's column order) and the class names written, row for row.
    """
    data = load_keel("ecoli1")
    rows = np.flatnonzero(data.y == 1)
    negative = np.flatnonzero(data.y == 0)
    if n_other is not None:
        negative = np.sort(np.random.default_rng(seed).choice(negative, n_other, replace=False))
    rows = np.concatenate([rows, negative])
    labels = np.where(data.y[rows] == 1, names[0], names[1])
    columns = list(range(data.X.shape[1])) if columns is None else list(columns)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*[data.feature_names[j] for j in columns], "class"])
        writer.writerows([*x, label] for x, label in zip(data.X[rows][:, columns].tolist(), labels))
    return data.X[rows], labels


def _job(source, estimator="svc_balanced", holdout=None, positive=None):
    data = {"source": str(source)}
    if positive is not None:
        data["positive"] = positive
    return validate_job({"name": "labels", "data": data, "estimator": {"name": estimator},
                         "retrain": {"holdout": holdout or HOLDOUT, "gates": {"g_mean": {"tolerance": 0.0}}}})


def _holdout_rows(y):
    return train_test_split(np.arange(len(y)), test_size=HOLDOUT["fraction"], random_state=HOLDOUT["random_state"],
                            stratify=y)[1]


def test_positive_class_map_and_recoding_by_name():
    assert positive_class_map(["im", "other"], "other", source="s") == {"im": 0, "other": 1}
    assert positive_class_map(["-1", "1"], "+1", source="s") == {"-1": 0, "1": 1}
    with pytest.raises(DataError, match=r"^s: the positive class 'x' does not occur in the data; its classes are "
                                        r"'im', 'other'$"):
        positive_class_map(["im", "other"], "x", source="s")
    with pytest.raises(DataError, match="a positive class applies to two"):
        positive_class_map(["a", "b", "c"], "a", source="s")
    y = np.array([1, 0, 0, 1])
    np.testing.assert_array_equal(recode_labels(y, {"other": 1, "im": 0}, {"im": 1, "other": 0}, source="s"),
                                  [0, 1, 1, 0])
    with pytest.raises(DataError, match=r"^s: its classes are 'im', 'rest', those of the champion 'im', 'other' "
                                        r"\(new: 'rest'; missing: 'other'\)"):
        recode_labels(y, {"rest": 1, "im": 0}, {"im": 1, "other": 0}, source="s", reference="the champion")


def test_without_positive_or_champion_the_reader_coding_stays():
    data = load_job_data("ecoli1")  # KEEL names: 'positive' -> 1, as before
    same, pos_label = code_labels(data)
    assert same is data and pos_label == 1 and data.meta["class_map"] == {"negative": 0, "positive": 1}


def test_retrain_after_the_balance_flips_keeps_the_positive_class(client, tmp_path):
    reg = tmp_path / "reg"
    _ecoli_batch(tmp_path / "a.csv")
    X_b, names_b = _ecoli_batch(tmp_path / "b.csv", n_other=40)  # 'im' (77 rows) is now the majority
    assert load_csv(tmp_path / "b.csv").class_map == {"im": 0, "other": 1}  # what the minority rule would code

    first = retrain(_job(tmp_path / "a.csv"), client, reg, job_text="a")
    registry = ModelRegistry(reg)
    champion, meta = registry.load(first.version)
    assert meta["class_map"] == {"other": 0, "im": 1} and meta["positive_class"] == "im"

    second = retrain(_job(tmp_path / "b.csv", estimator="svc"), client, reg, job_text="b")
    y_b = (names_b == "im").astype(int)  # coded by name, as the champion was trained
    hold = _holdout_rows(y_b)
    expected = g_mean(y_b[hold], champion.predict(X_b[hold]))
    assert expected > 0.8  # the champion is good on this batch; inverted labels would give about 0
    assert second.champion_metrics["g_mean"] == pytest.approx(expected)
    assert second.champion_metrics["f_measure"] == pytest.approx(
        f1_score(y_b[hold], champion.predict(X_b[hold]), pos_label=1))
    challenger, challenger_meta = registry.load(second.version)
    assert second.challenger_metrics["g_mean"] == pytest.approx(g_mean(y_b[hold], challenger.predict(X_b[hold])))
    assert challenger_meta["class_map"] == {"other": 0, "im": 1} and challenger_meta["positive_class"] == "im"
    assert challenger_meta["positive_label"] == 1
    assert second.promoted == (second.challenger_metrics["g_mean"] >= second.champion_metrics["g_mean"])


@pytest.mark.parametrize("columns", [None, [6, 3, 0, 5, 1, 4, 2]], ids=["same-columns", "moved-columns"])
def test_a_holdout_of_reversed_ratio_is_coded_as_the_training_data(client, tmp_path, columns):
    """The holdout's classes by name, and (a holdout file in another column order) its columns by name."""
    _ecoli_batch(tmp_path / "a.csv")
    X_h, names_h = _ecoli_batch(tmp_path / "holdout.csv", n_other=30, seed=1, columns=columns)
    job = _job(tmp_path / "a.csv", holdout={"source": str(tmp_path / "holdout.csv")})
    outcome = retrain(job, client, tmp_path / "reg", job_text="a")
    model, meta = ModelRegistry(tmp_path / "reg").load(outcome.version)
    y_h = (names_h == "im").astype(int)
    predicted = model.predict(X_h)
    assert g_mean(y_h, predicted) > 0.8
    assert outcome.challenger_metrics["g_mean"] == pytest.approx(g_mean(y_h, predicted))
    assert outcome.challenger_metrics["f_measure"] == pytest.approx(f1_score(y_h, predicted, pos_label=1))
    assert meta["positive_class"] == "im"


def test_the_job_names_its_positive_class(client, tmp_path):
    X_a, names_a = _ecoli_batch(tmp_path / "a.csv")
    outcome = retrain(_job(tmp_path / "a.csv", positive="other"), client, tmp_path / "reg", job_text="a")
    model, meta = ModelRegistry(tmp_path / "reg").load(outcome.version)
    assert meta["class_map"] == {"im": 0, "other": 1} and meta["positive_label"] == 1
    assert meta["positive_class"] == "other"
    y_a = (names_a == "other").astype(int)
    hold = _holdout_rows(y_a)
    assert outcome.challenger_metrics["f_measure"] == pytest.approx(
        f1_score(y_a[hold], model.predict(X_a[hold]), pos_label=1))
    # the champion fixes it from now on: a job naming the other class is refused, before any fit
    with pytest.raises(DataError, match=r"^data.positive is 'im', but the champion v0001\S* was trained with the "
                                        r"positive class 'other'"):
        retrain(_job(tmp_path / "a.csv", positive="im"), client, tmp_path / "reg", job_text="a")
    assert len(ModelRegistry(tmp_path / "reg").versions()) == 1


def test_a_batch_with_other_classes_than_the_champion_is_refused(client, tmp_path):
    _ecoli_batch(tmp_path / "a.csv")
    _ecoli_batch(tmp_path / "c.csv", names=("im", "rest"))
    retrain(_job(tmp_path / "a.csv"), client, tmp_path / "reg", job_text="a")
    with pytest.raises(DataError, match=r"c: its classes are 'im', 'rest', those of the champion v0001\S* 'im', "
                                        r"'other' \(new: 'rest'; missing: 'other'\)"):
        retrain(_job(tmp_path / "c.csv"), client, tmp_path / "reg", job_text="c")
    assert len(ModelRegistry(tmp_path / "reg").versions()) == 1


def test_run_with_a_named_positive_class(client, tmp_path):
    from dimbsvm.jobs import run_job

    _ecoli_batch(tmp_path / "a.csv")
    job = validate_job({"name": "pos", "data": {"source": str(tmp_path / "a.csv"), "positive": "other"},
                        "estimator": {"name": "svc_balanced"}, "cv": {"n_splits": 2},
                        "metrics": ["g_mean", "f_measure"]})
    result = run_job(job, client, out=tmp_path / "run", progress=False)
    meta = json.loads((result.run_dir / "model" / "meta.json").read_text())
    assert meta["class_map"] == {"im": 0, "other": 1} and meta["positive_label"] == 1
    # F-measure of 'other', the majority: far above what the minority 'im' would give
    assert result.summary["f_measure"]["mean"] > 0.9


def test_an_absent_positive_class_is_one_line(tmp_path):
    _ecoli_batch(tmp_path / "a.csv")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "p", "data": {"source": str(tmp_path / "a.csv"), "positive": "imU"},
                                   "estimator": {"name": "svc"}}))
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "validate", str(job)], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore"), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"dimbsvm: error: {tmp_path / 'a.csv'}: the positive class 'imU' does not "
                                        "occur in the data; its classes are 'im', 'other'"]


def test_counts_of_read_only_labels_are_kept_and_equal_numpys():
    # a store's labels are loaded read-only: the client counts them once, however often it asks
    from dimbsvm import _counts
    from dimbsvm._counts import unique_counts

    y = np.random.RandomState(0).randint(0, 3, size=10_000)
    y.setflags(write=False)
    first = unique_counts(y)
    expected = np.unique(y, return_counts=True)
    for counted in (first, unique_counts(y)):
        np.testing.assert_array_equal(counted[0], expected[0])
        np.testing.assert_array_equal(counted[1], expected[1])
    assert unique_counts(y)[1] is first[1]  # the kept counts, not a second pass
    with pytest.raises(ValueError):
        first[1][0] = 0  # shared, so not writable
    # a writable array is counted afresh each time: it may have changed
    z = y.copy()
    assert unique_counts(z)[1] is not unique_counts(z)[1]
    z[:5000] = 2
    np.testing.assert_array_equal(unique_counts(z)[1], np.unique(z, return_counts=True)[1])
    # the counts go with the labels
    key = id(y)
    del y, first, counted
    assert key not in _counts._counted
