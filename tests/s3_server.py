"""moto's S3 server, really started on 127.0.0.1: the session's (conftest.py) and those a test module needs of
its own (one that checks credentials)."""

import contextlib

import pytest


@contextlib.contextmanager
def moto_s3_server(env=None):
    """moto's S3 server (server mode) on a free port of 127.0.0.1, ``env`` added to its environment; yields its
    endpoint URL. Skips the test when moto or s3fs is absent."""
    import os
    import socket
    import subprocess
    import sys
    import time

    pytest.importorskip("moto", reason="the S3 test server is moto's server mode (the dev extra installs it)")
    pytest.importorskip("s3fs", reason="s3:// URLs need s3fs (the s3 and dev extras install it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              env=dict(os.environ, **(env or {})), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("moto's S3 server did not start within 30 s")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)
