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


# -- TLS: real schedulers, certificates from two CAs ----------------------------------------------------------


@pytest.fixture(scope="module")
def schedulers(tmp_path_factory):
    """A tls:// scheduler whose certificate CA "a" signed (it trusts CA "a"), and a plain tcp:// one."""
    import json
    import subprocess
    import sys

    from cluster_helpers import load_cluster_helpers

    helpers = load_cluster_helpers("cluster_helpers_probe")
    root = tmp_path_factory.mktemp("tls")
    files = {}
    for name in ("a", "b"):
        (root / name).mkdir()
        files[name] = helpers._make_certificates(root / name)  # (ca, cert, key)
    ca, cert, key = files["a"]
    started, addresses = [], {}
    try:
        for name, extra in (("tls", ["--protocol", "tls", "--tls-ca-file", str(ca), "--tls-cert", str(cert),
                                     "--tls-key", str(key)]), ("tcp", [])):
            scheduler_file = root / f"{name}.json"
            started.append(subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                                             "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file),
                                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            helpers._wait_for(scheduler_file.exists, 60, f"the {name} scheduler's file")
            addresses[name] = json.loads(scheduler_file.read_text())["address"]
        yield addresses, files
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=20)


def _context(ca, cert, key):
    from distributed.security import Security

    security = Security(tls_ca_file=str(ca), tls_client_cert=str(cert), tls_client_key=str(key),
                        require_encryption=True)
    return security.get_connection_args("client")["ssl_context"]


def test_a_tls_scheduler_is_reached_with_certificates_of_its_ca(schedulers):
    addresses, files = schedulers
    probe_scheduler(addresses["tls"], 10.0, _context(*files["a"]))  # no error


def test_a_client_certificate_of_another_ca_is_named_as_refused_by_the_scheduler(schedulers):
    addresses, files = schedulers
    ca_a, _, _ = files["a"]
    _, cert_b, key_b = files["b"]
    with pytest.raises(ClusterConnectionError, match=r"the scheduler refused this client's certificate \(TLS alert: "
                                                     r"unknown ca\): --tls-cert and --tls-key must be signed"):
        probe_scheduler(addresses["tls"], 10.0, _context(ca_a, cert_b, key_b))


def test_a_scheduler_certificate_this_client_does_not_trust_is_named(schedulers):
    addresses, files = schedulers
    ca_b, cert_b, key_b = files["b"]
    with pytest.raises(ClusterConnectionError, match=r"this client does not trust the scheduler's certificate "
                                                     r"\(.*\): --tls-ca-file must be the CA"):
        probe_scheduler(addresses["tls"], 10.0, _context(ca_b, cert_b, key_b))


def test_each_scheme_at_the_other_schedulers_port_names_the_right_one(schedulers):
    addresses, files = schedulers
    tls_port = addresses["tls"].rsplit(":", 1)[1]
    start = time.monotonic()
    with pytest.raises(ClusterConnectionError, match=rf"the server speaks TLS, so this scheduler wants "
                                                     rf"tls://127\.0\.0\.1:{tls_port} with --tls-ca-file"):
        probe_scheduler(f"tcp://127.0.0.1:{tls_port}", 2.0)
    assert time.monotonic() - start < 2.0 + 5.0 + 2.0  # the greeting's wait, then the TLS hello's
    tcp_port = addresses["tcp"].rsplit(":", 1)[1]
    with pytest.raises(ClusterConnectionError, match=rf"the server does not speak TLS \(.*\), so it is not a tls:// "
                                                     rf"scheduler: try tcp://127\.0\.0\.1:{tcp_port}"):
        probe_scheduler(f"tls://127.0.0.1:{tcp_port}", 10.0, _context(*files["a"]))
    with pytest.raises(ClusterConnectionError, match="wants TLS, and no TLS settings were given"):
        probe_scheduler(addresses["tls"], 10.0, None)
