"""The one place that opens a Dask client."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import environment
from .cluster_errors import ClusterConnectionError, NoWorkersError, WorkerMismatchError
from .probe import no_tls_settings, probe_scheduler

logger = logging.getLogger(__name__)

__all__ = ["TLSSettings", "check_cluster_options", "check_scheduler_address", "cluster_client",
           "ClusterConnectionError", "NoWorkersError", "SchedulerLostError", "WorkerMismatchError"]

#: Address schemes a user may give; Dask's ``inproc://`` only works inside one process (tests).
SCHEMES = ("tcp", "tls")


class SchedulerLostError(ClusterConnectionError):
    """The connection to the scheduler was lost in the middle of the work.

    Unlike the other errors here, work may have been done and saved: the
    CLI says how to resume, and exits with a status of its own,
    :attr:`exit_status`.
    """

    #: The CLI's exit status (2 is a user's error, 130 an interruption).
    exit_status = 3


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

    def check(self) -> None:
        """Raise :class:`ClusterConnectionError` unless every file exists and TLS can be used.

        Raises
        ------
        ClusterConnectionError
            A file is missing (naming the flag and the path), or the
            ``cryptography`` package is not installed.
        """
        for flag, path in (("--tls-ca-file", self.ca_file), ("--tls-cert", self.cert), ("--tls-key", self.key)):
            if path is not None and not os.path.isfile(path):
                raise ClusterConnectionError(f"TLS file {path} ({flag}) does not exist")
        check_tls_support()

    def security(self):
        """The ``distributed.security.Security`` for these files (checked first)."""
        from distributed.security import Security

        self.check()
        return Security(tls_ca_file=self.ca_file, tls_client_cert=self.cert, tls_client_key=self.key,
                        require_encryption=True)


def check_tls_support() -> None:
    """Raise when TLS cannot work here.

    Raises
    ------
    ClusterConnectionError
        ``cryptography`` (what Dask's TLS and temporary certificates use)
        cannot be imported; the message says how to install it.
    """
    try:
        import cryptography.x509  # noqa: F401 - what distributed's TLS and temporary certificates use
    except ImportError as exc:
        raise ClusterConnectionError(
            f"TLS needs the 'cryptography' package, which cannot be imported ({exc}); "
            "install it with `pip install cryptography`") from None


def check_scheduler_address(address: str) -> str:
    """Check the syntax of a scheduler address (nothing is contacted); return it.

    Accepted: ``tcp://HOST:PORT``, ``tls://HOST:PORT`` and ``HOST:PORT``
    (tcp). The port may be left out (Dask's default, 8786).

    Raises
    ------
    ClusterConnectionError
        Naming the address and what is wrong with it.

    Examples
    --------
    >>> check_scheduler_address("tcp://127.0.0.1:8786")
    'tcp://127.0.0.1:8786'
    >>> check_scheduler_address("foo://bar")
    Traceback (most recent call last):
    ...
    dimbsvm.distributed.cluster_errors.ClusterConnectionError: scheduler address 'foo://bar': unknown scheme 'foo://'; accepted: tcp://HOST:PORT or tls://HOST:PORT
    """
    accepted = "tcp://HOST:PORT or tls://HOST:PORT"
    text = str(address).strip()
    if not text:
        raise ClusterConnectionError(f"the scheduler address is empty; accepted: {accepted}")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    scheme = scheme.lower()
    if scheme == "inproc":
        raise ClusterConnectionError(f"scheduler address {text!r}: inproc:// connects only inside one Python "
                                     f"process (Dask's tests); accepted: {accepted}")
    if scheme not in SCHEMES:
        raise ClusterConnectionError(f"scheduler address {text!r}: unknown scheme '{scheme}://'; accepted: {accepted}")
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # a port that is not a number, or out of range
        raise ClusterConnectionError(f"scheduler address {text!r}: {exc}; accepted: {accepted}") from None
    if not host or parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ClusterConnectionError(f"scheduler address {text!r} is not of the form {accepted}")
    del port
    return text


def check_cluster_options(scheduler: str | None = None, *, scheduler_file: str | None = None,
                          tls: TLSSettings | None = None, require_encryption: bool = False,
                          cluster: str | None = None) -> str:
    """Check everything about where a job will run that can be checked without contacting anything.

    The address (given, or ``DASK_SCHEDULER_ADDRESS``) must be well formed, a
    scheduler file must exist, TLS files must exist, a job that requires
    encryption must not name a ``tcp://`` scheduler, and a cluster factory
    (``MODULE:CALLABLE``) must import as a callable (it is not called). This is what
    :func:`cluster_client` checks first; the CLI calls it before any cluster
    starts (``dimbsvm validate`` runs it too).

    Returns
    -------
    str
        Where the job would run, for messages: the address, the scheduler
        file, the cluster factory, or ``"embedded LocalCluster"``.

    Raises
    ------
    ClusterConnectionError
    """
    if cluster is not None:
        from .factory import load_factory

        if scheduler or scheduler_file:
            raise ClusterConnectionError("give one of --cluster, --scheduler and --scheduler-file")
        if tls is not None:
            raise ClusterConnectionError("TLS files were given with --cluster: the cluster factory sets up its own "
                                         "security (a Security object on the cluster or client it returns)")
        load_factory(cluster)
        return f"cluster factory {cluster}"
    env = os.environ.get("DASK_SCHEDULER_ADDRESS")
    address = scheduler or (None if scheduler_file else env)
    if address:
        where = "" if scheduler else " (from DASK_SCHEDULER_ADDRESS)"
        try:
            check_scheduler_address(address)
        except ClusterConnectionError as exc:
            raise ClusterConnectionError(f"{exc}{where}") from None
    if scheduler_file and not os.path.isfile(scheduler_file):
        raise ClusterConnectionError(f"scheduler file {scheduler_file} (--scheduler-file) does not exist")
    encrypted = bool(address) and address.strip().lower().startswith("tls://")
    if tls is not None:
        if not (address or scheduler_file):
            raise ClusterConnectionError("TLS files were given but no scheduler (--scheduler tls://HOST:PORT or "
                                         "--scheduler-file); the embedded cluster makes its own certificates when "
                                         "a job requires encryption")
        if address and not encrypted:
            raise ClusterConnectionError(f"TLS files were given but the scheduler address {address} is not tls://; "
                                         "use tls://HOST:PORT")
        tls.check()
    if require_encryption:
        if address and not encrypted:
            raise ClusterConnectionError(
                f"the job requires encryption (execution.require_encryption) but the scheduler address "
                f"{address} is not tls://")
        check_tls_support()  # an embedded cluster then uses temporary certificates
    elif encrypted:
        check_tls_support()
        if tls is None and _client_ssl_context(None) is None:
            raise no_tls_settings(address)
    if address:
        return address
    return f"scheduler file {scheduler_file}" if scheduler_file else "embedded LocalCluster"


@contextlib.contextmanager
def cluster_client(scheduler: str | None = None, *, scheduler_file: str | None = None,
                   tls: TLSSettings | None = None, require_encryption: bool = False,
                   n_workers: int | None = None, threads_per_worker: int = 1, processes: bool = True,
                   timeout: float = 20, dashboard_address: str = ":0", worker_timeout: float | None = 60,
                   cluster: str | None = None, scale_from_zero: bool = False):
    """Connect to a scheduler, make a cluster with the user's factory, or start an embedded ``LocalCluster``.

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
    dashboard_address : str, default=":0"
        Where the embedded cluster serves its dashboard (``":8787"``,
        ``"127.0.0.1:8787"``); ``":0"`` picks a free port. A remote
        scheduler serves its own.
    worker_timeout : float or None, default=60
        For a remote scheduler: seconds to wait for its first worker, before
        :func:`~dimbsvm.distributed.compat.check_workers` checks that every
        worker runs this dimbsvm (and compatible Python, scikit-learn,
        NumPy, Dask). ``None``: no check here (a caller that checks before
        each piece of work, as ``dimbsvm schedule`` does). An embedded
        cluster's workers run this process's software: not checked. Workers
        that join later are checked as they join
        (:mod:`~dimbsvm.distributed.version_gate`).
    cluster : str, default=None
        ``MODULE:CALLABLE``: a function that returns a Dask cluster or client
        (:mod:`~dimbsvm.distributed.factory`); what it returns is closed at
        the end. Such a cluster may start with no worker (scale from zero):
        work is submitted at once, and the run ends with
        :class:`NoWorkersError` if no worker has joined within
        ``worker_timeout`` seconds.
    scale_from_zero : bool, default=False
        For a remote scheduler: its cluster may have no worker until it sees
        work (an autoscaler with minimum 0, such as the Dask Kubernetes
        operator's ``DaskAutoscaler``): work is submitted without waiting,
        and ``worker_timeout`` counts from then, as for ``cluster``. A
        factory's cluster is always taken so.

    Yields
    ------
    distributed.Client

    Raises
    ------
    ClusterConnectionError
        The scheduler is unreachable, refuses the connection, or the
        connection would not be encrypted while encryption is required.
    NoWorkersError, WorkerMismatchError
        No worker joined within ``worker_timeout``, or a worker runs other
        versions (before the caller submits anything).
    SchedulerLostError
        The connection to a remote scheduler was lost while the block ran
        (raised from distributed's error: a cancelled future, a closed comm).
    """
    from distributed import Client, LocalCluster
    from distributed.worker_memory import parse_memory_limit

    from .worker_memory import spawning_workers

    check_cluster_options(scheduler, scheduler_file=scheduler_file, tls=tls, require_encryption=require_encryption,
                          cluster=cluster)
    address = scheduler or (None if scheduler_file else os.environ.get("DASK_SCHEDULER_ADDRESS"))
    if cluster is not None:
        from .factory import factory_client

        with factory_client(cluster, timeout=timeout, closing=_signals_held) as (client, where):
            with _checked_remote(client, where, require_encryption=require_encryption,
                                 worker_timeout=worker_timeout, scale_from_zero=True):
                yield client
        return
    if address or scheduler_file:
        security = tls.security() if tls is not None else None
        target = address or f"scheduler file {scheduler_file}"
        logger.info("connecting to %s", target)
        if address:
            probe_scheduler(address, timeout, _client_ssl_context(security))
        try:
            client = Client(address, scheduler_file=scheduler_file, security=security, timeout=timeout)
        except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
            # RuntimeError: distributed refuses tcp:// when a Dask config requires encryption;
            # ValueError: an address Dask cannot parse after all
            raise ClusterConnectionError(f"cannot connect to the scheduler at {target} (waited up to {timeout:g} s): "
                                         f"{_reason(exc)}") from exc
        # (the address is resolved from a scheduler file too; gone once the client closes)
        with _checked_remote(client, client.scheduler.address, require_encryption=require_encryption,
                             worker_timeout=worker_timeout, scale_from_zero=scale_from_zero):
            yield client
        return
    n_workers = n_workers or os.cpu_count() or 1
    logger.info("starting an embedded LocalCluster with %d worker(s)", n_workers)
    local_security = True if require_encryption else None  # temporary certificates
    # each worker's share of this machine's memory, as LocalCluster would give it
    memory_limit = parse_memory_limit("auto", 1, n_workers, logger=logger)
    with spawning_workers(memory_limit):  # the workers' malloc settings (see .worker_memory)
        try:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=processes,
                                   dashboard_address=dashboard_address, security=local_security,
                                   protocol="tls://" if require_encryption else None,
                                   preload=[_WORKER_SETUP] if processes else None, memory_limit=memory_limit)
        except ImportError as exc:  # cryptography missing after all
            raise ClusterConnectionError(f"cannot start an encrypted embedded cluster: {exc}; "
                                         "install it with `pip install cryptography`") from exc
        try:
            client = Client(cluster)
        except BaseException:
            with _signals_held():
                cluster.close()
            raise
        try:
            _keep_heaps_trimmed(client)
            yield client
        finally:
            with _signals_held():
                _close_embedded(client, cluster)


def _client_ssl_context(security):
    """The TLS context distributed's client would use: from ``security``, else from the Dask config (or None)."""
    from distributed.security import Security

    return (security or Security()).get_connection_args("client").get("ssl_context")


@contextlib.contextmanager
def _checked_remote(client, where: str, *, require_encryption: bool, worker_timeout, scale_from_zero: bool):
    """A cluster that is not this process's own, checked before the block and as workers join; the errors of
    losing it, or of never getting a worker, said as such. The client is closed at the end (the cluster is left
    as it was found)."""
    from .compat import check_workers, quiet_close, scheduler_lost
    from .version_gate import gate_workers, ungate_workers

    trimming, gated, watch = False, False, None
    try:
        if require_encryption and not client.scheduler.address.startswith("tls://"):
            raise ClusterConnectionError(f"the job requires encryption but {where} is not tls://")
        if worker_timeout is not None:
            # a cluster that scales from zero gets its first worker once it sees work: not waited for here
            check_workers(client, timeout=worker_timeout, scheduler=where, wait=not scale_from_zero)
            if scale_from_zero:
                watch = _FirstWorkerWatch(client, worker_timeout, where).start()
        # workers that join later (or, without a check here, any worker) are checked as they register
        gate_workers(client, environment.software_record())
        gated = True
        trimming = _keep_heaps_trimmed(client)
        yield
    except BaseException as exc:  # (closing the client cancels the run's futures: CancelledError)
        if watch is not None and watch.expired:
            raise NoWorkersError(watch.message) from exc
        if isinstance(exc, Exception) and scheduler_lost(client, exc):
            raise SchedulerLostError(f"lost the scheduler at {where} ({_lost_reason(exc)})") from exc
        raise
    finally:
        if watch is not None:
            watch.stop()
        with _signals_held(), quiet_close(client):
            if trimming:  # the cluster is the user's: left as it was found
                _stop_trimming(client)
            if gated:
                ungate_workers(client)
            client.close()


class _FirstWorkerWatch:
    """Ends a run on a cluster that scales from zero if no worker has joined within ``timeout`` seconds.

    Work is submitted before any worker is there (so an autoscaler sees it);
    a cluster that never gets one would hold the run forever. The watch
    closes the client, which stops the run, and :attr:`message` says why.
    """

    def __init__(self, client, timeout: float, where: str):
        self.client, self.timeout, self.where = client, float(timeout), where
        self.expired = False
        self._stopped = threading.Event()
        self.message = (f"no worker joined {where} within {self.timeout:g} s of the work being submitted; the "
                        "cluster did not scale up (its manager's logs say why: a queue, a quota, an image that "
                        "fails to start); --worker-timeout waits longer")

    def start(self) -> "_FirstWorkerWatch":
        threading.Thread(target=self._watch, name="dimbsvm-first-worker", daemon=True).start()
        return self

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stopped.wait(0.5):
            try:
                if self.client.scheduler_info(n_workers=-1).get("workers"):
                    return
            except Exception:  # noqa: BLE001 - a client closing meanwhile: the run says why
                return
            if time.monotonic() > deadline:
                self.expired = True
                logger.error("%s", self.message)
                with contextlib.suppress(Exception):
                    self.client.close()
                return

    def stop(self) -> None:
        self._stopped.set()


def _keep_heaps_trimmed(client) -> bool:
    """Register :class:`~dimbsvm.distributed.heap_trim.HeapTrim` on the cluster's workers; whether it was."""
    from .heap_trim import HeapTrim

    try:
        client.register_plugin(HeapTrim())
    except Exception as exc:  # noqa: BLE001 - a cluster that refuses plugins runs the job without it
        logger.warning("the workers' heap trimming could not be registered (%s); freed memory a worker's heap "
                       "keeps may pause it", exc)
        return False
    return True


def _stop_trimming(client) -> None:
    from .heap_trim import HeapTrim

    try:
        client.unregister_worker_plugin(HeapTrim.name)
    except Exception:  # noqa: BLE001 - a cluster going away keeps nothing
        logger.debug("could not unregister the heap trimming", exc_info=True)


#: Run in every embedded worker process as it starts (see :mod:`dimbsvm.distributed._worker_setup`).
_WORKER_SETUP = "dimbsvm.distributed._worker_setup"


def _close_embedded(client, cluster, timeout: float = 30) -> None:
    """Shut an embedded cluster down in the order that keeps it quiet.

    1. Each worker stops its heartbeats and waits for one in flight to be
       answered. A worker closing closes its connections to the scheduler,
       and a heartbeat still waiting on one of them failed with "Failed to
       communicate with scheduler during heartbeat" and a traceback (more
       often under load, when heartbeats are slow).
    2. The workers close, while the scheduler still answers their goodbyes.
    3. The client, then the scheduler.
    """
    try:
        client.run(_stop_heartbeats)
    except Exception:  # noqa: BLE001 - a worker already gone has nothing to stop
        logger.debug("could not stop the workers' heartbeats before shutdown", exc_info=True)
    try:
        cluster.scale(0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not client.scheduler_info(n_workers=-1).get("workers"):
                    break
            except Exception:  # noqa: BLE001 - the scheduler is going away: nothing left to wait for
                break
            time.sleep(0.1)
    finally:
        try:
            client.close()
        finally:
            cluster.close()


async def _stop_heartbeats(dask_worker=None, timeout: float = 5.0) -> None:
    """On a worker: stop the heartbeat and wait until no call to the scheduler is in flight."""
    import asyncio

    heartbeat = dask_worker.periodic_callbacks.get("heartbeat")
    if heartbeat is not None:
        heartbeat.stop()
    address = dask_worker.scheduler.address
    deadline = time.monotonic() + timeout
    while dask_worker.rpc.occupied.get(address) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def _signals_held():
    """Ignore SIGINT/SIGTERM while a cluster shuts down (a second Ctrl-C would leave it half closed)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in saved:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _lost_reason(exc: BaseException) -> str:
    """Why the scheduler was lost, in a few words.

    Distributed's own messages name a task key (a cancelled future) or a
    connector object (a closed comm): neither helps the user.
    """
    from concurrent.futures import CancelledError

    if isinstance(exc, CancelledError):
        return "its connection closed mid-run"
    return re.sub(r"^in <[^>]*>: ", "", _reason(exc))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())
