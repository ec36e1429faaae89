"""What the command line imports: a small job in this process stays off Zarr, Dask DataFrames and distributed.

Each check is a fresh interpreter (``sys.modules`` of this test process holds whatever other tests imported).
Times are never asserted; which packages are imported is what the time follows (benchmarks/small_jobs.py).
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")  # this checkout, not an installed copy
ENV.pop("DASK_SCHEDULER_ADDRESS", None)

#: Packages a job on in-memory data run in this process has no use for.
STORE_AND_CLUSTER = ("zarr", "dask.dataframe", "distributed")
#: Imported only by scikit-learn's ``all_estimators`` (with pytest): what skops' list of the types its loaders trust
#: costs, which saving a model does not need.
EVERY_SKLEARN_MODULE = "sklearn.utils._testing"
#: Imported only where a job imputes missing values (scikit-learn's impute package loads its neighbours module).
IMPUTE = "sklearn.impute"
#: What dimbsvm imports only for a store's rows, a model file or a report (and the CLI not for a refusal).
HEAVY = (*STORE_AND_CLUSTER, "dask", "dask.array", "sklearn", "skops", "matplotlib", "bokeh", EVERY_SKLEARN_MODULE,
         IMPUTE)

_PROBE = """
import sys
from dimbsvm.cli import main
code = main({argv!r})
sys.stdout.flush()
print("\\nLOADED", sorted(m for m in {heavy!r} if m in sys.modules), code)
"""


def _loaded(argv, cwd=ROOT):
    """``(packages of HEAVY imported, exit status, stderr)`` of ``dimbsvm ARGV`` in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-c", _PROBE.format(argv=list(argv), heavy=HEAVY)], cwd=cwd,
                            capture_output=True, text=True, env=ENV, timeout=300)
    line = next(line for line in result.stdout.splitlines() if line.startswith("LOADED "))
    names, code = line[len("LOADED "):].rsplit(" ", 1)
    return set(ast.literal_eval(names)), int(code), result.stderr


def test_importing_the_cli_imports_none_of_the_heavy_packages():
    probe = f"import sys, dimbsvm, dimbsvm.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=ENV,
                            check=True)
    assert ast.literal_eval(result.stdout.strip()) == []


def test_a_missing_job_file_is_refused_before_the_job_layer_is_imported(tmp_path):
    loaded, code, stderr = _loaded(["run", str(tmp_path / "missing.yaml")])
    assert code == 2
    assert stderr.strip().splitlines() == [f"dimbsvm: error: cannot read job file {tmp_path / 'missing.yaml'}: "
                                           "No such file or directory"]
    assert loaded == set(), loaded


def test_validate_of_a_small_job_imports_neither_dask_nor_zarr(tmp_path):
    loaded, code, stderr = _loaded(["validate", str(ROOT / "jobs" / "quickstart.yaml"), "--out",
                                    str(tmp_path / "run")])
    assert code == 0, stderr
    assert not loaded & {"zarr", "dask", "dask.array", "dask.dataframe", "distributed", "skops", "matplotlib"}, loaded


def test_a_small_run_in_this_process_imports_no_store_or_cluster_package(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: tiny\ndata: {source: yeast5}\nestimator: {name: svc_balanced}\n"
                   "cv: {n_splits: 2, n_repeats: 1, random_state: 0}\nmetrics: [g_mean, auc]\n")
    loaded, code, stderr = _loaded(["run", str(job), "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0, stderr
    assert (tmp_path / "run" / "metrics.json").is_file() and (tmp_path / "run" / "report.html").is_file()
    # model file (skops) and report are written; the store's and the cluster's stacks are not used
    assert not loaded & set(STORE_AND_CLUSTER), loaded
    # the report was drawn in its side process: this one never imported the drawing libraries
    assert not loaded & {"matplotlib", "bokeh"}, loaded
    # the model is written without skops' trusted-type list (every scikit-learn module imported to build it) ...
    assert EVERY_SKLEARN_MODULE not in loaded, loaded
    assert IMPUTE not in loaded, loaded  # a job that imputes nothing
    # ... and loads with it, through the trust check
    from dimbsvm.artifacts import load_artifact

    model, _ = load_artifact(tmp_path / "run" / "model")
    assert type(model).__name__ == "Pipeline"

