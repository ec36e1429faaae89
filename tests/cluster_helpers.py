"""tests/test_cluster.py's helpers and fixtures (real `dask` processes on 127.0.0.1) for other test modules.

Tests run with ``--import-mode=importlib`` and cannot import one another by
name: a module that reuses test_cluster.py's scheduler, workers and fixtures
loads its own copy (so its module-scoped fixtures are its own).
"""

import importlib.util
from pathlib import Path


def load_cluster_helpers(name: str):
    """A fresh copy of tests/test_cluster.py as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
