"""The scheduler address probe: a refused port is tried again until the timeout, then named as refused."""

import socket
import threading
import time

import pytest

from dimbsvm.distributed.client import probe_scheduler
from dimbsvm.distributed.cluster_errors import ClusterConnectionError


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_port_is_named_as_refused_after_the_timeout():
    port = _free_port()
    start = time.monotonic()
    with pytest.raises(ClusterConnectionError, match=rf"tcp://127\.0\.0\.1:{port}: nothing accepted a connection "
                                                     r"there for 1 s \(connection refused\)"):
        probe_scheduler(f"tcp://127.0.0.1:{port}", 1.0)
    assert 0.7 <= time.monotonic() - start < 5


def test_a_server_that_starts_listening_within_the_timeout_is_reached():
    port = _free_port()
    greeted = threading.Event()

    def serve_later():
        time.sleep(0.6)  # refused until then
        with socket.create_server(("127.0.0.1", port)) as server:
            connection, _ = server.accept()
            with connection:
                connection.sendall(b"\x00" * 16)  # a greeting that is not HTTP, as a Dask server's is not
                greeted.set()
                time.sleep(0.2)

    thread = threading.Thread(target=serve_later, daemon=True)
    thread.start()
    probe_scheduler(f"tcp://127.0.0.1:{port}", 5.0)  # no error: it connected once the server listened
    thread.join(timeout=5)
    assert greeted.is_set()
