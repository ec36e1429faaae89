"""The typed job spec: frozen, every default filled in, and the same fingerprints as the job dicts it replaced."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from dimbsvm.jobs import validate_job
from dimbsvm.jobs.checks import check_job
from dimbsvm.jobs.job_spec import DataSpec, EstimatorSpec, JobSpec, SearchSpec
from dimbsvm.jobs.retrain import model_fingerprint
from dimbsvm.jobs.run_dir import job_fingerprint
from dimbsvm.jobs.runner import run_checked, run_job
from dimbsvm.jobs.spec import DEFAULTS, JOB_SCHEMA, load_job

JOBS = Path(__file__).resolve().parent.parent / "jobs"

#: ``(job fingerprint, model fingerprint)`` of jobs, computed by the code before the typed spec (validate_job
#: returned a dict; both hashed that dict): run directories and registries written then must still match.
PINNED = {
    "quickstart.yaml": ("364defc5634206ad6691b07864656ad6d18d965ea966b480fdf4bd74b4eda9c2",
                        "c6e3ad2eceaba477a74c4e928942f8330be6069f5e3edecf73c274ac6aa503a6"),
    "retrain.yaml": ("b060529f0b0773aff7afd488669d60a95c107c78687670feee28be72c70771a4",
                     "c6e3ad2eceaba477a74c4e928942f8330be6069f5e3edecf73c274ac6aa503a6"),
    "search.yaml": ("f1e68be1ef7886fdca418a72b8cb5a1a288b64e2e5408b5ead95a782456b78ac",
                    "928bdd79d218c7fcf9f5941bb7db47c50291ac123c2c6a5b7b08c7d9f52f61a1"),
    # (newer than the typed spec: pinned as this code computed them when the job was added)
    "sparse.yaml": ("d2b59aa14f45aa8cabe6e181cd5e51e210c6fce87d746db28914030a2071b08a",
                    "59afa294bd0a936a92b7e7803ce9895827d227af2b8b6b7a43d6a8d66df47eae"),
}

#: Jobs writing the optional keys (with and without a default) that the bundled jobs leave out.
EXTRA = {
    "every_key": ({"name": "every", "description": "all the optional keys",
                   "data": {"source": "yeast5", "nominal": ["a"], "positive": "positive"},
                   "preprocessing": {"impute": "mean"},
                   "features": [{"name": "similarity", "params": {"references": 10}}],
                   "estimator": {"name": "svc_balanced", "params": {"C": 2}},
                   "search": {"params": {"C": [1, 10], "features.0.references": [5, 10]}, "cv": 4,
                              "scoring": "f_measure", "floor": {"g_mean": 0.1}, "error_score": "raise"},
                   "cv": {"n_splits": 3}, "metrics": ["g_mean"], "output": {"model": False},
                   "retrain": {"holdout": {"fraction": 0.5, "source": "other.csv"}, "gates": {"a_mean": {}}},
                   "execution": {"retries": 0, "n_workers": 3, "require_encryption": True}},
                  ("e5f7b5597d5cb97294dc47ff6f63c9bd28fb795a7a4f64234d767e11af279a5a",
                   "0a949904f2ac2364be0a611819787d8c8b35600242c8a00eeea613c2db4f6340")),
    "random_search": ({"data": {"source": "yeast5", "nominal": []}, "estimator": {"name": "svc"},
                       "search": {"params": {"C": {"log_uniform": [0.1, 10]}}, "method": "random",
                                  "n_candidates": 3, "random_state": 7, "error_score": 0}},
                      ("814df9baf5e9932e7aacaade6d5fbd9c5e6ad47bbf309e36eabda3572431b5eb",
                       "d65de8ad31a5767b85ccdd2d05b090e32afd7319988dbf9236f36f2cc60507c3")),
    "stored": ({"data": {"source": "x.zarr"}, "estimator": {"name": "svc"},
                "features": [{"name": "structural", "params": {"n_neighbors": 5}, "stored": True, "k_store": 20,
                              "max_partition_rows": 100}], "output": {"model": False}},
               ("d4312702e8915fa6891c6cd6f3bdec71b20ba829ef54ce66a8ed623d61d13203",
                "073d7fc565e6742d622b20026e075130bf896bd5d2d8caaaca49d02a8d350bb8")),
    "stored_false": ({"data": {"source": "x.zarr", "positive": 1}, "estimator": {"name": "svc"},
                      "features": [{"name": "hik", "stored": False}]},
                     ("5b73b45c76a25cc7febf1ff1b55620a0623a7a49cb2913c755c3a7edf8e2d175",
                      "15df1e8d0f62f84f6a1c5cc05c1e7b68c337b398e2060066ea7eb46a932a182a")),
}


def _sha(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def test_bundled_jobs_are_all_pinned():
    assert sorted(path.name for path in JOBS.glob("*.yaml")) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_bundled_job_fingerprints_are_those_of_the_job_dicts(name):
    job = load_job(JOBS / name)
    assert (job_fingerprint(job), model_fingerprint(job)) == PINNED[name]
    # the hash is the canonical mapping's, and a spec rebuilt from that mapping is the same spec
    assert _sha(job.to_dict()) == PINNED[name][0]
    assert JobSpec.from_dict(job.to_dict()) == job
    assert pickle.loads(pickle.dumps(job)) == job  # as it travels to a task or the report's side process


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_optional_keys_keep_their_fingerprints(name):
    spec, pinned = EXTRA[name]
    job = validate_job(spec)
    assert (job_fingerprint(job), model_fingerprint(job)) == pinned
    assert JobSpec.from_dict(job.to_dict()) == job


def test_every_schema_default_is_filled():
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    canonical = job.to_dict()
    for key, default in DEFAULTS.items():
        if isinstance(default, dict) and key != "retrain":
            assert {k: canonical[key][k] for k in default} == default, key
    assert canonical["retrain"] == DEFAULTS["retrain"]
    assert (job.name, job.features, job.metrics) == (DEFAULTS["name"], (), tuple(DEFAULTS["metrics"]))
    assert (job.preprocessing.scaler, job.preprocessing.impute) == ("minmax", "none")
    assert (job.cv.n_splits, job.cv.n_repeats, job.cv.random_state) == (5, 1, 0)
    assert job.output.model is True
    assert (job.execution.retries, job.execution.require_encryption, job.execution.n_workers) == (2, False, None)
    assert (job.retrain.holdout.fraction, job.retrain.holdout.random_state) == (0.25, 0)
    assert job.retrain.gates["g_mean"].tolerance == 0.0
    assert (job.data.nominal, job.data.positive, job.search) == ((), None, None)
    # every section of the schema is an attribute of the spec
    assert set(JOB_SCHEMA["properties"]) == {f.name for f in dataclasses.fields(JobSpec)}


def test_search_defaults_are_filled_but_not_written_back():
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}, "search": {"params": {"C": [1]}}})
    search = job.search
    assert (search.method, search.random_state, search.cv, search.scoring, dict(search.floor),
            search.error_score, search.n_candidates) == ("grid", 0, 3, "g_mean", {}, "nan", None)
    assert job.to_dict()["search"] == {"params": {"C": [1]}}  # as written: the fingerprint hashes no default
    assert search.with_defaults() == {"params": {"C": [1]}, "method": "grid", "random_state": 0, "cv": 3,
                                      "scoring": "g_mean", "floor": {}, "error_score": "nan"}
    gate = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"},
                         "retrain": {"gates": {"a_mean": {}}}}).retrain.gates["a_mean"]
    assert gate.tolerance == 0.0 and gate.to_dict() == {}


def test_the_spec_is_frozen():
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc", "params": {"C": 2.0}},
                        "features": [{"name": "similarity", "params": {"references": [5, 10]}}],
                        "search": {"params": {"C": [1, 10]}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.cv.n_splits = 3
    with pytest.raises(TypeError):
        job.estimator.params["C"] = 3.0
    with pytest.raises(TypeError):
        job.search.params["C"] = [5]
    with pytest.raises(AttributeError):
        job.search.params["C"].append(5)  # lists are tuples
    with pytest.raises(TypeError):
        job.retrain.gates["f_measure"] = None
    before = job_fingerprint(job)
    copy = job.estimator.plain_params()  # the constructor's copy: changing it changes nothing in the spec
    copy["C"] = 100.0
    job.to_dict()["features"][0]["params"]["references"].append(1)
    assert job.estimator.params["C"] == 2.0 and job_fingerprint(job) == before


def test_a_spec_built_without_validation_has_the_same_defaults():
    built = JobSpec(data=DataSpec("yeast5"), estimator=EstimatorSpec("svc"))
    validated = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    assert built == validated and job_fingerprint(built) == job_fingerprint(validated)
    assert SearchSpec(params={"C": [1]}).to_dict() == {"params": {"C": [1]}}


def test_a_checked_job_runs_without_its_data_checked_again(tmp_path, monkeypatch):
    # the same records from the CLI's path (check_job, then run_checked) and from run_job, which checks the
    # data itself
    rng = np.random.default_rng(0)
    rows = [",".join(f"{v:.6f}" for v in rng.normal(size=3)) + f",{'a' if i % 5 == 0 else 'b'}" for i in range(60)]
    (tmp_path / "d.csv").write_text("x0,x1,x2,label\n" + "\n".join(rows) + "\n")
    (tmp_path / "job.yaml").write_text("name: checked\ndata: {source: d.csv}\nestimator: {name: svc_balanced}\n"
                                       "cv: {n_splits: 3}\noutput: {model: false}\n")
    checked = check_job(tmp_path / "job.yaml", out=tmp_path / "run-a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.job = None
    import dimbsvm.jobs.runner as runner

    calls = []
    real = runner.check_job_data

    def counted(data, job):
        calls.append(job)
        return real(data, job)

    monkeypatch.setattr(runner, "check_job_data", counted)  # counts the runner's calls of the real check
    a = run_checked(checked, None, progress=False)
    assert calls == []  # checked once, by check_job
    b = run_job(checked.job, None, out=tmp_path / "run-b", progress=False, job_text=checked.job_text)
    assert calls == [checked.job]  # run_job checks the data it is given
    keep = ("seed", "fold", "g_mean", "f_measure", "auc", "a_mean", "n_train", "n_test")
    assert [{k: r.get(k) for k in keep} for r in a.folds] == [{k: r.get(k) for k in keep} for r in b.folds]
    assert (tmp_path / "run-a" / "job-fingerprint").read_text() == job_fingerprint(checked.job)
