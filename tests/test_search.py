"""Parameter search as nested CV in the fold engine, against scikit-learn's GridSearchCV as the truth."""

import json

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

from dimbsvm.datasets import load, make_imbalanced
from dimbsvm.estimators import make_estimator
from dimbsvm.exceptions import DataError, JobSpecError
from dimbsvm.jobs import validate_job
from dimbsvm.jobs.data import check_job_data, load_job_data
from dimbsvm.jobs.retrain import model_fingerprint, retrain
from dimbsvm.jobs.runner import run_job
from dimbsvm.jobs.spec import job_search
from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
from dimbsvm.model_selection.search import Search, candidate_params, select_candidate
from dimbsvm.model_selection.splits import minority_class, repeat_splits

GRID = {"C": [0.1, 1, 10, 100], "gamma": [0.3, 1, 3, "scale"]}


@pytest.fixture(scope="module")
def yeast5():
    data = load("yeast5")
    return np.asarray(data.X), np.asarray(data.y)


def _engine(estimator, X, y, search, *, client, n_splits=5, metrics=("g_mean", "f_measure")):
    specs = [FoldSpec((0, f), train, test) for f, (train, test) in enumerate(repeat_splits(y, n_splits=n_splits,
                                                                                            seed=0))]
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", metrics=metrics, search=search)
    results, _ = run_folds(setup, X, y, specs, client=client)
    return specs, results


def _grid_search(estimator, grid, X, y, **kwargs):
    """scikit-learn's own nested step: GridSearchCV over the whole pipeline (the scaler refitted per inner fold)."""
    step = type(estimator).__name__.lower()
    return GridSearchCV(make_pipeline(MinMaxScaler(), estimator), {f"{step}__{k}": v for k, v in grid.items()},
                        cv=3, **kwargs).fit(X, y)


def test_search_equals_gridsearchcv_fold_by_fold(scheduler, yeast5):
    X, y = yeast5
    estimator = make_estimator("svc_balanced")
    search = Search(candidate_params(GRID), n_splits=3, scoring="g_mean")
    specs, results = _engine(estimator, X, y, search, client=scheduler, metrics=("g_mean", "f_measure", "fit_time"))
    for spec, result in zip(specs, results):
        # the fold's fit time includes its search: every inner fit and prediction, and each inner prepare once
        record, inner = result.record, result.search["inner"]
        prepares = {r["inner_fold"]: r["prepare_time"] for r in inner}
        assert len(prepares) == 3
        assert record["search_time"] == pytest.approx(sum(r["fit_time"] + r["predict_time"] for r in inner)
                                                      + sum(prepares.values()))
        assert record["fit_time"] > record["search_time"] > 0
        truth = _grid_search(estimator, GRID, X[spec.train], y[spec.train], scoring=make_scorer(g_mean))
        chosen = result.search
        assert {f"svc__{k}": v for k, v in chosen["params"].items()} == truth.best_params_
        means = [row["mean_g_mean"] for row in chosen["candidates"]]
        np.testing.assert_allclose(means, truth.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
        assert [row["rank"] for row in chosen["candidates"]] == truth.cv_results_["rank_test_score"].tolist()
        y_pred = truth.predict(X[spec.test])
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], y_pred), abs=1e-12)
        assert result.record["f_measure"] == pytest.approx(f_measure(y[spec.test], y_pred), abs=1e-12)
        assert result.record["params"] == chosen["params"]
        assert len(chosen["inner"]) == 16 * 3


def test_floor_on_f_measure_equals_a_gridsearchcv_refit_rule(yeast5):
    """The floor rule against GridSearchCV's multi-metric results and a refit callable written from them."""
    X, y = yeast5
    floor = 0.5
    estimator = make_estimator("svc_balanced")
    search = Search(candidate_params(GRID), n_splits=3, scoring="g_mean", floor={"f_measure": floor})
    specs, results = _engine(estimator, X, y, search, client=None)

    def refit(cv_results):
        gm, fm = cv_results["mean_test_g_mean"], cv_results["mean_test_f_measure"]
        ok = fm >= floor
        if not ok.any():
            return int(np.argmax(fm - floor))
        return int(np.flatnonzero(ok)[np.argmax(gm[ok])])

    changed = 0
    for spec, result in zip(specs, results):
        truth = _grid_search(estimator, GRID, X[spec.train], y[spec.train], refit=refit,
                             scoring={"g_mean": make_scorer(g_mean), "f_measure": make_scorer(f_measure)})
        assert {f"svc__{k}": v for k, v in result.search["params"].items()} == truth.best_params_
        unconstrained = int(np.argmin(truth.cv_results_["rank_test_g_mean"]))
        changed += truth.best_index_ != unconstrained
        y_pred = truth.predict(X[spec.test])
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], y_pred), abs=1e-12)
    assert changed, "the floor never changed the choice: this test would not see the rule"


def test_ensemble_search_equals_gridsearchcv_on_the_cluster_and_here(client):
    """An ensemble's candidates fan out as member tasks; the chosen model equals GridSearchCV's refit."""
    X, y = make_imbalanced(600, n_features=4, minority_fraction=0.1, random_state=3)
    X, y = np.asarray(X), np.asarray(y)
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 0})
    grid = {"estimator__C": [0.3, 3.0], "n_estimators": [2, 3]}
    search = Search(candidate_params(grid), n_splits=3, scoring="g_mean")
    specs, here = _engine(estimator, X, y, search, client=None, n_splits=3, metrics=("g_mean", "auc"))
    _, there = _engine(estimator, X, y, search, client=client, n_splits=3, metrics=("g_mean", "auc"))
    assert [r.record for r in here] == [r.record for r in there]
    for spec, result in zip(specs, here):
        truth = _grid_search(estimator, grid, X[spec.train], y[spec.train], scoring=make_scorer(g_mean))
        assert {f"ensembleothrclassifier__{k}": v for k, v in result.search["params"].items()} == truth.best_params_
        np.testing.assert_allclose([row["mean_g_mean"] for row in result.search["candidates"]],
                                   truth.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], truth.predict(X[spec.test])),
                                                           abs=1e-12)


def test_selection_rules_ties_nan_and_unreachable_floor():
    search = Search([{"C": c} for c in range(4)], n_splits=2, scoring="g_mean", floor={"precision": 0.5})

    def inner(rows):
        return [{"candidate": c, "inner_fold": i, "g_mean": gm, "precision": p, "fit_time": 1.0}
                for c, (gm, p) in enumerate(rows) for i in range(2)]

    # candidates 1 and 2 tie on the best mean: the first wins, as GridSearchCV's rank argmin; NaN ranks last
    chosen = select_candidate(inner([(0.5, 0.9), (0.8, 0.9), (0.8, 0.9), (np.nan, 0.9)]), search=search)
    assert chosen["index"] == 1 and chosen["floor_met"]
    assert [row["rank"] for row in chosen["candidates"]] == [3, 1, 1, 4]
    assert chosen["candidates"][0]["fit_time"] == 2.0 and chosen["search_time"] == 8.0
    # the best G-mean misses the floor: the next one that reaches it is chosen
    assert select_candidate(inner([(0.9, 0.4), (0.7, 0.6), (0.8, 0.5), (0.6, 0.9)]), search=search)["index"] == 2
    # nobody reaches it: the closest
    chosen = select_candidate(inner([(0.9, 0.1), (0.7, 0.45), (0.8, 0.3), (0.6, 0.2)]), search=search)
    assert chosen["index"] == 1 and not chosen["floor_met"]


def test_random_search_draws_inside_the_bounds_and_repeats():
    space = {"C": {"log_uniform": [0.01, 100.0]}, "gamma": [0.1, 1.0], "degree": {"int_uniform": [2, 4]},
             "tol": {"uniform": [0.001, 0.002]}}
    drawn = candidate_params(space, method="random", n_candidates=200, random_state=5)
    assert drawn == candidate_params(space, method="random", n_candidates=200, random_state=5)
    assert drawn != candidate_params(space, method="random", n_candidates=200, random_state=6)
    C = np.array([d["C"] for d in drawn])
    assert 0.01 <= C.min() and C.max() <= 100.0
    # log-uniform: about as many draws below 1 as above (uniform on [0.01, 100] puts 1 % below)
    assert 0.35 < np.mean(C < 1.0) < 0.65
    assert {d["degree"] for d in drawn} == {2, 3, 4} and {d["gamma"] for d in drawn} == {0.1, 1.0}
    assert all(0.001 <= d["tol"] <= 0.002 for d in drawn)
    json.dumps(drawn)  # plain numbers: they go into metrics.json and CSV


@pytest.mark.parametrize("search, message", [
    ({"params": {"Cx": [1]}}, r"candidate 0 \{'Cx': 1\}: .*has no parameter\(s\) Cx"),
    ({"params": {"C": [1, -1]}}, r"candidate 1 \{'C': -1\}: .*'C' parameter of SVC"),
    ({"params": {"C": 1}}, r"'search.params.C' must be a non-empty list"),
    ({"params": {"C": [1]}, "n_candidates": 3}, r"'search.n_candidates' applies to 'method: random'"),
    ({"params": {"C": {"log_uniform": [1, 10]}}}, r"must be a non-empty list of values for a grid"),
    ({"params": {"C": {"log_uniform": [0, 10]}}, "method": "random", "n_candidates": 2}, r"needs low > 0"),
    ({"params": {"C": {"normal": [0, 10]}}, "method": "random", "n_candidates": 2}, r"a list of values or one of"),
    ({"params": {"C": [1]}, "method": "random"}, r"needs 'search.n_candidates'"),
    ({"params": {"C": [1]}, "scoring": "accuracy"}, r"'search.scoring' is 'accuracy'; accepted: g_mean"),
    ({"params": {"C": [1]}, "floor": {"recal": 0.5}}, r"'search.floor' is 'recal'; accepted: g_mean"),
    ({"params": {"estimator": ["svc"]}}, r"the base estimator is chosen"),
    ({"params": {"C": list(range(1, 101)), "gamma": list(range(1, 102))}}, r"grid of 10100 candidates"),
    ({"params": {}}, r"'search.params': \{\} should be non-empty"),
])
def test_bad_search_is_refused_before_work(search, message):
    with pytest.raises(JobSpecError, match=message):
        validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"}, "search": search})


def test_data_checks_know_the_inner_folds():
    data = load_job_data("yeast5")  # 44 minority rows: 35 in a training fold of 5-fold CV
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
                        "search": {"params": {"C": [1]}, "cv": 36}})
    with pytest.raises(DataError, match=r"holds 35 of them, fewer than the search's cv=36 inner folds"):
        check_job_data(data, job)
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
                        "features": [{"name": "similarity", "params": {"references": 800}}],
                        "search": {"params": {"C": [1]}}})
    with pytest.raises(DataError, match=r"smallest inner training fold .* has 791 rows"):
        check_job_data(data, job)


def test_searched_job_writes_its_search_and_resumes(client, tmp_path, yeast5):
    X, y = yeast5
    grid = {"C": [1, 10], "gamma": [0.3, "scale"]}
    job = validate_job({"name": "searched", "data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
                        "cv": {"n_splits": 4, "n_repeats": 1}, "metrics": ["g_mean", "f_measure"],
                        "search": {"params": grid}})
    first = run_job(job, client, out=tmp_path / "run", progress=False)
    run_dir = first.run_dir
    metrics = json.loads((run_dir / "metrics.json").read_text())
    chosen = {(c["seed"], c["fold"]): c["params"] for c in metrics["search"]["chosen"]}
    for f, (train, _) in enumerate(repeat_splits(y, n_splits=4, seed=0)):
        truth = _grid_search(make_estimator("svc_balanced"), grid, X[train], y[train], scoring=make_scorer(g_mean))
        assert {f"svc__{k}": v for k, v in chosen[(0, f)].items()} == truth.best_params_
    truth = _grid_search(make_estimator("svc_balanced"), grid, X, y, scoring=make_scorer(g_mean))
    assert {f"svc__{k}": v for k, v in chosen[("final", "final")].items()} == truth.best_params_
    final = __import__("dimbsvm.artifacts", fromlist=["load_artifact"]).load_artifact(run_dir / "model")[0]
    assert {k: final[-1].get_params()[k] for k in grid} == chosen[("final", "final")]
    lines = (run_dir / "search.csv").read_text().splitlines()
    assert "fit_time" in lines[0].split(",")
    assert len(lines) == 1 + (4 + 1) * 4 * 3  # (4 folds + final model) x 4 candidates x 3 inner folds
    summary = (run_dir / "search_summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 5 * 4 and sum(line.endswith(",True") for line in summary) == 5
    report = (run_dir / "report.md").read_text()
    assert "## Parameter search" in report and "floor met" not in report  # no floor asked: no floor column
    assert all(record["params"] == chosen[(0, record["fold"])] for record in first.folds)

    # interrupted after two folds; one of them lost its saved search, so it runs again
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    run_dir.rename(partial)
    for name in ("metrics.json", "summary.md", "resources.json"):
        (partial / name).unlink()
    for path in sorted((partial / "folds").glob("*.json"))[2:]:
        path.unlink()
    (partial / "search" / "seed0-fold1.json").unlink()
    resumed = run_job(job, client, out=tmp_path / "run", progress=False)
    assert resumed.reused == 1 and resumed.folds == first.folds
    assert _without_times(run_dir / "search.csv") == _without_times(lines)


def _without_times(table):
    """The rows of a search table without the time columns, which differ from run to run."""
    import csv

    lines = table if isinstance(table, list) else table.read_text().splitlines()
    return [{k: v for k, v in row.items() if not k.endswith("_time")} for row in csv.DictReader(lines)]


def test_retrain_chooses_on_the_training_rows_and_fingerprints_the_search(client, tmp_path, yeast5):
    X, y = yeast5
    grid = {"C": [1, 10], "gamma": [0.3, "scale"]}
    spec = {"name": "rt", "data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
            "search": {"params": grid}}
    job = validate_job(spec)
    assert model_fingerprint(job) != model_fingerprint(validate_job({k: v for k, v in spec.items() if k != "search"}))
    outcome = retrain(job, client, tmp_path / "registry", job_text="")
    train, _ = train_test_split(np.arange(len(y)), test_size=0.25, random_state=0, stratify=y)
    truth = _grid_search(make_estimator("svc_balanced"), grid, X[train], y[train], scoring=make_scorer(g_mean))
    assert {f"svc__{k}": v for k, v in outcome.search_params.items()} == truth.best_params_
    assert job_search(job).candidates == candidate_params(grid)


def test_a_suite_method_with_a_search_equals_the_gridsearchcv_peer():
    """Without a scaler the harness's GridSearchCV peer and a searched method see the same rows: equal folds.

    (With min-max scaling they differ by design: the engine refits the scaler on every inner training
    fold, the peer searches on rows scaled once per outer fold.)
    """
    from dimbsvm.bench.quality import run_suite
    from dimbsvm.bench.suite import validate_suite

    suite = validate_suite({
        "datasets": ["yeast5"], "metrics": ["g_mean", "f_measure", "auc"],
        "protocol": {"n_splits": 3, "n_repeats": 1, "scaler": "none"},
        "methods": [{"name": "peer", "kind": "peer", "estimator": "svc_balanced_grid"},
                    {"name": "searched", "kind": "registry", "estimator": "svc_balanced",
                     "search": {"params": GRID}}]})
    records = run_suite(suite, None, progress=False)
    by_method = {m: [(r["fold"], r["g_mean"], r["f_measure"], r["auc"]) for r in records if r["method"] == m]
                 for m in ("peer", "searched")}
    assert len(by_method["peer"]) == 3 and by_method["peer"] == by_method["searched"]
    assert all(json.loads(r["params"]).keys() == GRID.keys() for r in records if r["method"] == "searched")


def test_member_tasks_of_large_inner_folds_equal_one_task_per_candidate(monkeypatch, client):
    """The two granularities of an ensemble candidate's inner fits give the same records and choices."""
    from dimbsvm.model_selection import searched_folds

    X, y = make_imbalanced(600, n_features=4, minority_fraction=0.1, random_state=4)
    X, y = np.asarray(X), np.asarray(y)
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 2})
    search = Search(candidate_params({"estimator__C": [0.3, 3.0]}), n_splits=3, scoring="auc")
    _, merged = _engine(estimator, X, y, search, client=client, n_splits=3, metrics=("g_mean", "auc"))
    monkeypatch.setattr(searched_folds, "MEMBER_TASKS_FROM_ROWS", 0)
    _, per_member = _engine(estimator, X, y, search, client=client, n_splits=3, metrics=("g_mean", "auc"))
    assert [r.record for r in merged] == [r.record for r in per_member]
    def scores(results):
        return [[{k: v for k, v in row.items() if not k.endswith("_time")} for row in r.search["candidates"]]
                for r in results]

    assert scores(merged) == scores(per_member)


def test_the_example_search_job_is_valid():
    from pathlib import Path

    from dimbsvm.jobs import load_job

    from dimbsvm.jobs.checks import check_job, describe

    path = Path(__file__).resolve().parents[1] / "jobs" / "search.yaml"
    job = load_job(path)
    check_job_data(load_job_data(job.data.source), job)
    assert len(job_search(job).candidates) == 16
    # `dimbsvm validate` says what the search will cost: 16 x 3 inner fits in 10 folds and the final model
    lines = describe(check_job(path, run_dir=False))
    assert "search: 16 candidates x 3 inner folds in each of 11 training fold(s) = 528 inner fits, chosen by g_mean" \
        in lines


def test_a_search_over_a_feature_stage_equals_gridsearchcv(yeast5):
    """Stage parameters (features.<i>.<name>): inner folds prepare once per stage setting; GridSearchCV agrees."""
    from sklearn.pipeline import Pipeline

    from dimbsvm.estimators import make_feature

    X, y = yeast5
    stage = make_feature("similarity", {"references": 50, "random_state": 0})  # references drawn reproducibly
    # (seeded: LIBLINEAR's coordinate order comes from NumPy's global generator otherwise, so the engine's fits and
    # scikit-learn's would depend on what ran before them in the process)
    estimator = make_estimator("linear_svc", {"random_state": 0})
    search = Search(candidate_params({"features.0.references": [20, 60], "C": [0.1, 1.0]}), n_splits=3)
    specs = [FoldSpec((0, f), train, test) for f, (train, test) in enumerate(repeat_splits(y, n_splits=3, seed=0))]
    setup = FoldSetup(estimator, minority_class(y), features=[stage], metrics=("g_mean",), search=search)
    results, _ = run_folds(setup, X, y, specs, client=None)
    for spec, result in zip(specs, results):
        # step names that sort as the job's keys do ("C" < "features..."), so the candidates come in the same order
        truth = GridSearchCV(Pipeline([("scale", MinMaxScaler()), ("b_stage", stage), ("a_svm", estimator)]),
                             {"b_stage__references": [20, 60], "a_svm__C": [0.1, 1.0]}, cv=3,
                             scoring=make_scorer(g_mean)).fit(X[spec.train], y[spec.train])
        params = result.search["params"]
        assert {"b_stage__references": params["features.0.references"], "a_svm__C": params["C"]} == truth.best_params_
        np.testing.assert_allclose([row["mean_g_mean"] for row in result.search["candidates"]],
                                   truth.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], truth.predict(X[spec.test])),
                                                           abs=1e-12)


def test_stage_search_keys_are_checked():
    base = {"data": {"source": "yeast5"}, "estimator": {"name": "linear_svc"},
            "features": [{"name": "similarity", "params": {"references": 50}}]}
    with pytest.raises(JobSpecError, match=r"the job has 1 feature stage\(s\), numbered from 0"):
        validate_job({**base, "search": {"params": {"features.1.references": [10]}}})
    with pytest.raises(JobSpecError, match=r"candidate 0 .*similarity.*has no parameter\(s\) refs"):
        validate_job({**base, "search": {"params": {"features.0.refs": [10]}}})
    with pytest.raises(JobSpecError, match=r"written features.<index>.<name>"):
        validate_job({**base, "search": {"params": {"features.x": [10]}}})
    job = validate_job({**base, "search": {"params": {"features.0.references": [10, 900]}}})
    with pytest.raises(DataError, match=r"asks for references=900 rows, but the smallest inner training fold"):
        check_job_data(load_job_data("yeast5"), job)


def test_a_suite_whose_search_a_class_cannot_fill_fails_before_work():
    from dimbsvm.bench.quality import run_suite
    from dimbsvm.bench.suite import validate_suite

    suite = validate_suite({"datasets": ["yeast5"], "metrics": ["g_mean"], "protocol": {"n_splits": 2},
                            "methods": [{"name": "searched", "kind": "registry", "estimator": "svc_balanced",
                                         "search": {"params": {"C": [1]}, "cv": 30}}]})
    with pytest.raises(DataError, match=r"yeast5, method searched \(seed 0, fold 0\): the search's 30 inner folds "
                                        r"need at least 30 rows of every class in each training fold; class 1 has 22"):
        run_suite(suite, None, progress=False)


def test_a_random_search_equals_randomizedsearchcv(yeast5):
    """The random method draws scikit-learn's candidates (ParameterSampler) and chooses as RandomizedSearchCV."""
    from scipy.stats import loguniform
    from sklearn.model_selection import RandomizedSearchCV

    X, y = yeast5
    space = {"C": {"log_uniform": [0.01, 100.0]}, "gamma": [0.3, 1.0, "scale"]}
    search = Search(candidate_params(space, method="random", n_candidates=6, random_state=7), n_splits=3)
    specs, results = _engine(make_estimator("svc_balanced"), X, y, search, client=None, n_splits=3)
    for spec, result in zip(specs, results):
        truth = RandomizedSearchCV(make_pipeline(MinMaxScaler(), make_estimator("svc_balanced")),
                                   {"svc__C": loguniform(0.01, 100.0), "svc__gamma": [0.3, 1.0, "scale"]},
                                   n_iter=6, random_state=7, cv=3, scoring=make_scorer(g_mean)).fit(X[spec.train],
                                                                                                    y[spec.train])
        assert [{k.removeprefix("svc__"): v for k, v in p.items()} for p in truth.cv_results_["params"]] \
            == search.candidates
        assert {f"svc__{k}": v for k, v in result.search["params"].items()} == truth.best_params_
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], truth.predict(X[spec.test])),
                                                           abs=1e-12)


# --- candidates that raise: scored error_score and recorded, as GridSearchCV does ---------------------------

#: LinearSVC's (penalty, loss) grid: ("l1", "hinge") raises when fitted, on every fold.
FAILING_GRID = {"penalty": ["l1", "l2"], "loss": ["hinge", "squared_hinge"], "C": [0.5]}


def test_a_failing_candidate_is_scored_nan_and_the_choice_equals_gridsearchcv(scheduler, yeast5):
    from sklearn.exceptions import FitFailedWarning

    X, y = yeast5
    # (seeded: LIBLINEAR's coordinate order comes from NumPy's global generator otherwise, so the engine's fits and
    # scikit-learn's would depend on what ran before them in the process)
    estimator = make_estimator("linear_svc", {"random_state": 0})
    search = Search(candidate_params(FAILING_GRID), n_splits=3, scoring="g_mean")
    failing = search.candidates.index({"C": 0.5, "loss": "hinge", "penalty": "l1"})
    specs, results = _engine(estimator, X, y, search, client=scheduler, n_splits=3)
    for spec, result in zip(specs, results):
        with pytest.warns(FitFailedWarning):
            truth = _grid_search(estimator, FAILING_GRID, X[spec.train], y[spec.train], scoring=make_scorer(g_mean),
                                 error_score=np.nan)
        chosen = result.search
        assert {f"linearsvc__{k}": v for k, v in chosen["params"].items()} == truth.best_params_
        np.testing.assert_allclose([row["mean_g_mean"] for row in chosen["candidates"]],
                                   truth.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
        assert np.isnan(chosen["candidates"][failing]["mean_g_mean"])
        assert [row["rank"] for row in chosen["candidates"]] == truth.cv_results_["rank_test_score"].tolist()
        assert [row["n_failed"] for row in chosen["candidates"]] == [3 * (c == failing) for c in range(4)]
        assert chosen["n_failed"] == 3 and {f["candidate"] for f in chosen["failures"]} == {failing}
        assert all(f["error"].startswith("ValueError: ") for f in chosen["failures"])
        failed = [r for r in chosen["inner"] if r["candidate"] == failing]
        assert all("Traceback" in r["traceback"] and np.isnan(r["g_mean"]) for r in failed)
        assert result.record["g_mean"] == pytest.approx(g_mean(y[spec.test], truth.predict(X[spec.test])),
                                                           abs=1e-12)


def test_a_numeric_error_score_enters_the_means():
    inner = [{"candidate": c, "inner_fold": i, "g_mean": 0.6 + 0.1 * c, "fit_time": 1.0}
             for c in range(2) for i in range(2)]
    inner[3] = {"candidate": 1, "inner_fold": 1, "g_mean": 0.0, "fit_time": 0.5, "error": "ValueError: no"}
    chosen = select_candidate(inner, search=Search([{"C": 1}, {"C": 2}], n_splits=2, error_score=0.0))
    assert [row["mean_g_mean"] for row in chosen["candidates"]] == pytest.approx([0.6, 0.35])
    assert chosen["index"] == 0 and chosen["n_failed"] == 1
    assert chosen["failures"] == [{"candidate": 1, "inner_fold": 1, "error": "ValueError: no"}]


def test_a_search_whose_every_fit_fails_stops_with_the_first_error(scheduler, yeast5):
    X, y = yeast5
    search = Search(candidate_params({"penalty": ["l1"], "loss": ["hinge"], "C": [0.5, 1.0]}), n_splits=3)
    with pytest.raises(ValueError, match=r"every one of the search's 6 inner fits failed; the first \(candidate 0 "
                                         r"[\s\S]*Traceback[\s\S]*penalty='l1'"):
        _engine(make_estimator("linear_svc"), X, y, search, client=scheduler, n_splits=3)


def test_error_score_raise_stops_at_the_first_failure(yeast5):
    X, y = yeast5
    search = Search(candidate_params(FAILING_GRID), n_splits=3, error_score="raise")
    with pytest.raises(ValueError, match="penalty='l1'"):
        _engine(make_estimator("linear_svc"), X, y, search, client=None, n_splits=3)
    for bad in ("ignore", True, None):
        with pytest.raises(JobSpecError, match="error_score"):
            Search([{"C": 1}], error_score=bad)


def test_failing_member_tasks_are_recorded_as_one_task_per_candidate_records_them(monkeypatch, client):
    """An ensemble candidate whose members raise: the member-task path and the one-task path agree."""
    from dimbsvm.model_selection import searched_folds

    X, y = make_imbalanced(600, n_features=4, minority_fraction=0.1, random_state=4)
    X, y = np.asarray(X), np.asarray(y)
    estimator = make_estimator("ensemble_othr", {"estimator": "linear_svc", "n_estimators": 2, "random_state": 2})
    search = Search(candidate_params({"estimator__penalty": ["l2", "l1"], "estimator__loss": ["hinge"]}),
                    n_splits=3, scoring="auc")
    _, merged = _engine(estimator, X, y, search, client=client, n_splits=3, metrics=("g_mean", "auc"))
    monkeypatch.setattr(searched_folds, "MEMBER_TASKS_FROM_ROWS", 0)
    _, per_member = _engine(estimator, X, y, search, client=client, n_splits=3, metrics=("g_mean", "auc"))
    assert [r.record for r in merged] == [r.record for r in per_member]
    for results in (merged, per_member):
        for result in results:
            assert [row["n_failed"] for row in result.search["candidates"]] == [0, 3]
            assert result.search["index"] == 0 and result.record["params"]["estimator__penalty"] == "l2"
    assert ([f["error"] for r in merged for f in r.search["failures"]]
            == [f["error"] for r in per_member for f in r.search["failures"]])


def test_a_searched_job_records_failed_candidates_and_warns(client, tmp_path, caplog):
    import csv
    import logging

    job = validate_job({"name": "failing", "data": {"source": "yeast5"}, "estimator": {"name": "linear_svc"},
                        "cv": {"n_splits": 3, "n_repeats": 1}, "metrics": ["g_mean"],
                        "search": {"params": FAILING_GRID}})
    assert job_search(job).error_score != job_search(job).error_score  # NaN by default
    with caplog.at_level(logging.WARNING, logger="dimbsvm.jobs.search_results"):
        outcome = run_job(job, client, out=tmp_path / "run", progress=False)
    warned = [r.getMessage() for r in caplog.records if "inner fits failed" in r.getMessage()]
    assert len(warned) == 4 and all("3 of 12 inner fits failed and were scored nan" in m for m in warned)
    rows = list(csv.DictReader((outcome.run_dir / "search.csv").read_text().splitlines()))
    failed = [row for row in rows if row["error"]]
    assert len(failed) == 4 * 3 and all(json.loads(row["params"])["penalty"] == "l1" for row in failed)
    assert all(json.loads(row["params"])["loss"] == "hinge" for row in failed)
    metrics = json.loads((outcome.run_dir / "metrics.json").read_text())
    assert [c["failed_inner_fits"] for c in metrics["search"]["candidates"]] == [
        12 if (c["params"]["penalty"], c["params"]["loss"]) == ("l1", "hinge") else 0
        for c in metrics["search"]["candidates"]]
    assert metrics["search"]["space"]["error_score"] == "nan"
    report = (outcome.run_dir / "report.md").read_text()
    assert ('1 candidate(s) raised on inner folds and were scored nan there' in report
            and '{"C": 0.5, "loss": "hinge", "penalty": "l1"} on 12 inner fit(s)' in report)


@pytest.mark.parametrize("value, expected", [(0, 0.0), (-1.5, -1.5), ("nan", "nan"), ("raise", "raise")])
def test_error_score_in_a_job(value, expected):
    job = validate_job({"name": "s", "data": {"source": "yeast5"}, "estimator": {"name": "svc"},
                        "search": {"params": {"C": [1, 2]}, "error_score": value}})
    got = job_search(job).error_score
    assert (np.isnan(got) if expected == "nan" else got == expected)


def test_a_bad_error_score_is_refused():
    with pytest.raises(JobSpecError, match="error_score"):
        validate_job({"name": "s", "data": {"source": "yeast5"}, "estimator": {"name": "svc"},
                      "search": {"params": {"C": [1, 2]}, "error_score": "ignore"}})


class _Raising(BaseEstimator, ClassifierMixin):
    """A classifier whose fit raises the error it is given (a stand-in for a candidate that fails)."""

    def __init__(self, error=None):
        self.error = error

    def fit(self, X, y):
        raise self.error


@pytest.mark.parametrize("error, recorded", [(ValueError("bad value"), True), (ZeroDivisionError("x"), True),
                                             (FileNotFoundError("gone"), True), (ConnectionResetError("reset"), False),
                                             (OSError(5, "Input/output error"), False)])
def test_an_inner_fit_records_its_error_unless_a_retry_may_cure_it(error, recorded):
    """Deterministic errors become the candidate's record; transient I/O errors are raised for the engine to retry."""
    from dimbsvm.fold_data.prepared import FoldRows
    from dimbsvm.model_selection.bodies import prepare_fold
    from dimbsvm.svm.parts import parts_of
    from dimbsvm.model_selection.searched_folds import FailedFit, fit_inner_part

    X, y = make_imbalanced(100, n_features=3, minority_fraction=0.2, random_state=0)
    X, y = np.asarray(X), np.asarray(y)
    rows = FoldRows(np.arange(80), np.arange(80, 100))
    prepared = prepare_fold(X, y, rows, scaler="minmax", impute="none", features=())
    estimator = _Raising(error)
    [part], _ = parts_of(estimator, y[rows.train])
    if recorded:
        failed = fit_inner_part(X, y, prepared, rows, estimator=estimator, part=part, error_score=np.nan)
        assert isinstance(failed, FailedFit) and failed.error == f"{type(error).__name__}: {error}"
        assert "Traceback" in failed.traceback and failed.seconds >= 0
    else:
        with pytest.raises(type(error)):
            fit_inner_part(X, y, prepared, rows, estimator=estimator, part=part, error_score=np.nan)
    with pytest.raises(type(error)):
        fit_inner_part(X, y, prepared, rows, estimator=estimator, part=part, error_score="raise")


class _FailingStage(TransformerMixin, BaseEstimator):
    """A feature stage that passes rows through, or raises when fitted with ``fail=True``."""

    def __init__(self, fail=False):
        self.fail = fail

    def fit(self, X, y=None):
        if self.fail:
            raise ValueError("this stage setting cannot be fitted")
        return self

    def transform(self, X):
        return X


def test_a_stage_setting_that_fails_fails_its_candidates_as_in_gridsearchcv(scheduler, yeast5):
    """A failing inner prepare (shared by a stage setting's candidates) scores all of them error_score."""
    from sklearn.exceptions import FitFailedWarning
    from sklearn.pipeline import Pipeline

    X, y = yeast5
    # (seeded: LIBLINEAR's coordinate order comes from NumPy's global generator otherwise, so the engine's fits and
    # scikit-learn's would depend on what ran before them in the process)
    estimator = make_estimator("linear_svc", {"random_state": 0})
    search = Search(candidate_params({"features.0.fail": [False, True], "C": [0.1, 1.0]}), n_splits=3)
    specs = [FoldSpec((0, f), train, test) for f, (train, test) in enumerate(repeat_splits(y, n_splits=3, seed=0))]
    setup = FoldSetup(estimator, minority_class(y), features=[_FailingStage()], metrics=("g_mean",), search=search)
    results, _ = run_folds(setup, X, y, specs, client=scheduler)
    for spec, result in zip(specs, results):
        with pytest.warns(FitFailedWarning):
            truth = GridSearchCV(Pipeline([("scale", MinMaxScaler()), ("b_stage", _FailingStage()),
                                           ("a_svm", estimator)]),
                                 {"b_stage__fail": [False, True], "a_svm__C": [0.1, 1.0]}, cv=3,
                                 scoring=make_scorer(g_mean), error_score=np.nan).fit(X[spec.train], y[spec.train])
        params = result.search["params"]
        assert {"b_stage__fail": params["features.0.fail"], "a_svm__C": params["C"]} == truth.best_params_
        np.testing.assert_allclose([row["mean_g_mean"] for row in result.search["candidates"]],
                                   truth.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
        assert [row["n_failed"] for row in result.search["candidates"]] == [0, 3, 0, 3]
        assert {f["error"] for f in result.search["failures"]} == {
            "ValueError: this stage setting cannot be fitted"}


def test_a_suite_method_whose_candidates_fail_counts_them_in_its_folds(caplog):
    import logging

    from dimbsvm.bench.quality import run_suite
    from dimbsvm.bench.suite import validate_suite

    suite = validate_suite({
        "datasets": ["yeast5"], "metrics": ["g_mean"], "protocol": {"n_splits": 3, "n_repeats": 1},
        "methods": [{"name": "searched", "kind": "registry", "estimator": "linear_svc",
                     "search": {"params": FAILING_GRID}}]})
    with caplog.at_level(logging.WARNING, logger="dimbsvm.bench.quality"):
        records = run_suite(suite, None, progress=False)
    assert [r["failed_inner_fits"] for r in records] == [3, 3, 3]  # (l1, hinge) on each of 3 inner folds
    failing = {"C": 0.5, "loss": "hinge", "penalty": "l1"}
    assert all(r["error"] is None and json.loads(r["params"]) != failing for r in records)  # never chosen
    assert sum("3 inner fit(s) of the search failed" in m for m in caplog.messages) == 3
