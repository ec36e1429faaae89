"""Job validation, data checks and the runner against an independent sequential computation."""

import json

import numpy as np
import pytest
from dimbsvm.model_selection import StratifiedBlockKFold
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from dimbsvm.datasets import load_keel
from dimbsvm.exceptions import DataError, JobSpecError
from dimbsvm.jobs import JobData, check_job_data, run_job, validate_job

BASE = {"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"}}


def _job(**changes):
    spec = {**BASE, **changes}
    return validate_job(spec)


@pytest.mark.parametrize("changes, message", [
    ({"cv": {"folds": 3}}, r"unknown key 'cv.folds'; accepted keys under 'cv': n_repeats, n_splits, random_state"),
    ({"colour": "red"}, r"unknown key 'colour'"),
    ({"cv": {"n_splits": "five"}}, r"'cv.n_splits' must be of type integer"),
    ({"cv": {"n_splits": 1}}, r"'cv.n_splits' is 1; it must be at least 2"),
    ({"preprocessing": {"scaler": "robust"}}, r"'preprocessing.scaler' is 'robust'; accepted: minmax, standard, maxabs, none"),
    ({"metrics": ["g_mean", "accuracy"]}, r"'metrics.1' is 'accuracy'; accepted: g_mean"),
    ({"estimator": {"name": "forest"}}, r"'estimator.name' is 'forest'; accepted: .*svc_balanced"),
    ({"estimator": {"name": "svc", "params": {"C": -1}}}, r"'C' parameter of SVC must be a float"),
    ({"estimator": {"name": "svc", "params": {"gama": 1}}}, r"has no parameter\(s\) gama"),
    ({"estimator": {"name": "ensemble_othr", "params": {"n_jobs": 4}}},
     r"n_jobs cannot be set in a job: its tasks run on the job's workers"),
    ({"data": {}}, r"missing required key 'data.source'"),
])
def test_invalid_jobs_name_the_key(changes, message):
    with pytest.raises(JobSpecError, match=message):
        _job(**changes)


def test_defaults_are_filled():
    job = _job()
    assert job.preprocessing.to_dict() == {"scaler": "minmax", "impute": "none"}
    assert job.cv.to_dict() == {"n_splits": 5, "n_repeats": 1, "random_state": 0}


def _dataset(X, y):
    return JobData(X=np.asarray(X, float), y=np.asarray(y),
                   meta={"name": "tiny", "feature_names": [f"f{i}" for i in range(np.shape(X)[1])]})


def test_data_checks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = np.array([0] * 24 + [1] * 6)
    X_nan = X.copy()
    X_nan[7, 2] = np.nan
    with pytest.raises(DataError, match=r"missing values.*row 7, column 2 \(f2\).*impute"):
        check_job_data(_dataset(X_nan, y), _job())
    check_job_data(_dataset(X_nan, y), _job(preprocessing={"impute": "mean"}))
    X_inf = X.copy()
    X_inf[3, 0] = np.inf
    with pytest.raises(DataError, match=r"infinite value in row 3, column 0"):
        check_job_data(_dataset(X_inf, y), _job(preprocessing={"impute": "mean"}))
    with pytest.raises(DataError, match="only one class"):
        check_job_data(_dataset(X, np.zeros(30, int)), _job())
    with pytest.raises(DataError, match=r"class 1 has 6 rows, fewer than cv.n_splits=10"):
        check_job_data(_dataset(X, y), _job(cv={"n_splits": 10}))
    y3 = np.array([0] * 10 + [1] * 10 + [2] * 10)
    with pytest.raises(DataError, match="auc, f_measure need two"):
        check_job_data(_dataset(X, y3), _job())
    check_job_data(_dataset(X, y3), _job(metrics=["g_mean", "a_mean"]))


def _sequential_reference(X, y, seeds, n_splits):
    """Independent computation: explicit folds, scaler and SVC, G-mean from counts."""
    values = []
    for seed in seeds:
        for train, test in StratifiedBlockKFold(n_splits, random_state=seed).split(X, y):
            scaler = MinMaxScaler().fit(X[train])
            model = SVC(class_weight="balanced").fit(scaler.transform(X[train]), y[train])
            pred = model.predict(scaler.transform(X[test]))
            tpr = np.mean(pred[y[test] == 1] == 1)
            tnr = np.mean(pred[y[test] == 0] == 0)
            values.append(np.sqrt(tpr * tnr))
    return values


def test_run_matches_sequential_reference(client, tmp_path):
    job = _job(cv={"n_splits": 3, "n_repeats": 2, "random_state": 4}, metrics=["g_mean", "f_measure", "auc"])
    result = run_job(job, client, out=tmp_path / "run", progress=False)
    data = load_keel("yeast5")
    expected = _sequential_reference(data.X, data.y, seeds=[4, 5], n_splits=3)
    assert [r["g_mean"] for r in result.folds] == pytest.approx(expected, rel=1e-12)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["summary"]["g_mean"]["mean"] == pytest.approx(np.mean(expected))
    assert saved["summary"]["g_mean"]["std"] == pytest.approx(np.std(expected, ddof=1))
    assert len(saved["folds"]) == 6 and (tmp_path / "run" / "summary.md").exists()


def test_failed_run_leaves_no_run_directory(client, tmp_path):
    # LinearSVC rejects this combination only when fitting, inside the task.
    job = _job(estimator={"name": "linear_svc", "params": {"loss": "hinge", "dual": False}},
               execution={"retries": 0})
    with pytest.raises(ValueError, match="loss='hinge'"):
        run_job(job, client, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    # what remains is the hidden partial directory a rerun resumes from, with no results in it
    assert [p.name for p in tmp_path.iterdir()] == [".run.partial"]
    assert not (tmp_path / ".run.partial" / "metrics.json").exists()
    assert list((tmp_path / ".run.partial" / "folds").iterdir()) == []


def _write_csv(path, X, y):
    lines = [",".join(f"f{j}" for j in range(X.shape[1])) + ",class"]
    lines += [",".join(repr(float(v)) for v in row) + f",{label}" for row, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


def _interrupt(run_dir, keep):
    """Turn a finished run back into the partial directory an interruption leaves, ``keep`` folds done."""
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    run_dir.rename(partial)
    for name in ("metrics.json", "summary.md", "resources.json"):
        (partial / name).unlink()
    for path in sorted((partial / "folds").glob("*.json"))[keep:]:
        path.unlink()
    return partial


def test_resume_over_replaced_data_is_refused(client, tmp_path):
    data = load_keel("yeast5")
    source = tmp_path / "data.csv"
    _write_csv(source, data.X, data.y)
    job = _job(data={"source": str(source)}, cv={"n_splits": 3, "n_repeats": 2, "random_state": 0})
    first = run_job(job, client, out=tmp_path / "run", progress=False)
    partial = _interrupt(tmp_path / "run", keep=3)

    # the same data resumes and gives the same records
    resumed = run_job(job, client, out=tmp_path / "run", progress=False)
    assert resumed.reused == 3 and resumed.folds == first.folds
    partial = _interrupt(tmp_path / "run", keep=3)

    # other data under the same file name: refused, naming both fingerprints; nothing is averaged
    rng = np.random.default_rng(1)
    _write_csv(source, data.X, rng.permutation(data.y))
    with pytest.raises(DataError, match=r"interrupted run on other data \(data fingerprint [0-9a-f]{16}, "
                                        r"now [0-9a-f]{16}\).*start over with --fresh \(or remove .*\.run\.partial\)"):
        run_job(job, client, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    assert len(list((partial / "folds").glob("*.json"))) == 3


def test_resume_over_the_same_source_stored_as_float32_is_refused(client, tmp_path):
    # A store keeps its source's fingerprint whatever its dtype; the float32 store holds other numbers, so
    # folds recorded on the float64 store must not be reused for it.
    from dimbsvm.store import content_fingerprint, ingest, open_store

    data = load_keel("yeast5")
    source = tmp_path / "data.csv"
    _write_csv(source, data.X, data.y)
    store = tmp_path / "data.zarr"
    ingest(str(source), store, dtype="float64")
    job = _job(data={"source": str(store)}, cv={"n_splits": 3, "n_repeats": 1, "random_state": 0})
    run_job(job, client, out=tmp_path / "run", progress=False)
    fold = sorted((tmp_path / "run" / "folds").glob("*.json"))[0]
    recorded = json.loads(fold.read_text())["data_fingerprint"]
    assert recorded == open_store(store).meta["fingerprint"]  # float64: the bare source fingerprint, as before
    partial = _interrupt(tmp_path / "run", keep=2)
    ingest(str(source), store, dtype="float32", overwrite=True)
    meta = open_store(store).meta
    assert meta["fingerprint"] == recorded and content_fingerprint(meta) != recorded
    with pytest.raises(DataError, match=r"interrupted run on other data"):
        run_job(job, client, out=tmp_path / "run", progress=False)
    assert len(list((partial / "folds").glob("*.json"))) == 2


def test_fold_file_from_other_data_is_refused(client, tmp_path):
    job = _job(cv={"n_splits": 3, "n_repeats": 1, "random_state": 0})
    run_job(job, client, out=tmp_path / "run", progress=False)
    partial = _interrupt(tmp_path / "run", keep=2)
    fold = sorted((partial / "folds").glob("*.json"))[0]
    saved = json.loads(fold.read_text())
    fold.write_text(json.dumps(dict(saved, data_fingerprint="0" * 64)))
    with pytest.raises(DataError, match=r"was recorded for other data"):
        run_job(job, client, out=tmp_path / "run", progress=False)


# checks before any task starts (issue 17)

def test_binary_only_estimator_on_three_classes_is_refused_before_any_task():
    X = np.random.default_rng(0).normal(size=(30, 3))
    y3 = np.array([0] * 10 + [1] * 10 + [2] * 10)
    for name in ("othr", "thr", "ensemble_othr", "hpc", "act"):
        with pytest.raises(DataError, match=rf"3 classes, but estimator '{name}' \(\w+\) is binary-only"):
            check_job_data(_dataset(X, y3), _job(estimator={"name": name}, metrics=["g_mean"]))
    check_job_data(_dataset(X, y3), _job(estimator={"name": "svc"}, metrics=["g_mean"]))  # multi-class: fine


def test_identifier_like_target_is_not_a_class_label():
    X = np.random.default_rng(0).normal(size=(80, 2))
    y = np.arange(80) % 75  # 75 "classes", 70 of them on one row
    with pytest.raises(DataError, match=r"75 distinct values, 70 of them on a single row: it is not a class label"):
        check_job_data(_dataset(X, y), _job(metrics=["g_mean"]))


@pytest.mark.parametrize("features, estimator, message", [
    ([{"name": "similarity"}], {"name": "svc"},
     r"features.0 \(similarity\) asks for references=100 rows, but the smallest training fold \(5-fold CV of 100 "
     r"rows\) has 80 rows; set features.0.params.references to at most 80"),
    ([{"name": "structural", "params": {"n_neighbors": 80}}], {"name": "svc"},
     r"features.0 \(structural\) asks for n_neighbors=80, but .* has 80 rows"),
    ([], {"name": "hpc", "params": {"n_neighbors": 90}}, r"estimator 'hpc' asks for n_neighbors=90"),
])
def test_stage_sizes_must_fit_every_training_fold(features, estimator, message):
    X = np.random.default_rng(0).normal(size=(100, 3))
    y = np.array([0] * 80 + [1] * 20)
    with pytest.raises(DataError, match=message):
        check_job_data(_dataset(X, y), _job(features=features, estimator=estimator))
    check_job_data(_dataset(X, y), _job(features=[{"name": "similarity", "params": {"references": 80}}]))


def test_check_job_data_keeps_no_state_on_the_data():
    # a job that passed check_job is run by run_checked, which does not check again; check_job_data itself
    # checks every time (no mark left on the data that a later call trusts)
    X = np.random.default_rng(0).normal(size=(30, 3))
    data = _dataset(X, np.array([0] * 24 + [1] * 6))
    check_job_data(data, _job())
    data.X[0, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        check_job_data(data, _job())
    assert not hasattr(data, "_checked_for")


def test_plan_run_dir_refuses_each_unusable_out(tmp_path):
    from dimbsvm.exceptions import DimbsvmError
    from dimbsvm.jobs.run_dir import plan_run_dir

    job = _job()
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    (tmp_path / "done").mkdir()
    for name in ("metrics.json", "job.yaml"):
        (tmp_path / "done" / name).write_text("{}")
    for out, message in [("file", "is an existing file, not a directory"),
                         ("empty", "is an existing empty directory.*rmdir"),
                         ("other", "is an existing directory that is not a dimbsvm run \\(it holds notes.txt\\)"),
                         ("done", "already exists and is complete"),
                         ("file/run", "is a file, not a directory")]:
        with pytest.raises(DimbsvmError, match=message):
            plan_run_dir(job, "d" * 64, out=tmp_path / out)
    with pytest.raises(DimbsvmError, match="--resume: there is no interrupted run"):
        plan_run_dir(job, "d" * 64, out=tmp_path / "new", resume=True)
    plan = plan_run_dir(job, "d" * 64, out=tmp_path / "new")
    assert plan.run_dir == tmp_path / "new" and not plan.resuming


def test_default_out_resumes_the_newest_partial_run_of_the_same_job_and_data(tmp_path):
    import datetime as dt

    from dimbsvm.exceptions import DimbsvmError
    from dimbsvm.jobs.run_dir import open_partial, plan_run_dir

    job, other = _job(), _job(cv={"n_splits": 3})
    runs = tmp_path / "runs"
    day = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    with pytest.raises(DimbsvmError, match="--resume: no interrupted run of job 'job' on this data"):
        plan_run_dir(job, "a" * 64, runs_root=runs, resume=True)
    made = {}
    for i, (j, data_fp) in enumerate([(job, "a" * 64), (job, "a" * 64), (job, "b" * 64), (other, "a" * 64)]):
        plan = plan_run_dir(j, data_fp, runs_root=runs, fresh=True, now=day + dt.timedelta(minutes=i))
        from dimbsvm.jobs.run_dir import job_fingerprint
        open_partial(plan.partial, job_fingerprint(j), data_fp, "", j)
        made[i] = plan
    (made[1].partial / "folds" / "seed0-fold0.json").write_text("{}")
    plan = plan_run_dir(job, "a" * 64, runs_root=runs)  # the newest of this job and data: #1, not #2 or #3
    assert plan.resuming and plan.run_dir == made[1].run_dir and plan.saved_folds == 1
    assert plan_run_dir(job, "a" * 64, runs_root=runs, resume=True).run_dir == made[1].run_dir
    fresh = plan_run_dir(job, "a" * 64, runs_root=runs, fresh=True, now=day + dt.timedelta(hours=1))
    assert not fresh.resuming and fresh.run_dir == runs / "job-20250102-040405"
    assert plan_run_dir(job, "c" * 64, runs_root=runs, now=day).resuming is False  # other data: a new run


def test_a_job_whose_estimator_names_no_seed_is_seeded_by_its_cv(tmp_path):
    # a bagged ensemble without random_state: the same job twice gives the same records, as the
    # estimator seeded with the CV's random_state does
    spec = {"name": "seeded", "data": {"source": "yeast5"},
            "estimator": {"name": "ensemble_othr", "params": {"n_estimators": 3, "max_samples": 200}},
            "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 5}, "metrics": ["g_mean", "f_measure", "auc"]}
    runs = [run_job(validate_job(spec), None, out=tmp_path / f"run{i}", progress=False) for i in range(2)]
    seeded = dict(spec, estimator={"name": "ensemble_othr",
                                   "params": {"n_estimators": 3, "max_samples": 200, "random_state": 5}})
    runs.append(run_job(validate_job(seeded), None, out=tmp_path / "named", progress=False))
    untimed = [[{k: v for k, v in r.items() if not k.endswith("_time")} for r in run.folds] for run in runs]
    assert untimed[0] == untimed[1] == untimed[2]
