"""A scheduler's port tried before distributed's client connects: what is there, said in one line.

distributed's client, pointed at a server that is not what the address says,
either waits without bound (a ``tcp://`` address at a server that never
greets, such as a ``tls://`` scheduler or a web server) or fails with the
transport's words (``SSLError: TLSV1_ALERT_UNKNOWN_CA``, "TLS certificate
does not match", ``FatalCommClosedError``). These probes connect first,
read for a bounded time, and name the cause and the fix: the scheme the
server wants, or which side's certificate the other side refused.
"""

from __future__ import annotations

import socket
import ssl
import time
from urllib.parse import urlsplit

from .cluster_errors import ClusterConnectionError

__all__ = ["no_tls_settings", "probe_scheduler"]

#: OpenSSL's reasons for a TLS handshake that met a server not speaking TLS.
_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST",
            "UNEXPECTED_EOF_WHILE_READING")


#: Seconds a tcp:// address's silent server gets to answer a TLS client hello, after the wait for Dask's greeting.
_TLS_HELLO_WAIT = 5.0


def probe_scheduler(address: str, timeout: float, ssl_context: ssl.SSLContext | None = None) -> None:
    """Refuse, in one line, an address whose server does not greet as a Dask scheduler does.

    A Dask server writes its handshake as soon as a connection is accepted
    (over TLS: once TLS's own handshake is done). So this connects and reads
    for at most ``timeout`` seconds. A connection refused is tried again
    until ``timeout`` (a scheduler may be starting), then refused in one
    line that says so; an unreachable host is left to the client to report.

    Parameters
    ----------
    address : str
        ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` (checked already).
    timeout : float
        Seconds for the whole probe.
    ssl_context : ssl.SSLContext, default=None
        The client's TLS context (distributed's, from the TLS files or the
        Dask config) for a ``tls://`` address; ``None`` there means no TLS
        settings were given.

    Raises
    ------
    ClusterConnectionError
        Naming the address, what the server did, and what it may be.
    """
    text = address if "://" in address else f"tcp://{address}"
    parts = urlsplit(text)
    host, port = parts.hostname, parts.port or 8786
    if parts.scheme == "tls":
        if ssl_context is None:
            raise no_tls_settings(address)
        _probe_tls(address, host, port, timeout, ssl_context)
        return
    if parts.scheme != "tcp":
        return
    deadline = time.monotonic() + timeout
    try:
        with _accepted_connection(host, port, deadline) as connection:
            connection.settimeout(max(0.1, deadline - time.monotonic()))
            first = connection.recv(16)
    except ConnectionRefusedError:
        raise _refused(address, timeout) from None
    except TimeoutError:
        if _speaks_tls(host, port, min(timeout, _TLS_HELLO_WAIT)):
            raise ClusterConnectionError(
                f"cannot connect to the scheduler at {address}: the server speaks TLS, so this scheduler wants "
                f"tls://{host}:{port} with --tls-ca-file, --tls-cert and --tls-key") from None
        raise ClusterConnectionError(
            f"cannot connect to the scheduler at {address}: the server accepted the connection but sent no Dask "
            f"handshake within {timeout:g} s, so it is not a Dask scheduler's tcp:// port (a web server or the "
            "dashboard's port? the scheduler's is 8786 by default)") from None
    except OSError:
        return  # unreachable: the client says so, with its own wait
    if first.startswith(b"HTTP/") or not first:
        what = "answered as a web server" if first else "closed the connection"
        raise ClusterConnectionError(f"cannot connect to the scheduler at {address}: the server {what} without a "
                                     "Dask handshake, so it is not a Dask scheduler's tcp:// port (the scheduler's is "
                                     "8786 by default)")


def no_tls_settings(address: str) -> ClusterConnectionError:
    """The error of a ``tls://`` address given without TLS files or a Dask config that has them."""
    return ClusterConnectionError(
        f"the scheduler at {address} wants TLS, and no TLS settings were given: pass --tls-ca-file, --tls-cert and "
        "--tls-key (or set distributed.comm.tls.* in a Dask config)")


def _probe_tls(address, host, port, timeout, context) -> None:
    """The TLS handshake and the server's first bytes, each failure named: which certificate, or no TLS at all."""
    deadline = time.monotonic() + timeout
    where = f"cannot connect to the scheduler at {address}"
    try:
        with _accepted_connection(host, port, deadline) as connection:
            connection.settimeout(max(0.1, deadline - time.monotonic()))
            hostname = host if context.check_hostname else None
            with context.wrap_socket(connection, server_hostname=hostname) as secured:
                secured.recv(16)  # TLS 1.3: the server's verdict on this client's certificate comes after
    except ConnectionRefusedError:
        raise _refused(address, timeout) from None
    except ssl.SSLCertVerificationError as exc:
        raise ClusterConnectionError(
            f"{where}: this client does not trust the scheduler's certificate ({exc.verify_message}): "
            "--tls-ca-file must be the CA that signed the scheduler's certificate") from None
    except ssl.SSLError as exc:
        reason = exc.reason or type(exc).__name__
        if any(name in reason for name in _NOT_TLS):
            raise ClusterConnectionError(
                f"{where}: the server does not speak TLS ({reason.lower().replace('_', ' ')}), so it is not a "
                f"tls:// scheduler: try tcp://{host}:{port}") from None
        if "ALERT" in reason:
            alert = reason.split("ALERT_", 1)[-1].lower().replace("_", " ")
            raise ClusterConnectionError(
                f"{where}: the scheduler refused this client's certificate (TLS alert: {alert}): --tls-cert and "
                "--tls-key must be signed by a CA the scheduler trusts (its own --tls-ca-file)") from None
        raise ClusterConnectionError(f"{where}: TLS failed: {reason}") from None
    except TimeoutError:
        raise ClusterConnectionError(
            f"{where}: the server accepted the connection but finished no TLS handshake and sent no Dask "
            f"handshake within {timeout:g} s") from None
    except OSError as exc:
        if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            raise ClusterConnectionError(
                f"{where}: the server closed the TLS connection ({exc.strerror or exc}): it may have refused this "
                "client's certificate (--tls-cert, --tls-key) or not speak TLS") from None
        return  # unreachable: the client says so


def _speaks_tls(host, port, timeout) -> bool:
    """Whether the server answers a TLS client hello (any certificate: only the protocol is asked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            with context.wrap_socket(connection):
                return True
    except ssl.SSLError as exc:
        return not any(name in (exc.reason or "") for name in _NOT_TLS)
    except OSError:
        return False


def _refused(address, timeout) -> ClusterConnectionError:
    return ClusterConnectionError(
        f"cannot connect to the scheduler at {address}: nothing accepted a connection there for {timeout:g} s "
        "(connection refused): is the scheduler running, and is this its port (8786 by default)? "
        "--connect-timeout waits longer for one still starting")


def _accepted_connection(host, port, deadline: float, retry_every: float = 0.25):
    """A socket connected to ``host:port``, connecting again while it is refused until ``deadline``."""
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
        except ConnectionRefusedError:
            if time.monotonic() + retry_every >= deadline:
                raise
            time.sleep(retry_every)
