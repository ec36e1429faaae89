"""The package's import layers and its lint rules, as CI checks them (both configured in pyproject.toml)."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout, not an installed copy


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; it comes with pip install '.[dev]'")
    return path


def test_import_layers_hold():
    """``lint-imports``: no module imports from a layer above its own, imports inside functions counted."""
    result = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout


def test_ruff_finds_nothing():
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", "dimbsvm", "tests", "benchmarks", "jobs"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_numeric_code_imports_no_orchestration():
    """Importing a numeric module loads neither the fold engine, the cluster's set-up nor the job layer."""
    probe = ("import sys, dimbsvm.svm, dimbsvm.features, dimbsvm.graph, dimbsvm.parallel; "
             "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('dimbsvm.')}))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=ENV,
                            check=True)
    loaded = set(ast.literal_eval(result.stdout))
    assert not loaded & {"model_selection", "distributed", "jobs", "bench", "cli", "report"}, loaded
