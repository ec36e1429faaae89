"""A cluster made by the user's own function: ``--cluster MODULE:CALLABLE`` (and ``execution.cluster``).

People get Dask clusters from dask-jobqueue (``SLURMCluster``), the Dask
Kubernetes operator (``KubeCluster``), dask-gateway (``Gateway().new_cluster``),
Coiled, or an adaptive ``LocalCluster``. Rather than one flag per manager,
dimbsvm imports ``MODULE`` (the working directory first, as ``python -m``
does), calls ``CALLABLE()`` with no argument, and runs on what it returns:
a cluster object (anything ``distributed.Client`` accepts: it has a
``scheduler_address``) or a ``distributed.Client``. dimbsvm made the call, so
it closes what it got when the work ends. :func:`load_factory` checks the
name without calling anything (``dimbsvm validate``, before any cluster
starts); :func:`factory_client` calls it.

Examples of factories for each manager are in ``deploy/clusters.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import sys

from .cluster_errors import ClusterConnectionError

__all__ = ["factory_client", "load_factory"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def load_factory(spec: str):
    """The callable ``spec`` (``MODULE:CALLABLE``) names, imported but not called.

    Raises
    ------
    ClusterConnectionError
        ``spec`` is not ``MODULE:CALLABLE``, the module cannot be imported,
        it has no such attribute, or the attribute is not callable: one line
        naming which.
    """
    module_name, _, attribute = str(spec).partition(":")
    if not (_NAME.match(module_name) and _NAME.match(attribute)):
        raise ClusterConnectionError(f"--cluster {spec!r} is not MODULE:CALLABLE (e.g. mycluster:make, a function "
                                     "make() in mycluster.py that returns a Dask cluster or client)")
    try:
        with _working_directory_importable():
            module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's module is one line naming it
        raise ClusterConnectionError(f"cannot import {module_name} (--cluster {spec}): "
                                     f"{type(exc).__name__}: {exc}") from exc
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ClusterConnectionError(f"{module_name} has no {attribute} (--cluster {spec})")
        target = getattr(target, part)
    if not callable(target):
        raise ClusterConnectionError(f"{module_name}:{attribute} (--cluster) is a {type(target).__name__}, not a "
                                     "function that returns a Dask cluster or client")
    return target


@contextlib.contextmanager
def factory_client(spec: str, *, timeout: float = 20, closing=contextlib.nullcontext):
    """Call the factory ``spec`` names; yield a ``distributed.Client`` of what it returned, closed at the end.

    Parameters
    ----------
    spec : str
        ``MODULE:CALLABLE``.
    timeout : float, default=20
        Seconds to connect to a returned cluster's scheduler.
    closing : callable, default=contextlib.nullcontext
        A context manager the closing runs in (the CLI holds Ctrl-C and
        SIGTERM off, so that a cluster's jobs are not left behind half
        cancelled).

    Yields
    ------
    (distributed.Client, str)
        The client, and where it runs for messages (the factory and the
        scheduler's address).

    Raises
    ------
    ClusterConnectionError
        The factory cannot be loaded, raises, or returns neither a cluster
        nor a client; or its scheduler cannot be reached.
    """
    from distributed import Client

    factory = load_factory(spec)
    logger.info("making the cluster with %s", spec)
    try:
        made = factory()
    except Exception as exc:  # noqa: BLE001 - the factory is the user's: its failure is one line
        raise ClusterConnectionError(f"the cluster factory {spec} raised {type(exc).__name__}: {exc}") from exc
    cluster = None
    if isinstance(made, Client):
        client = made
    elif hasattr(made, "scheduler_address"):
        cluster = made
        try:
            client = Client(cluster, timeout=timeout)
        except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
            _close(made, spec)
            raise ClusterConnectionError(f"cannot connect to the cluster {spec} made "
                                         f"({made.scheduler_address}): {exc}") from exc
    else:
        _close(made, spec)
        raise ClusterConnectionError(f"the cluster factory {spec} returned a {type(made).__name__}, not a Dask "
                                     "cluster (with a scheduler_address) or a distributed.Client")
    try:
        yield client, f"{spec} ({client.scheduler.address})"
    finally:
        with closing():
            _close(client, spec)
            if cluster is not None:
                _close(cluster, spec)


def _close(thing, spec) -> None:
    close = getattr(thing, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - the run's own outcome is what is reported
        logger.warning("closing what %s made failed: %s", spec, exc)


@contextlib.contextmanager
def _working_directory_importable():
    """The working directory first on ``sys.path`` while importing, as ``python -m`` has it."""
    added = "" not in sys.path
    if added:
        sys.path.insert(0, "")
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove("")
