"""The one place that opens a Dask client."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass

from ..exceptions import DimbsvmError

logger = logging.getLogger(__name__)

__all__ = ["TLSSettings", "cluster_client", "current_client", "ClusterConnectionError"]


class ClusterConnectionError(DimbsvmError):
    """The scheduler could not be reached, or refused the connection."""


@dataclass(frozen=True)
class TLSSettings:
    """Files for a TLS connection to the scheduler (PEM).

    Attributes
    ----------
    ca_file : str
        Certificate authority that signed the scheduler's certificate.
    cert, key : str
        This client's certificate and private key (key may be inside cert).
    """

    ca_file: str
    cert: str
    key: str | None = None

    def security(self):
        from distributed.security import Security

        for what, path in (("CA file", self.ca_file), ("certificate", self.cert), ("key", self.key)):
            if path is not None and not os.path.isfile(path):
                raise ClusterConnectionError(f"TLS {what} {path} does not exist")
        return Security(tls_ca_file=self.ca_file, tls_client_cert=self.cert, tls_client_key=self.key,
                        require_encryption=True)


def current_client(client=None):
    """The client to use: the one given, else the active one, else ``None``.

    Library code calls this and runs in-process when it returns ``None``;
    it never starts a cluster. Inside a Dask task the answer is ``None``
    unless a client is given: a task that submits tasks and waits for them
    can starve its worker of threads, so work nested in a task (an ensemble
    fitted inside a fold task) runs in that task.
    """
    if client is not None:
        return client
    try:
        from distributed import get_client, get_worker
    except ImportError:
        return None
    try:
        get_worker()
        return None  # inside a task
    except ValueError:
        pass
    try:
        return get_client()
    except ValueError:
        return None


@contextlib.contextmanager
def cluster_client(scheduler: str | None = None, *, scheduler_file: str | None = None,
                   tls: TLSSettings | None = None, require_encryption: bool = False,
                   n_workers: int | None = None, threads_per_worker: int = 1, processes: bool = True,
                   timeout: float = 20):
    """Connect to a scheduler, or start an embedded ``LocalCluster``.

    Parameters
    ----------
    scheduler : str, default=None
        ``tcp://HOST:PORT`` or ``tls://HOST:PORT``. Falls back to the
        ``DASK_SCHEDULER_ADDRESS`` environment variable.
    scheduler_file : str, default=None
        A file written by ``dask scheduler --scheduler-file``.
    tls : TLSSettings, default=None
        Certificates for a ``tls://`` scheduler. Settings from a Dask config
        file (``distributed.comm.tls.*``) apply when this is not given.
    require_encryption : bool, default=False
        Refuse to run over an unencrypted connection. An embedded cluster is
        then started with temporary certificates.
    n_workers : int, default=None
        Workers of the embedded cluster (default: one per core).
    threads_per_worker : int, default=1
        One thread per worker: SVM fits hold the GIL for long stretches.
    processes : bool, default=True
        Embedded workers as processes (as on a real cluster).
    timeout : float, default=20
        Seconds to wait for a remote scheduler.

    Yields
    ------
    distributed.Client

    Raises
    ------
    ClusterConnectionError
        The scheduler is unreachable, refuses the connection, or the
        connection would not be encrypted while encryption is required.
    """
    from distributed import Client, LocalCluster

    address = scheduler or (None if scheduler_file else os.environ.get("DASK_SCHEDULER_ADDRESS"))
    security = tls.security() if tls is not None else None
    if address or scheduler_file:
        target = address or f"scheduler file {scheduler_file}"
        if require_encryption and address and not address.startswith("tls://"):
            raise ClusterConnectionError(
                f"the job requires encryption but the scheduler address {address} is not tls://")
        if scheduler_file and not os.path.isfile(scheduler_file):
            raise ClusterConnectionError(f"scheduler file {scheduler_file} does not exist")
        logger.info("connecting to %s", target)
        try:
            client = Client(address, scheduler_file=scheduler_file, security=security, timeout=timeout)
        except (OSError, TimeoutError, RuntimeError) as exc:
            # RuntimeError: distributed refuses tcp:// when a Dask config requires encryption
            raise ClusterConnectionError(f"cannot connect to the scheduler at {target}: {exc}") from exc
        with client:
            if require_encryption and not client.scheduler.address.startswith("tls://"):
                raise ClusterConnectionError(
                    f"the job requires encryption but {client.scheduler.address} is not tls://")
            yield client
        return
    n_workers = n_workers or os.cpu_count() or 1
    logger.info("starting an embedded LocalCluster with %d worker(s)", n_workers)
    local_security = True if require_encryption else None  # temporary certificates
    with LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=processes,
                      dashboard_address=":0", security=local_security,
                      protocol="tls://" if require_encryption else None) as cluster, \
            Client(cluster) as client:
        yield client
