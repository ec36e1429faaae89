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
