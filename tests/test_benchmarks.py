"""The quality benchmark: the smoke suite end to end, suite validation, peers and report statistics."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("imblearn")
pytest.importorskip("scikit_posthocs")
pytest.importorskip("matplotlib")

from sklearn.preprocessing import MinMaxScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ sits beside the package and is not installed; `python -m pytest`
# from the root finds it, plain `pytest` (importlib import mode) needs this.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dimbsvm.bench import quality, stats  # noqa: E402
from dimbsvm.model_selection import StratifiedBlockKFold  # noqa: E402
from dimbsvm.bench.peers import fold_random_state, make_peer  # noqa: E402
from benchmarks.results import render_results  # noqa: E402
from dimbsvm.bench.suite import build_method, load_suite, validate_suite  # noqa: E402
from dimbsvm.datasets import load_keel  # noqa: E402
from dimbsvm.exceptions import JobSpecError  # noqa: E402

SMOKE = ROOT / "benchmarks" / "smoke.yaml"


@pytest.fixture(scope="module")
def smoke(client, tmp_path_factory):
    """The smoke suite run once on the in-process cluster: (suite, results directory, records)."""
    suite = load_suite(SMOKE)
    out = tmp_path_factory.mktemp("bench") / "smoke"
    captured = {}
    original = quality.run_suite

    def run_and_keep(*args, **kwargs):
        captured["records"] = original(*args, **kwargs)
        return captured["records"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(quality, "run_suite", run_and_keep)
        quality.run_benchmark(suite, client, out=out, command="pytest smoke", progress=False)
    return suite, out, captured["records"]


def test_folds_table_has_every_dataset_method_fold(smoke):
    suite, out, _ = smoke
    folds = pd.read_csv(out / "folds.csv")
    protocol = suite["protocol"]
    methods = [m["name"] for m in suite["methods"]]
    expected = {(d, m, seed, fold) for d in ("yeast5", "ecoli1") for m in methods
                for seed in range(protocol["random_state"], protocol["random_state"] + protocol["n_repeats"])
                for fold in range(protocol["n_splits"])}
    keys = list(folds[["dataset", "method", "seed", "fold"]].itertuples(index=False, name=None))
    assert len(keys) == len(expected) == 2 * 3 * 3 and set(keys) == expected
    assert {"g_mean", "f_measure", "auc", "a_mean", "fit_time", "predict_time"} <= set(folds.columns)
    assert folds[["g_mean", "f_measure", "auc"]].notna().all().all()


def test_held_out_analysis_is_the_full_runs_records_without_the_chosen_datasets(smoke, tmp_path):
    # benchmarks/heldout.py: the same fold records less one dataset, re-analysed; its means over datasets
    # are the plain means of the remaining dataset's fold scores (computed here from folds.csv)
    from benchmarks.heldout import held_out

    _, out, _ = smoke
    kept = held_out(out, tmp_path / "held", ["yeast5"], name="smoke without yeast5", note="test")
    summary = json.loads((tmp_path / "held" / "summary.json").read_text())
    assert kept == 1 and list(summary["run"]["datasets"]) == ["ecoli1"]
    folds = pd.read_csv(out / "folds.csv")
    truth = folds[folds["dataset"] == "ecoli1"].groupby("method")["g_mean"].mean()
    for method, value in truth.items():
        assert summary["over_datasets"]["g_mean"][method]["mean"] == pytest.approx(value)
    assert set(pd.read_csv(tmp_path / "held" / "folds.csv")["dataset"]) == {"ecoli1"}


def test_all_methods_see_identical_folds(smoke):
    _, out, _ = smoke
    folds = pd.read_csv(out / "folds.csv")
    sizes = folds.groupby(["dataset", "seed", "fold"])[["n_train", "n_test"]].nunique()
    assert (sizes == 1).all().all()
    # and the sizes are those of the stratified split itself
    y = load_keel("yeast5").y
    split = list(StratifiedBlockKFold(3, random_state=0).split(y, y))
    yeast = folds[folds["dataset"] == "yeast5"].groupby("fold")["n_test"].first()
    assert yeast.tolist() == [len(test) for _, test in split]


def _sequential_g_means(name, n_splits, seed):
    """Independent computation: explicit folds, scaler and balanced SVC, G-mean from confusion counts."""
    data = load_keel(name)
    X, y = data.X, data.y
    values = []
    for train, test in StratifiedBlockKFold(n_splits, random_state=seed).split(X, y):
        scaler = MinMaxScaler().fit(X[train])
        model = SVC(kernel="rbf", C=1.0, gamma="scale", class_weight="balanced")
        pred = model.fit(scaler.transform(X[train]), y[train]).predict(scaler.transform(X[test]))
        tp = np.sum((pred == 1) & (y[test] == 1))
        fn = np.sum((pred == 0) & (y[test] == 1))
        tn = np.sum((pred == 0) & (y[test] == 0))
        fp = np.sum((pred == 1) & (y[test] == 0))
        values.append(np.sqrt(tp / (tp + fn) * tn / (tn + fp)))
    return values


@pytest.mark.parametrize("dataset", ["yeast5", "ecoli1"])
def test_svc_balanced_matches_sequential_reference(smoke, dataset):
    suite, _, records = smoke
    mine = sorted((r["fold"], r["g_mean"]) for r in records
                  if r["dataset"] == dataset and r["method"] == "svc_balanced")
    expected = _sequential_g_means(dataset, suite["protocol"]["n_splits"], seed=0)
    assert [g for _, g in mine] == pytest.approx(expected, rel=1e-12)


def test_report_and_plots_are_written(smoke):
    _, out, _ = smoke
    report = (out / "report.md").read_text()
    assert "- Friedman (G-mean): chi2 = " in report
    assert "command: `pytest smoke`" in report and "## Mean over 2 datasets" in report
    for name in ("cd_g_mean.png", "cd_f_measure.png", "g_mean_by_dataset.png", "f_measure_by_dataset.png"):
        png = (out / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 1000, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "quality" and summary["run"]["n_tasks"] == 18
    assert summary["control"]["g_mean"] in ("tuned_threshold", "smote_svc")  # the best *peer*
    assert not any(p.name.endswith(".partial") for p in out.parent.iterdir())


def test_results_md_is_rendered_from_the_directory(smoke):
    _, out, _ = smoke
    text = render_results([out], command="python -m benchmarks.results X")
    summary = json.loads((out / "summary.json").read_text())
    mean = summary["over_datasets"]["g_mean"]["smote_svc"]
    assert "## Quality: smoke" in text and "command: `pytest smoke`" in text
    assert f"| smote_svc | {100 * mean['mean']:.1f} ± {100 * mean['std']:.1f} |" in text


def test_invalid_suite_fails_before_any_task(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMOKE.read_text() + "colour: red\n")

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for an invalid suite")

    monkeypatch.setattr(quality, "cluster_client", no_cluster)
    from dimbsvm.cli import main

    assert main(["bench", str(bad), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "unknown key 'colour'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


BASE = {"datasets": ["yeast5"], "methods": [{"name": "svc", "kind": "peer", "estimator": "svc"}]}


def _with(**changes):
    return {**BASE, **changes}


@pytest.mark.parametrize("spec, message", [
    (_with(colour="red"), r"unknown key 'colour'; accepted keys: control, datasets, description"),
    (_with(methods=[{"name": "a", "kind": "peer", "estimator": "svc", "param": {}}]),
     r"unknown key 'methods.0.param'; accepted keys under 'methods.0': estimator, kind, name, params"),
    (_with(protocol={"folds": 3}), r"unknown key 'protocol.folds'"),
    (_with(protocol={"n_splits": 1}), r"'protocol.n_splits' is 1; it must be at least 2"),
    (_with(metrics=["accuracy"]), r"'metrics.0' is 'accuracy'; accepted: g_mean"),
    (_with(methods=[{"name": "a", "kind": "sklearn", "estimator": "svc"}]),
     r"'methods.0.kind' is 'sklearn'; accepted: registry, peer"),
    (_with(methods=[{"name": "a", "kind": "peer", "estimator": "forest"}]),
     r"unknown peer 'forest'; accepted: auc_tuned_threshold, balanced_bagging, ensemble_grid_cv, lightgbm, "),
    (_with(methods=[{"name": "a", "kind": "registry", "estimator": "othr_typo"}]),
     r"'othr_typo', not a registered dimbsvm estimator; accepted: .*svc_balanced"),
    (_with(methods=[{"name": "a", "kind": "peer", "estimator": "smote_svc", "params": {"smote__k": 3}}]),
     r"peer 'smote_svc' has no parameter\(s\) smote__k"),
    (_with(methods=[{"name": "a", "kind": "peer", "estimator": "svc", "params": {"C": -1}}]),
     r"'C' parameter of SVC must be a float"),
    (_with(methods=[{"name": "a", "kind": "peer", "estimator": "svc"}, {"name": "a", "kind": "peer",
                                                                         "estimator": "svc_balanced"}]),
     r"method name\(s\) a used more than once"),
    (_with(datasets=[]), r"'datasets' is \[\]; it must be at least 1"),
    (_with(control=["svc_tuned"]), r"'control' names svc_tuned, not method\(s\) of this suite"),
])
def test_invalid_suites_name_the_key(spec, message):
    with pytest.raises(JobSpecError, match=message):
        validate_suite(spec)


def test_peers_share_the_base_svm_and_are_seeded_per_fold():
    smote = build_method({"kind": "peer", "estimator": "smote_svc", "params": {}}, random_state=fold_random_state(1, 2))
    assert smote.named_steps["smote"].k_neighbors == 3
    assert smote.named_steps["smote"].random_state == fold_random_state(1, 2) != fold_random_state(2, 1)
    bagging = make_peer("balanced_bagging", random_state=7)
    tuned = make_peer("tuned_threshold")
    assert tuned.response_method == "decision_function" and tuned.cv is None
    for svc in (smote.named_steps["svc"], bagging.estimator, tuned.estimator, make_peer("svc")):
        assert (svc.kernel, svc.C, svc.gamma, svc.class_weight) == ("rbf", 1.0, "scale", None)
    assert bagging.random_state == 7 and bagging.n_estimators == 10
    assert make_peer("svc_balanced").class_weight == "balanced"
    # suite params win over the derived seed
    fixed = build_method({"kind": "peer", "estimator": "smote_svc", "params": {"smote__random_state": 5}},
                         random_state=0)
    assert fixed.named_steps["smote"].random_state == 5


def test_the_lightgbm_peers_are_lightgbm_as_configured_and_tuned_for_g_mean():
    """The peer is LightGBM with the documented parameters (its predictions are a plain LGBMClassifier's), and the
    tuned one applies the threshold it chose to that model's probabilities."""
    lightgbm = pytest.importorskip("lightgbm")
    from dimbsvm.bench.peers import LIGHTGBM_PARAMS

    X, y = _small_imbalanced()
    peer = build_method({"kind": "peer", "estimator": "lightgbm", "params": {}}, random_state=4)
    assert {k: v for k, v in peer.get_params().items() if k in LIGHTGBM_PARAMS} == LIGHTGBM_PARAMS
    plain = lightgbm.LGBMClassifier(n_estimators=200, num_leaves=15, learning_rate=0.05, subsample=0.8,
                                    subsample_freq=1, class_weight="balanced", n_jobs=1, verbose=-1, random_state=4)
    np.testing.assert_array_equal(peer.fit(X, y).predict_proba(X), plain.fit(X, y).predict_proba(X))
    tuned = make_peer("lightgbm_tuned_threshold", random_state=4).fit(X, y)
    assert tuned.response_method == "predict_proba" and tuned.estimator.random_state == 4
    proba = tuned.estimator_.predict_proba(X)[:, 1]
    np.testing.assert_array_equal(tuned.predict(X), np.where(proba >= tuned.best_threshold_, 1, 0))


def _small_imbalanced():
    from sklearn.datasets import make_classification

    return make_classification(n_samples=240, n_features=5, weights=[0.85], flip_y=0.03, random_state=2)


def test_tuned_peers_choose_what_a_brute_force_grid_chooses():
    """Each tuned peer's (C, gamma) is the argmax of the inner-CV score over the grid, computed here by hand."""
    import itertools

    from sklearn.base import clone
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from dimbsvm.bench.peers import TUNED_GRID
    from dimbsvm.metrics import g_mean

    X, y = _small_imbalanced()
    grid = [dict(zip(TUNED_GRID, values)) for values in itertools.product(*TUNED_GRID.values())]
    assert len(grid) == 16
    cv = StratifiedKFold(3)

    def argmax(estimator, scoring, prefix=""):
        scores = [cross_val_score(clone(estimator).set_params(**{prefix + k: v for k, v in params.items()}), X, y,
                                  scoring=scoring, cv=cv).mean() for params in grid]
        return grid[int(np.argmax(scores))]  # first of ties, as GridSearchCV

    balanced = make_peer("svc_balanced_grid").fit(X, y)
    assert balanced.best_params_ == argmax(balanced.estimator, make_scorer(g_mean))
    smote = make_peer("smote_svc_grid", random_state=0).fit(X, y)
    assert smote.best_params_ == {"svc__" + k: v for k, v in argmax(smote.estimator, make_scorer(g_mean),
                                                                      "svc__").items()}
    auc = make_peer("auc_tuned_threshold").fit(X, y)
    assert auc.best_params_ == argmax(make_peer("svc"), "roc_auc")
    assert auc.classifier_.estimator_.get_params()["C"] == auc.best_params_["C"]
    assert set(auc.predict(X)) <= set(y) and auc.decision_function(X).shape == (len(y),)


def test_small_sample_smote_lowers_k_to_what_the_minority_allows():
    from imblearn.over_sampling import SMOTE

    from dimbsvm.bench.peers import SmallSampleSMOTE

    X, y = _small_imbalanced()
    few = np.concatenate([np.flatnonzero(y == 0), np.flatnonzero(y == 1)[:3]])  # 3 minority rows
    Xs, ys = SmallSampleSMOTE(k_neighbors=3, random_state=0).fit_resample(X[few], y[few])
    Xr, yr = SMOTE(k_neighbors=2, random_state=0).fit_resample(X[few], y[few])
    np.testing.assert_array_equal(Xs, Xr)
    np.testing.assert_array_equal(ys, yr)
    assert np.sum(ys == 1) == np.sum(ys == 0)
    with pytest.raises(ValueError):  # what the plain SMOTE does with these rows
        SMOTE(k_neighbors=3).fit_resample(X[few], y[few])
    one = np.concatenate([np.flatnonzero(y == 0), np.flatnonzero(y == 1)[:1]])
    Xo, yo = SmallSampleSMOTE().fit_resample(X[one], y[one])
    np.testing.assert_array_equal(Xo, X[one])
    np.testing.assert_array_equal(yo, y[one])
    # many minority rows: exactly SMOTE(k_neighbors=3)
    np.testing.assert_array_equal(SmallSampleSMOTE(random_state=0).fit_resample(X, y)[0],
                                  SMOTE(k_neighbors=3, random_state=0).fit_resample(X, y)[0])


def test_statistics_on_a_known_matrix():
    matrix = pd.DataFrame({"a": [0.9, 0.8, 0.7, 0.6], "b": [0.8, 0.8, 0.6, 0.5], "c": [0.1, 0.2, 0.3, 0.4]},
                          index=["d1", "d2", "d3", "d4"])
    assert stats.average_ranks(matrix).tolist() == [1.125, 1.875, 3.0]
    assert stats.best_method(matrix, ["b", "c"]) == "b"
    assert stats.friedman(matrix[["a", "b"]]) is None
    assert stats.friedman(matrix)["n_methods"] == 3
    table = stats.wilcoxon_vs_control(matrix, "a")
    assert table.loc["b", ["wins", "ties", "losses"]].tolist() == [0, 1, 3]
    assert (table["pvalue_holm"] >= table["pvalue"]).all()
    pairwise = stats.pairwise_wilcoxon(matrix)
    assert list(pairwise.index) == ["a", "b", "c"] and np.allclose(np.diag(pairwise), 1)


def _tiny(n_majority=17, n_minority=3):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_majority + n_minority, 2))
    y = np.array([0] * n_majority + [1] * n_minority)
    return X, y


def test_a_failing_fold_is_recorded_or_raised():
    X, y = _tiny()  # two minority rows per training fold: SMOTE(k_neighbors=3) cannot run
    kwargs = {"estimator": make_peer("smote_svc"), "n_splits": 3, "seed": 0, "fold": 1,
              "metrics": ("g_mean", "auc")}
    record = quality.evaluate_method_fold(X, y, dataset="tiny", method="smote_svc", on_error="record", **kwargs)
    assert record["error"].startswith("ValueError") and np.isnan(record["g_mean"]) and np.isnan(record["auc"])
    assert (record["dataset"], record["method"], record["seed"], record["fold"]) == ("tiny", "smote_svc", 0, 1)
    assert record["n_train"] + record["n_test"] == len(y)
    with pytest.raises(RuntimeError, match=r"smote_svc on tiny \(seed 0, fold 1\) failed: ValueError"):
        quality.evaluate_method_fold(X, y, dataset="tiny", method="smote_svc", on_error="raise", **kwargs)
    fine = quality.evaluate_method_fold(X, y, dataset="tiny", method="svc", on_error="record",
                                        **{**kwargs, "estimator": make_peer("svc_balanced")})
    assert fine["error"] is None and 0 <= fine["g_mean"] <= 1


def test_report_lists_failures_and_compares_on_common_datasets():
    from dimbsvm.bench.report import analyse, render_report

    suite = validate_suite({"datasets": ["a", "b", "c"], "metrics": ["g_mean", "f_measure"], "methods": [
        {"name": m, "kind": "peer", "estimator": m} for m in ("svc", "svc_balanced", "smote_svc")]})
    records = []
    for i, dataset in enumerate("abc"):
        for j, method in enumerate(("svc", "svc_balanced", "smote_svc")):
            for fold in range(5):
                fails = dataset == "c" and method == "smote_svc"
                value = np.nan if fails else 0.5 + 0.1 * j + 0.01 * i + 0.001 * fold
                records.append({"dataset": dataset, "method": method, "seed": 0, "fold": fold, "n_train": 8,
                                "n_test": 2, "g_mean": value, "f_measure": value,
                                "error": "ValueError: boom" if fails else None})
    run = {"command": "test", "started": "t0", "wall_time_s": 1.0,
           "cluster": {"n_workers": 1, "embedded": True},
           "datasets": {d: {"source": d, "n_samples": 10, "n_features": 2, "n_minority": 2} for d in "abc"}}
    folds, summary = analyse(suite, records, run)
    assert len(summary["failures"]) == 5 and summary["excluded_datasets"]["g_mean"] == ["c"]
    assert summary["friedman"]["g_mean"]["n_datasets"] == 2
    assert summary["over_datasets"]["g_mean"]["svc"]["mean"] == pytest.approx(np.mean([0.502, 0.512]))
    assert summary["control"]["g_mean"] == "smote_svc"
    report = render_report(summary)
    assert "## Failed folds" in report and "5 fold(s) failed** (smote_svc: 5)" in report
    assert "left out of the means, ranks and tests because some method has no successful fold there: c" in report


# --- RESULTS.md sections of benchmarks without a suite: kind -> benchmarks.<kind>.render_markdown -------------

MACHINE = {"platform": "Linux-test", "processor": "CPU", "cpu_count": 2, "memory_gb": 8.0, "python": "3.11"}


def _write_summary(directory, summary):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def _act_records():
    records = []
    for fold, (g, f) in enumerate([(0.8, 0.1234), (0.9, 0.1244)]):
        records.append({"dataset": "d1", "method": "svc", "seed": 0, "fold": fold, "g_mean": g, "f_measure": f,
                        "fit_time": 0.5})
        records.append({"dataset": "d1", "method": "act", "seed": 0, "fold": fold, "g_mean": 1.0, "f_measure": 0.5,
                        "fit_time": 1.5, "best_round": 1 + fold, "n_rounds": 3, "kernel_scale": 2.0 + fold,
                        "stop": "patience", "all_converged": fold == 0})
        records.append({"dataset": "d2", "method": "svc", "seed": 0, "fold": fold, "g_mean": 0.4, "f_measure": 0.3,
                        "fit_time": 0.25, "C": 10.0})
    return records


def _act_summary(records=None):
    from benchmarks import act_quality

    return act_quality.summarize(records or _act_records(), datasets=["d1", "d2"], methods=["svc", "act"],
                                 command="python -m benchmarks.act_quality --test", date="2026-01-01T00:00:00+00:00",
                                 wall_seconds=12.0, machine=MACHINE, packages={"dimbsvm": "0.1"},
                                 protocol={"n_splits": 2, "seeds": [0]})


def test_act_summary_and_section_have_the_fold_statistics(tmp_path):
    summary = _act_summary()
    d1 = summary["results"]["d1"]
    assert d1["svc"]["g_mean"]["mean"] == pytest.approx(0.85)
    assert d1["svc"]["g_mean"]["std"] == pytest.approx(np.std([0.8, 0.9], ddof=1))
    assert d1["act"]["not_converged"] == 1 and d1["act"]["kernel_scale"]["median"] == pytest.approx(2.5)
    assert summary["results"]["d2"]["svc"]["C"] == {"10.0": 2}
    assert "act" not in summary["results"]["d2"] and summary["over_datasets"]["act"]["n_datasets"] == 1
    text = render_results([_write_summary(tmp_path / "act", summary)], command="python -m benchmarks.results X")
    assert "- command: `python -m benchmarks.act_quality --test`" in text
    assert "- date: 2026-01-01T00:00:00+00:00 (UTC); wall time 12 s" in text
    assert "- machine: Linux-test; CPU; 2 logical CPUs; 8.0 GiB memory; Python 3.11" in text
    # G-mean 85.0 ± 7.1 and F-measure 12.4 ± 0.1 on d1; the mean row averages d1 and d2 (85.0, 40.0).
    assert "| d1 | 85.0 ± 7.1 | 100.0 ± 0.0 |" in text and "| d1 | 12.4 ± 0.1 | 50.0 ± 0.0 |" in text
    assert "| mean over 2 | **62.5 ± 31.8** | **100.0** |" in text
    assert "| d1 | 1.5 / 3.0, x2.5, 1 |" in text and "| d2 | 10.0: 2 |" in text


def test_act_summary_is_rebuilt_from_folds_csv(tmp_path):
    import csv

    from benchmarks import act_quality

    records = _act_records()
    with open(tmp_path / "folds.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in records for k in r)))
        writer.writeheader()
        writer.writerows(records)
    (tmp_path / "summary.json").write_text(json.dumps(_act_summary()))
    assert act_quality.read_folds(tmp_path / "folds.csv") == records
    assert json.loads(json.dumps(act_quality.resummarize(tmp_path))) == json.loads(json.dumps(_act_summary()))
    assert (tmp_path / "report.md").read_text().startswith("## ACT on 2 KEEL datasets")


def test_hpc_quality_summary_is_read_from_its_files(tmp_path):
    from benchmarks import hpc_quality

    rows = []
    for dataset, base in (("glass6", 0.5), ("pima", 0.7)):
        for method, shift in (("svc", 0.0), ("hpc_linear", 0.1)):
            for seed in (0, 1):
                rows.append({"seed": seed, "fold": 0, "g_mean": base + shift + 0.02 * seed, "f_measure": base,
                             "auc": 0.9, "fit_time": 0.01, "dataset": dataset, "method": method,
                             "not_converged": int(method == "svc")})
    pd.DataFrame(rows).to_csv(tmp_path / "folds.csv", index=False)
    (tmp_path / "run.json").write_text(json.dumps({
        "started": "2026-01-02T00:00:00+00:00", "wall_seconds": 3.0, "datasets": ["glass6", "pima"],
        "methods": ["svc", "hpc_linear"], "machine": MACHINE, "packages": {"dimbsvm": "0.1"}}))
    summary = hpc_quality.write_summary(tmp_path)
    assert summary["methods"] == ["hpc_linear", "svc"]  # by average G-mean rank
    assert summary["command"].startswith("python -m benchmarks.hpc_quality --datasets glass6 pima --methods svc")
    assert "rebuilt" in summary["command_note"]
    over = summary["over_datasets"]["hpc_linear"]
    assert over["g_mean"]["mean"] == pytest.approx(0.71) and over["rank_g_mean"] == 1.0
    text = render_results([tmp_path], command="X")
    assert "| hpc_linear | 71.0 ± 14.1 | 60.0 ± 14.1 | 90.0 | 1.00 | 1.50 | 0.010 | 0 |" in text
    assert "| svc | 61.0 ± 14.1 | 60.0 ± 14.1 | 90.0 | 2.00 | 1.50 | 0.010 | 4 |" in text
    assert "| hpc_linear | 61.0 | 81.0 |" in text  # G-mean per dataset
    assert "- date: 2026-01-02T00:00:00+00:00 (UTC)" in text
    assert (tmp_path / "report.md").read_text().startswith("## HPC-SVM on public KEEL")


def test_hpc_replicate_summary_is_read_from_run_files(tmp_path):
    from benchmarks import hpc_replicate

    def records(method, accuracies, params):
        return [{"dataset": "sonar", "method": method, "fold": i, "accuracy": a, "params": params, "seconds": 1.0,
                 "not_converged": 1} for i, a in enumerate(accuracies)]

    run = {"records": records("hpc_linear", [0.8, 0.85, 0.9, 0.95, 1.0], {"C": 1.0, "c1": 0.1, "n_neighbors": 5})
           + records("svc_linear", [0.8] * 5, {"C": 1.0}),
           "started": "2026-01-03T00:00:00+00:00", "wall_seconds": 7.0, "grid": "reduced", "machine": MACHINE,
           "packages": {"dimbsvm": "0.1"}}
    (tmp_path / "linear-reduced-sonar.json").write_text(json.dumps(run))
    summary = hpc_replicate.write_summary(tmp_path)
    table = summary["tables"]["linear"]
    assert table["methods"] == ["hpc_linear", "svc_linear"] and table["wins"] == {"svc_linear": 1}
    expected = ("python -m benchmarks.hpc_replicate --kernel linear --grid reduced --datasets sonar "
                f"--methods hpc_linear svc_linear --out {tmp_path}")
    assert summary["command"] == [expected]
    text = render_results([tmp_path], command="X")
    svm, hpc = hpc_replicate.PAPER["linear"]["sonar"]
    assert (f"| sonar | reduced | 90.00 ± 7.91 | 80.00 ± 0.00 | {svm:.2f} | {hpc:.2f} | "
            '{"C": 1.0, "c1": 0.1, "n_neighbors": 5} (5/5) |') in text
    assert "| **mean over 1** | | **90.00** | **80.00** |" in text
    assert "hpc_linear more accurate than: svc_linear on 1/1 datasets." in text


def test_structural_summary_renders_fold_statistics():
    from benchmarks import structural_quality
    from benchmarks.results import module_section

    frame = pd.DataFrame([{"dataset": "d", "method": m, "seed": 0, "fold": f, "accuracy": 0.9, "a_mean": 0.8,
                           "g_mean": g, "fit_time": 0.125, "not_converged": 0, "n_samples": 10, "n_features": 2,
                           "n_minority": 3} for m, gs in (("lin", (0.5, 0.7)), ("lin+str", (0.9, 0.9)))
                          for f, g in enumerate(gs)])
    summary = structural_quality.summarize(frame, part="paper", command="c", date="t", machine=MACHINE)
    assert summary["per_dataset"]["d"]["lin"]["g_mean"]["mean"] == pytest.approx(0.6)
    text = "\n".join(module_section(summary, structural_quality.render_markdown))
    assert "| lin | 90.0 | 80.0 | 60.0 | 0.12 |" in text  # one dataset: no spread across datasets
    assert "| d | 60.0 ± 14.1 | 90.0 ± 0.0 |" in text


def test_generic_kinds_resolve_to_benchmark_modules(tmp_path):
    from benchmarks import act_quality
    from benchmarks.results import find_renderer

    assert find_renderer("quality") is not None and find_renderer("act_quality") is not None
    assert find_renderer("act-quality") is not None  # '-' stands for '_'
    assert find_renderer("no_such_benchmark") is None and find_renderer("../x") is None
    assert find_renderer("stats") is None  # a module without render_markdown
    summary = act_quality.summarize([], datasets=[], methods=[], command="c", date="t", machine=MACHINE)
    for kind in ("no_such_benchmark", "stats", None):
        directory = _write_summary(tmp_path / str(kind), {**summary, "kind": kind})
        with pytest.raises(ValueError, match="unknown benchmark kind"):
            render_results([directory], command="X")
    incomplete = {key: value for key, value in _act_summary().items() if key != "command"}
    with pytest.raises(ValueError, match="lacks command"):
        render_results([_write_summary(tmp_path / "nocommand", incomplete)], command="X")


def test_results_cli_reports_an_unknown_kind(tmp_path, capsys):
    from benchmarks.results import main

    directory = _write_summary(tmp_path / "odd", {"kind": "no_such_benchmark"})
    assert main([str(directory), "--output", str(tmp_path / "R.md")]) == 2
    assert "unknown benchmark kind 'no_such_benchmark'" in capsys.readouterr().err
    assert not (tmp_path / "R.md").exists()


def test_results_update_replaces_or_appends_only_the_given_sections(tmp_path):
    from benchmarks.results import update_results

    directory = tmp_path / "recall"
    directory.mkdir()
    summary = {"kind": "stored_stage_recall", "title": "Recall", "command": "cmd", "date": "2026-01-01",
               "machine": {"platform": "p", "processor": "x", "cpu_count": 2, "memory_gb": 1, "python": "3"},
               "rows": [{"dataset": "d", "n": 10, "k": 2, "k_store": 4, "recall_same_scaling": 1.0,
                         "recall_fold_scaling": 0.9, "short_rows": 0.0}]}
    (directory / "summary.json").write_text(json.dumps(summary))
    existing = "# Benchmark results\n\nintro\n\n## Other\n\nkept as is\n## Recall\n\nold numbers\n"
    updated = update_results(existing, [directory], command="c")
    assert "kept as is" in updated and "old numbers" not in updated and "| d | 10 | 2 | 4 | 1.0000 |" in updated
    assert updated.count("## Recall") == 1 and "\n\n## Recall" in updated
    appended = update_results("# Benchmark results\n\n## Other\n\nx\n", [directory], command="c")
    assert appended.index("## Other") < appended.index("## Recall")


def test_dimbsvm_bench_runs_the_smoke_suite_from_the_installed_package(tmp_path):
    """``dimbsvm bench`` from outside the checkout: the harness is the installed package's, not benchmarks/'s."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "bench", str(SMOKE), "--out", str(tmp_path / "out"),
                           "--workers", "2", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "suite smoke: mean over 2 datasets" in proc.stdout and "results: " in proc.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["command"].startswith("dimbsvm bench ") and summary["run"]["n_tasks"] == 18
    rewritten = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "bench", "--rewrite", str(tmp_path / "out")],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rewritten.returncode == 0, rewritten.stderr[-3000:]
    again = json.loads((tmp_path / "out" / "summary.json").read_text())["over_datasets"]
    for method, result in summary["over_datasets"]["g_mean"].items():  # the same folds, re-read from folds.csv
        assert again["g_mean"][method]["mean"] == pytest.approx(result["mean"], rel=1e-9)


def test_strong_scaling_fine_phases_are_per_kind_differences_over_workers():
    """Task kinds' CPU and waiting seconds between two snapshots of the workers' cumulative metrics."""
    from benchmarks.strong_scaling import fine_phases, render_fine

    before = {"w1": {"oob|thread-cpu": 1.0, "oob|thread-noncpu": 0.5, "read|thread-cpu": 2.0}}
    after = {"w1": {"oob|thread-cpu": 3.0, "oob|thread-noncpu": 0.75, "read|thread-cpu": 2.0, "read|other": 9.0},
             "w2": {"oob|thread-cpu": 0.5, "member|thread-noncpu": 0.25}}  # w2 joined after the first snapshot
    fine = fine_phases(before, after)
    assert fine == {"oob": {"thread_cpu": 2.5, "thread_noncpu": 0.25},
                    "read": {"thread_cpu": 0.0, "thread_noncpu": 0.0},
                    "member": {"thread_cpu": 0.0, "thread_noncpu": 0.25}}
    lines = render_fine({"runs": [{"workers": 2, "repeat": 0, "stages": {"ensemble": {"fine": fine}}}]},
                        kinds=("read", "oob", "score"))
    assert lines[-1] == "| 2 | 0 | ensemble | 0.00 / 0.00 | 2.50 / 0.25 |  |"


def test_ingest_scale_table_is_the_median_of_its_repeats():
    from benchmarks.ingest_scale import render_markdown

    def row(method, wall, client, before, workers):
        return {"n": 1000, "format": "parquet", "where": "local", "method": method, "wall_s": wall,
                "rows_per_s": 1000 / wall, "client_peak": client, "client_rss_before": before,
                "worker_peaks": workers}

    rows = [row("dimbsvm", 2.0, 300e6, 250e6, [1e8, 2e8]), row("dimbsvm", 4.0, 310e6, 250e6, [3e8, 1e8]),
            row("dimbsvm", 3.0, 320e6, 250e6, [1e8, 1e8]), row("dask", 1.0, 260e6, 240e6, [5e8, 1e8])]
    line = render_markdown({"rows": rows}).splitlines()[-1]
    # medians: 3.0 s against 1.0 s; 333 against 1,000 rows/s (ratio 0.33); client 310 MB, +60 MB; workers 200 MB
    assert line == ("| 1,000 | parquet | local | 3.0 | 1.0 | 333 | 1,000 | 0.33 | 310 (+60) | 260 (+20) | 200 | 500 |")


def test_client_memory_table_is_the_median_of_its_repeats_and_the_growth_per_million_rows():
    from benchmarks.client_memory import per_size

    def run(n, tree_mb, cpu):
        return {"n": n, "peak_tree_bytes": tree_mb * 2**20, "peak_driver_bytes": tree_mb * 2**19,
                "cpu_seconds": cpu, "wall_seconds": 1.0, "g_mean": 0.8}

    rows = per_size([run(10**6, 500, 4.0), run(10**6, 520, 5.0), run(10**6, 600, 4.5),
                     run(3 * 10**6, 700, 6.0), run(3 * 10**6, 720, 7.0)])
    assert [(r["n"], r["repeats"], r["peak_tree_bytes"] / 2**20, r["cpu_seconds"]) for r in rows] == \
        [(10**6, 3, 520.0, 4.5), (3 * 10**6, 2, 710.0, 6.5)]
    # (710 - 520) MB and (6.5 - 4.5) CPU s over 2 million more rows
    assert rows[1]["tree_mb_per_million"] == 95.0 and rows[1]["cpu_s_per_million"] == 1.0


def test_default_scale_table_is_the_median_of_its_repeats_and_says_what_was_replaced():
    from benchmarks.default_scale import render_markdown

    def row(method, n, fit, g=0.8, **extra):
        return {"method": method, "rows": n, "repeat": 0, "fit_s": fit, "predict_s": 0.5, "g_mean": g,
                "scaled": {}, **extra}

    rows = [row("othr", 10_000, 1.0), row("othr", 10_000, 3.0), row("othr", 10_000, 2.0, g=0.7),
            row("othr", 10**6, 9.0, scaled={"estimator": "LinearSVC()"}),
            {"method": "act", "rows": 10**6, "repeat": 0, "fit_s": 0.0, "error": "DataError: too many rows"},
            {"method": "svc_balanced", "rows": 10**6, "repeat": 0, "skipped": "above 100000 rows"}]
    text = render_markdown({"rows": rows, "test_rows": 50_000, "warmup_s": 30.0, "workers": 2,
                            "load_average": {"start": [1.0, 1.0, 1.0], "end": [2.0, 2.0, 2.0]}})
    lines = text.splitlines()
    assert "| 10,000 | othr | 3 | 2.00 (1.00-3.00) | 0.7000 / 0.8000 | 0.50 | none |" in lines
    assert "| 1,000,000 | othr | 1 | 9.00 | 0.8000 | 0.50 | estimator=LinearSVC() |" in lines
    assert "| 1,000,000 | act | 1 | refused: DataError: too many rows | - | - | - |" in lines
    assert lines[-1] == "| 1,000,000 | svc_balanced | 0 | skipped: above 100000 rows | - | - | - |"
    assert "local cluster of 2 single-threaded workers" in text


def test_screening_rules_cost_the_member_seconds_they_fit_and_keep_the_settings_a_brute_force_ranking_keeps():
    """benchmarks/ensemble_selection.py's halving scorer on a synthetic cache of 4 settings x 10 members."""
    from sklearn.metrics import roc_auc_score

    from benchmarks.ensemble_selection import halving_for_fold

    rng = np.random.default_rng(0)
    positive = np.r_[np.ones(20, bool), np.zeros(80, bool)]
    y_test = np.r_[np.ones(5, bool), np.zeros(20, bool)]
    records = {}
    for k, signal in enumerate((0.2, 1.5, 0.8, 3.0)):  # setting 3 ranks best, then 1, 2, 0
        oob = np.where(rng.random((10, 100)) < 0.37, signal * positive + rng.normal(size=(10, 100)), np.nan)
        records[f"s{k}"] = {"oob": [oob], "test": [signal * y_test + rng.normal(size=(10, 25))],
                            "y_train": [positive], "y_test": [y_test],
                            "fit_seconds": [np.arange(1.0, 11.0) * (k + 1)]}
    keys = sorted(records)
    out = halving_for_fold(records, keys, 0, rules=[(None, None), (2, 2)], n_top=1)
    seconds = {k: records[k]["fit_seconds"][0] for k in keys}
    assert out[(None, None)]["seconds"] == sum(s.sum() for s in seconds.values())
    # the screen: the first 2 members of every setting, ranked by the AUC of their pooled out-of-bag margins
    screen_auc = {}
    for k in keys:
        first = records[k]["oob"][0][:2]
        seen = ~np.isnan(first).all(axis=0)
        screen_auc[k] = roc_auc_score(positive[seen], np.nanmean(first[:, seen], axis=0))
    survivors = sorted(keys, key=lambda k: -screen_auc[k])[:2]
    expected = sum(s[:2].sum() for s in seconds.values()) + sum(seconds[k][2:].sum() for k in survivors)
    assert out[(2, 2)]["seconds"] == pytest.approx(expected)
    assert set(survivors) == {"s1", "s3"}
    # with one kept setting, the screened and the unscreened rule keep the same (the best) setting here
    assert out[(2, 2)]["g_mean"] == out[(None, None)]["g_mean"]


def test_screening_choice_takes_the_best_g_mean_within_the_budget_and_the_f_floor():
    import pandas as pd

    from benchmarks.screening_choice import choose

    rules = pd.DataFrame({"g_mean": [88.0, 87.5, 87.5, 87.9], "f_measure": [64.0, 63.0, 63.0, 62.0],
                          "fit_time": [4.0, 2.0, 1.5, 1.0]}, index=["costly", "a", "b", "low-f"])
    peers = {"smote_svc_grid": {"g_mean": 86.0, "f_measure": 62.5, "fit_time": 2.0},
             "svc_balanced_grid": {"g_mean": 86.0, "f_measure": 62.8, "fit_time": 1.0}}
    assert choose(rules, peers) == "b"  # within 1.5 x 2.0 s and F >= 62.8: a and b tie on G, b is cheaper
    assert choose(rules[rules.index == "costly"], peers) is None


def test_progress_accuracy_compares_each_estimate_with_the_time_to_the_last_task():
    # the truth at an advance is the time to the last one; ratios by hand
    from benchmarks.progress_accuracy import accuracy

    advances = [(0.0, 1, 10, 50.0), (2.0, 2, 10, 8.0), (4.0, 5, 10, 3.0), (8.0, 9, 10, 4.0), (10.0, 10, 10, 0.0)]
    out = accuracy(advances)  # from 10 % done: every advance but the last
    assert out["n_tasks"] == 10 and out["seconds"] == 10.0 and out["n_checked"] == 4
    assert out["first_ratio"] == 50.0 / 10.0
    assert out["worst_factor"] == 5.0  # 50 / 10; then 8 / 8, 3 / 6 (a factor 2), 4 / 2
    later = accuracy(advances, from_share=0.5)  # from 5 tasks done
    assert later["n_checked"] == 2 and later["first_ratio"] == 0.5 and later["worst_factor"] == 2.0
    assert accuracy([(0.0, 1, 1, 0.0)])["worst_factor"] is None  # nothing to check
    near_end = [(0.0, 1, 4, 3.0), (1.0, 2, 4, 2.0), (2.5, 3, 4, 0.1), (3.0, 4, 4, 0.0)]  # 0.1 s said, 0.5 s true
    assert accuracy(near_end)["worst_factor"] == 5.0
    assert accuracy(near_end)["worst_factor_shown"] == 1.0  # truths under a second are not what the line can show


def _graph(**tasks):
    """``{key: (deps, recorded start, seconds)}`` as :func:`benchmarks.task_graph_replay.load_graph` gives them."""
    return {key: {"deps": list(deps), "start": start, "stop": start + seconds, "seconds": seconds}
            for key, (deps, start, seconds) in tasks.items()}


def test_a_replayed_graph_gives_the_schedules_worked_out_by_hand():
    """The replay against schedules computed by hand: a chain takes its sum whatever the workers; independent tasks
    spread over workers; a submission that waited for a task (the client's own seconds after it) moves with it."""
    from benchmarks.task_graph_replay import replay

    chain = _graph(a=((), 0.0, 2.0), b=(("a",), 2.0, 3.0), c=(("b",), 5.0, 1.0))
    for workers in (1, 2, 64):
        assert replay(chain, [(0.0, ["a", "b", "c"])], 0.0, 6.5, workers)["wall"] == pytest.approx(6.5)
    # four independent 2-s tasks recorded on two workers after 1 s of the client's, 0.5 s of it after them
    wide = _graph(**{k: ((), 1.0 + 2.0 * (i // 2), 2.0) for i, k in enumerate("abcd")})
    submitted = [(1.0, list("abcd"))]
    walls = {w: replay(wide, submitted, 0.0, 5.5, w)["wall"] for w in (1, 2, 4, 8)}
    assert walls == pytest.approx({1: 9.5, 2: 5.5, 4: 3.5, 8: 3.5})
    # a second submission 1 s after task a finished (the client planned from a's result): e waits for a + 1 s
    staged = _graph(a=((), 0.0, 4.0), b=((), 0.0, 4.0), e=((), 5.0, 1.0))
    result = replay(staged, [(0.0, ["a", "b"]), (5.0, ["e"])], 0.0, 6.0, 2)
    assert result["wall"] == pytest.approx(6.0) and result["critical"] == pytest.approx(6.0)
    assert replay(staged, [(0.0, ["a", "b"]), (5.0, ["e"])], 0.0, 6.0, 1)["wall"] == pytest.approx(10.0)
    # each kind's span in the replay: the four 2-s tasks of kind "x" on two workers run from 1 s to 5 s
    kinds = replay(_graph(**{f"x-{k}": ((), 1.0 + 2.0 * (i // 2), 2.0) for i, k in enumerate("abcd")}),
                   [(1.0, [f"x-{k}" for k in "abcd"])], 0.0, 5.5, 2)["kinds"]
    assert kinds == {"x": pytest.approx({"first": 1.0, "last": 5.0, "busy": 8.0})}
    # every schedule above is the same by either rule: nothing there waits while a later task could start
    assert replay(staged, [(0.0, ["a", "b"]), (5.0, ["e"])], 0.0, 6.0, 2, rule="recorded")["wall"] == 6.0
    assert replay(wide, submitted, 0.0, 5.5, 4, rule="recorded")["wall"] == pytest.approx(3.5)


def test_a_replayed_worker_takes_a_task_that_may_start_before_one_still_waiting():
    """Recorded on one worker: a (4 s), then b, which needs a (1 s), then c and d (1 s each, independent). On two
    workers, by hand: Dask's rule runs c and d beside a (wall 5 s); the recorded order makes the second worker wait
    for a before b and runs c, d after (wall 6 s). A recorded priority overrides the submission order."""
    from benchmarks.task_graph_replay import replay

    graph = _graph(a=((), 0.0, 4.0), b=(("a",), 4.0, 1.0), c=((), 5.0, 1.0), d=((), 6.0, 1.0))
    submitted = [(0.0, ["a", "b", "c", "d"])]
    ready = replay(graph, submitted, 0.0, 7.0, 2)
    assert ready["wall"] == pytest.approx(5.0) and ready["critical"] == pytest.approx(5.0)
    assert ready["kinds"]["c"] == pytest.approx({"first": 0.0, "last": 1.0, "busy": 1.0})
    assert replay(graph, submitted, 0.0, 7.0, 2, rule="recorded")["wall"] == pytest.approx(6.0)
    assert replay(graph, submitted, 0.0, 7.0, 1)["wall"] == replay(graph, submitted, 0.0, 7.0, 1, rule="recorded")["wall"] == 7.0
    # one worker, d ranked before c by the scheduler: d runs first once a is done (submission order would run c)
    ranked = {key: dict(task, priority=[0, 0, rank]) for key, task in graph.items()
              for rank in [{"a": 0, "b": 1, "c": 3, "d": 2}[key]]}
    kinds = replay(ranked, submitted, 0.0, 7.0, 1)["kinds"]
    assert kinds["d"]["first"] == pytest.approx(5.0) and kinds["c"]["first"] == pytest.approx(6.0)
    with pytest.raises(ValueError, match="rule"):
        replay(graph, submitted, 0.0, 7.0, 2, rule="fifo")


def test_a_sparse_protocol_holds_csr_rows_and_the_linear_peers_score_them_as_scikit_learn_does(tmp_path):
    """``protocol.sparse`` gives every method CSR rows (max-abs scaled); the linear peers' folds are the plain
    scikit-learn pipeline's on the same CSR rows."""
    import scipy.sparse as sp
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import TunedThresholdClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler
    from sklearn.svm import LinearSVC

    from dimbsvm.metrics import g_mean

    suite = validate_suite({"datasets": ["yeast5"], "metrics": ["g_mean", "auc"],
                            "protocol": {"n_splits": 3, "scaler": "maxabs", "sparse": True},
                            "methods": [{"name": "linear", "kind": "peer", "estimator": "linear_svc_balanced"},
                                        {"name": "linear_tuned", "kind": "peer", "estimator": "linear_tuned_threshold"},
                                        {"name": "ensemble", "kind": "registry", "estimator": "ensemble_othr",
                                         "params": {"estimator": "linear_svc", "n_estimators": 3}}]})
    [data] = quality.load_suite_data(suite)
    assert sp.isspmatrix_csr(data.X)
    records = quality.run_suite(suite, None, data=[data], progress=False)
    X, y = load_keel("yeast5").X, load_keel("yeast5").y
    X = sp.csr_matrix(X)
    peers = {"linear": LinearSVC(class_weight="balanced", random_state=0),
             "linear_tuned": TunedThresholdClassifierCV(LinearSVC(random_state=0), scoring=make_scorer(g_mean),
                                                        response_method="decision_function")}
    for fold, (train, test) in enumerate(StratifiedBlockKFold(3, random_state=0).split(X, y)):
        for name, peer in peers.items():
            [record] = [r for r in records if r["method"] == name and r["fold"] == fold]
            model = make_pipeline(MaxAbsScaler(), peer).fit(X[train], y[train])
            assert record["g_mean"] == pytest.approx(g_mean(y[test], model.predict(X[test])), rel=1e-12)
    assert {r["method"] for r in records if r.get("error") is None} == {"linear", "linear_tuned", "ensemble"}
