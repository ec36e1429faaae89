"""Can this cluster run dimbsvm's tasks? Checked once, before any work is submitted.

A task is a dimbsvm function pickled by reference: a worker runs whatever
dimbsvm, scikit-learn and NumPy it imports. A worker without dimbsvm fails
its first task, an older dimbsvm rejects a newer keyword, an older
scikit-learn rejects a parameter value - errors that say nothing about
versions, and come after the job started. So before submitting anything
:func:`check_workers`

1. waits (a bounded time) for at least one worker: a scheduler nobody joins
   (workers not started, or whose ``--preload`` module failed to import)
   would otherwise hold the job forever;
2. compares the scheduler's Python, Dask, distributed and cloudpickle with
   this process's (:data:`SCHEDULER_RULES`, from ``Client.get_versions``);
3. runs :func:`dimbsvm.environment.software_record` on every worker
   (``Client.run``; sent by value, so a worker that cannot import dimbsvm
   still answers, with its import error) and compares each answer with this
   process's record by :data:`RULES`.

The first difference becomes one line naming the worker, the package and
both versions. The workers' records stay with the client for the run's
record (:func:`worker_versions`).

:func:`scheduler_lost` tells an error caused by losing the scheduler in the
middle of a job from any other, for :func:`~dimbsvm.distributed.cluster_client`
to raise :class:`~dimbsvm.distributed.client.SchedulerLostError`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import weakref

from .. import environment
from ..exceptions import DimbsvmError, one_line
from .cluster_errors import ClusterConnectionError, NoWorkersError, WorkerMismatchError

__all__ = ["RULES", "SCHEDULER_RULES", "check_workers", "connected", "differences", "quiet_close", "scheduler_lost",
           "worker_versions"]

logger = logging.getLogger(__name__)

#: How closely a worker's software must match this process's: the same version ("exact"), the same
#: major.minor ("minor") or the same major version ("major"). dimbsvm must also come from the same
#: source files (its build). Python: code objects pickled by value only load on the same minor version.
#: scikit-learn renames and retires parameter values between minor releases; NumPy's pickles changed
#: with its major version; Dask's scheduler, workers and clients speak one protocol version.
RULES = {"dimbsvm": "exact", "python": "minor", "scikit-learn": "minor", "numpy": "major", "scipy": "major",
         "zarr": "major", "dask": "exact", "distributed": "exact", "cloudpickle": "major"}

#: What the scheduler must share with this process: it unpickles task graphs, but never dimbsvm's code.
SCHEDULER_RULES = {"python": "minor", "dask": "exact", "distributed": "exact", "cloudpickle": "major"}

#: The least time given to every worker to answer (each imports dimbsvm and scikit-learn first).
PROBE_TIMEOUT = 60.0

#: The reason distributed gives futures cancelled because the client lost its scheduler.
LOST_REASON = "scheduler-connection-lost"

# the workers' records of the last check, per client (see worker_versions)
_checked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# cloudpickle's by-value registry is global to the process: one registration at a time
_by_value_lock = threading.Lock()


def check_workers(client, *, timeout: float = 60.0, scheduler: str | None = None, wait: bool = True) -> dict:
    """Raise unless the cluster has a worker and every worker runs this process's software.

    Parameters
    ----------
    client : distributed.Client
    timeout : float, default=60
        Seconds to wait for the first worker to join.
    scheduler : str, default=None
        The scheduler's name for messages (default: its address).
    wait : bool, default=True
        ``False``: a cluster that has no worker yet is not waited for (one
        that scales from zero starts workers once it sees work); only the
        scheduler is checked, and the workers as they join
        (:mod:`~dimbsvm.distributed.version_gate`).

    Returns
    -------
    dict
        ``{worker address: software record}``
        (:func:`dimbsvm.environment.software_record`) of the workers that answered.

    Raises
    ------
    NoWorkersError
        No worker joined within ``timeout``, or none answered the check.
    WorkerMismatchError
        The scheduler or a worker runs other versions; the message names the
        first (worker, package, both versions) and counts the rest, which the
        log lists at INFO.
    ClusterConnectionError
        The workers did not answer within :data:`PROBE_TIMEOUT` (or ``timeout``, if longer).
    """
    where = scheduler or client.scheduler.address
    if wait:
        _wait_for_a_worker(client, timeout, where)
    try:
        ours, records, problems = _compare(client, where, max(timeout, PROBE_TIMEOUT))
    except NoWorkersError:
        if wait:
            raise
        # none yet, or those there left meanwhile (a cluster scaling down): the scheduler now, workers as they join
        ours = environment.software_record()
        problems = _scheduler_differences(client, ours, where)
        if problems:
            raise WorkerMismatchError(problems[0]) from None
        _checked[client] = {}
        logger.info("%s has no worker yet: each is checked as it joins", where)
        return {}
    if problems:
        # Once more before failing: a source file saved between this process's hash and a worker's (a
        # checkout being edited) differs only once; the workers have imported dimbsvm by now, so it is quick.
        ours, records, problems = _compare(client, where, max(timeout, PROBE_TIMEOUT))
    if problems:
        for line in problems:
            logger.info("version check: %s", line)
        more = f" ({len(problems) - 1} more difference(s); -v lists them)" if len(problems) > 1 else ""
        raise WorkerMismatchError(f"{problems[0]}{more}")
    names = _worker_names(client)
    _checked[client] = {address: (names.get(address, address), record) for address, record in records.items()}
    logger.info("%d worker(s) of %s run dimbsvm %s (build %s) like this client", len(records), where,
                ours["dimbsvm"]["version"], ours["dimbsvm"]["build"])
    return records


def worker_versions(client) -> dict:
    """The software each worker runs, by worker name, for a run's record (``metrics.json``).

    The records of the last :func:`check_workers` on ``client`` (the workers a
    job started with); without one (an embedded cluster, a client made
    elsewhere), the workers are asked now.

    Returns
    -------
    dict
        ``{worker name: {"python": ..., "dimbsvm": ..., "dimbsvm_build": ..., package: version}}``;
        empty without a client.
    """
    if client is None:
        return {}
    checked = _checked.get(client)
    if checked is None:
        names = _worker_names(client)
        answers = _probe(client, PROBE_TIMEOUT, client.scheduler.address)
        checked = {address: (names.get(address, address), answer) for address, answer in answers.items()}
    return {str(name): _flat(record) for name, record in sorted(checked.values(), key=lambda item: str(item[0]))}


def differences(ours: dict, theirs: dict, rules=None, *, who: str = "every worker") -> list[str]:
    """How a software record differs from ours, worst first, each as a phrase about "theirs".

    Parameters
    ----------
    ours, theirs : dict
        :func:`dimbsvm.environment.software_record` of this process and of a worker.
    rules : dict, default=None
        ``{package: "exact" | "minor" | "major"}``; default :data:`RULES`.
    who : str, default="every worker"
        Who needs the right version, for the phrase.

    Returns
    -------
    list of str

    Examples
    --------
    >>> ours = {"python": "3.11.7", "dimbsvm": {"version": "0.1.0", "build": "a", "path": "/x", "error": None},
    ...         "packages": {"scikit-learn": "1.9.1", "numpy": "2.3.0"}}
    >>> differences(ours, ours)
    []
    >>> older = {**ours, "packages": {"scikit-learn": "1.5.2", "numpy": "2.1.0"}}
    >>> differences(ours, older)
    ['has scikit-learn 1.5.2 where this client has 1.9.1: every worker needs scikit-learn 1.9.x']
    >>> differences(ours, {**ours, "dimbsvm": {"version": "0.0.1", "build": "b", "path": "/y", "error": None}})
    ['has dimbsvm 0.0.1 where this client has 0.1.0: every worker needs dimbsvm 0.1.0']
    """
    rules = RULES if rules is None else rules
    found = []
    if "dimbsvm" in rules:
        found += _dimbsvm_difference(ours["dimbsvm"], theirs["dimbsvm"], who)
    versions = [("python", ours["python"], theirs["python"])] if "python" in rules else []
    versions += [(name, version, theirs["packages"].get(name, "not installed"))
                 for name, version in ours["packages"].items() if name in rules]
    for name, mine, other in versions:
        if _differs(rules[name], mine, other):
            found.append(f"has {name} {other} where this client has {mine}: {who} needs "
                         f"{name} {_wanted(rules[name], mine)}")
    return found


def scheduler_lost(client, exc: BaseException) -> bool:
    """Whether ``exc`` comes from ``client`` losing its scheduler.

    True for futures distributed cancelled because the connection was lost
    (in ``exc`` or its causes), and for any other error that is not
    dimbsvm's own while the client is not connected (a call that needed the
    scheduler: ``CommClosedError``, ``OSError``, a timeout).

    Parameters
    ----------
    client : distributed.Client or None
        The client the error reached; ``None``: judge by the error alone.
    exc : BaseException

    Returns
    -------
    bool

    Examples
    --------
    >>> from concurrent.futures import CancelledError
    >>> lost = CancelledError("key cancelled")
    >>> lost.reason = "scheduler-connection-lost"
    >>> scheduler_lost(None, lost), scheduler_lost(None, ValueError("bad C"))
    (True, False)
    """
    from concurrent.futures import CancelledError

    seen, err = set(), exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, CancelledError):
            reasons = [getattr(err, "reason", None)] + [getattr(e, "reason", None) for e in getattr(err, "errors", ())]
            if LOST_REASON in reasons:
                return True
        err = err.__cause__ or err.__context__
    if client is None or isinstance(exc, DimbsvmError) or not isinstance(exc, Exception):
        return False
    return not connected(client)


def connected(client) -> bool:
    """Whether ``client`` is connected to its scheduler now."""
    try:
        comm = client.scheduler_comm
        return client.status == "running" and comm is not None and not comm.closed()
    except Exception:  # noqa: BLE001 - a client half torn down is not connected
        return False


@contextlib.contextmanager
def quiet_close(client):
    """Silence distributed's loggers while a client that lost its scheduler closes.

    Closing cancels the client's attempt to reconnect, and distributed logs
    that cancellation as an error with a traceback of some thirty lines; the
    loss is reported once, by the caller. A connected client closes as usual.
    """
    if connected(client):
        yield
        return
    names = ["distributed"] + [name for name in logging.root.manager.loggerDict if name.startswith("distributed.")]
    saved = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _compare(client, where: str, timeout: float):
    """``(our record, {address: worker record}, [difference, ...])`` of the scheduler and every worker."""
    ours = environment.software_record()
    problems = _scheduler_differences(client, ours, where)
    answers = _probe(client, timeout, where)
    names = _worker_names(client)
    records = {}
    for address, answer in sorted(answers.items()):
        label = f"worker {address}" + (f" ({names[address]})" if names.get(address, address) != address else "")
        if isinstance(answer, BaseException):  # a worker that left meanwhile; the others decide
            logger.info("%s did not answer the version check: %s", label, one_line(answer))
            continue
        records[address] = answer
        problems += [f"{label} {text}" for text in differences(ours, answer)]
    if not records:
        raise NoWorkersError(f"no worker of scheduler {where} answered the version check")
    return ours, records, problems


def record_worker(client, address: str, name: str, record: dict) -> None:
    """Add a worker checked as it joined to :func:`worker_versions` of ``client``."""
    _checked.setdefault(client, {})[address] = (name, record)


def _wait_for_a_worker(client, timeout: float, where: str) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError as exc:
        if not connected(client):
            raise  # the scheduler went away meanwhile: cluster_client reports that
        raise NoWorkersError(
            f"no worker joined scheduler {where} within {timeout:g} s; start workers (`dask worker {where} --nanny`) "
            "or read their logs: a worker whose --preload or --preload-nanny module fails to import (e.g. an older "
            "dimbsvm without it) never joins; --worker-timeout waits longer") from exc


def _scheduler_differences(client, ours: dict, where: str) -> list[str]:
    """The scheduler's differences by :data:`SCHEDULER_RULES`, from distributed's own version report."""
    scheduler = client.get_versions()["scheduler"]
    python = ".".join(str(scheduler.get("host", {}).get("python", "unknown")).split(".")[:3])
    packages = scheduler.get("packages", {})
    theirs = {"python": python, "dimbsvm": ours["dimbsvm"],
              "packages": {name: packages.get(name) or "not installed" for name in ours["packages"]}}
    return [f"scheduler {where} {text}" for text in differences(ours, theirs, SCHEDULER_RULES, who="the scheduler")]


def _probe(client, timeout: float, where: str) -> dict:
    """``{address: software record or exception}`` from every worker."""
    try:
        with sent_by_value(environment):
            return client.run(environment.software_record_in_thread, list(environment.CLUSTER_PACKAGES),
                              on_error="return", callback_timeout=timeout)
    except TimeoutError as exc:
        if not connected(client):
            raise
        raise ClusterConnectionError(f"the workers of scheduler {where} did not answer the version check within "
                                     f"{timeout:g} s") from exc


@contextlib.contextmanager
def sent_by_value(*modules):
    """Pickle the functions and classes of ``modules`` by value (their code travels) while this block runs.

    By reference, a worker would have to import dimbsvm to load the check -
    the very thing being checked.
    """
    import cloudpickle

    with _by_value_lock:
        added = [module for module in modules
                 if module.__name__ not in cloudpickle.list_registry_pickle_by_value()]
        for module in added:
            cloudpickle.register_pickle_by_value(module)
        try:
            yield
        finally:
            for module in added:
                cloudpickle.unregister_pickle_by_value(module)


def _worker_names(client) -> dict:
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return {address: str(info.get("name", address)) for address, info in workers.items()}


def _dimbsvm_difference(ours: dict, theirs: dict, who: str) -> list[str]:
    if theirs.get("error"):
        return [f"cannot import dimbsvm ({theirs['error']}): {who} needs dimbsvm {ours['version']}"]
    if theirs["version"] != ours["version"]:
        return [(f"has dimbsvm {theirs['version']} where this client has {ours['version']}: {who} needs "
                 f"dimbsvm {ours['version']}")]
    if None not in (theirs["build"], ours["build"]) and theirs["build"] != ours["build"]:
        return [(f"has dimbsvm {theirs['version']} from other source files (build {theirs['build']} in "
                 f"{theirs['path']}; this client: build {ours['build']} in {ours['path']}): {who} needs "
                 "this client's dimbsvm")]
    return []


def _release(version: str) -> tuple:
    """The leading numbers of a version: ``"2.0.0rc1"`` -> ``(2, 0, 0)``; ``"not installed"`` -> ``()``."""
    match = re.match(r"\d+(?:\.\d+)*", str(version))
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def _differs(rule: str, mine: str, other: str) -> bool:
    if rule == "exact":
        return mine != other
    n = {"major": 1, "minor": 2}[rule]
    return not _release(other) or _release(mine)[:n] != _release(other)[:n]


def _wanted(rule: str, version: str) -> str:
    if rule == "exact":
        return version
    n = {"major": 1, "minor": 2}[rule]
    return ".".join(str(part) for part in _release(version)[:n]) + ".x"


def _flat(record) -> dict:
    """One worker's record as ``metrics.json`` keeps the client's: ``{"python": ..., package: version}``."""
    if isinstance(record, BaseException):
        return {"error": one_line(record)}
    dimbsvm = record["dimbsvm"]
    return {"python": record["python"], "dimbsvm": dimbsvm["version"] or f"cannot import: {dimbsvm['error']}",
            "dimbsvm_build": dimbsvm["build"], **record["packages"]}

