"""The machine and software a benchmark ran on, for report headers, and the software a cluster's workers run.

This module uses the standard library only: :func:`software_record` is sent by
value to Dask workers (:mod:`dimbsvm.distributed.compat`) and must run on a
worker that cannot import dimbsvm, to say so.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib
import importlib.metadata
import os
import platform

__all__ = ["CLUSTER_PACKAGES", "PACKAGES", "machine_info", "package_versions", "peak_rss_bytes", "software_record",
           "software_record_in_thread", "source_build", "utc_now"]

#: Distributions whose versions every report records.
PACKAGES = ("dimbsvm", "numpy", "scipy", "scikit-learn", "imbalanced-learn", "dask", "distributed",
            "pandas", "scikit-posthocs", "statsmodels", "matplotlib")

#: Distributions whose versions :func:`software_record` reads (what a job's tasks use on a worker).
CLUSTER_PACKAGES = ("numpy", "scipy", "scikit-learn", "dask", "distributed", "cloudpickle", "zarr", "pynndescent",
                    "skops")


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def peak_rss_bytes() -> int:
    """Peak resident memory of this process since it started (Linux ``VmHWM``), in bytes.

    Not ``getrusage().ru_maxrss``: Linux carries a parent's peak into a child
    across fork and exec, so a Dask worker spawned by a 1.2 GB client process
    reports 1.2 GB there while its own peak is 62 MB (measured). ``ru_maxrss``
    is the fallback where ``/proc`` is absent.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    import sys

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def machine_info() -> dict:
    """Platform, processor, logical CPU count and physical memory of this machine.

    Examples
    --------
    >>> sorted(machine_info())
    ['cpu_count', 'memory_gb', 'platform', 'processor', 'python']
    """
    return {
        "platform": platform.platform(),
        "processor": _processor_name(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
    }


def package_versions(names=PACKAGES) -> dict:
    """``{distribution: version}``; ``"not installed"`` for missing ones.

    dimbsvm run from a checkout without ``pip install`` reports its
    ``__version__``.
    """
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = _module_version(name)
    return versions


def _module_version(name: str) -> str:
    module = {"dimbsvm": "dimbsvm"}.get(name)
    if module is None:
        return "not installed"
    try:
        return getattr(__import__(module), "__version__", "unknown") + " (source tree)"
    except ImportError:
        return "not installed"


def _processor_name() -> str:
    # platform.processor() is often empty on Linux; /proc/cpuinfo has the model name.
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def source_build(package_dir) -> str:
    """A short hash of the ``.py`` files under ``package_dir`` (names and contents).

    Two installations with the same version but edited, patched or
    differently checked-out sources differ here. Only ``.py`` files count:
    data files and byte code differ between a checkout and a wheel of the
    same source.

    Returns
    -------
    str
        Twelve hexadecimal digits.

    Examples
    --------
    >>> import dimbsvm, os
    >>> build = source_build(os.path.dirname(dimbsvm.__file__))
    >>> len(build), build == source_build(os.path.dirname(dimbsvm.__file__))
    (12, True)
    """
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")  # a fixed order: the same files, the same hash
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, package_dir).replace(os.sep, "/").encode() + b"\0")
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()[:12]


def software_record(packages=CLUSTER_PACKAGES) -> dict:
    """What this process runs: Python, the dimbsvm it imports, and the versions of ``packages``.

    dimbsvm is imported (not looked up in the installed metadata): a worker
    runs what it imports, which a directory on ``PYTHONPATH`` can shadow, and
    an import that fails (a missing dependency) is what a task would meet.

    Parameters
    ----------
    packages : sequence of str, default=CLUSTER_PACKAGES
        Distribution names; their installed versions (``"not installed"``
        for missing ones).

    Returns
    -------
    dict
        ``{"python": "3.11.7", "dimbsvm": {"version", "build", "path",
        "error"}, "packages": {name: version}}``; ``error`` is ``None``
        unless dimbsvm cannot be imported (then the others are ``None``);
        ``build`` is :func:`source_build` of dimbsvm's directory (``None``
        where its files cannot be read).

    Examples
    --------
    >>> record = software_record(["numpy"])
    >>> sorted(record), sorted(record["dimbsvm"]), record["dimbsvm"]["error"]
    (['dimbsvm', 'packages', 'python'], ['build', 'error', 'path', 'version'], None)
    """
    record = {"python": platform.python_version(), "dimbsvm": _dimbsvm_record(), "packages": {}}
    for name in packages:
        try:
            record["packages"][name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            record["packages"][name] = "not installed"
    return record


async def software_record_in_thread(packages=CLUSTER_PACKAGES) -> dict:
    """:func:`software_record` in a thread, for ``Client.run``.

    ``Client.run`` calls a plain function in the worker's event loop, which
    would stop answering the scheduler while dimbsvm and scikit-learn are
    imported; a coroutine is awaited there instead, so the import runs beside it.
    """
    import asyncio

    return await asyncio.to_thread(software_record, packages)


def _dimbsvm_record() -> dict:
    try:
        # The package is what is probed here, not a dependency of this module: imported by name.
        package = importlib.import_module("dimbsvm")
    except Exception as exc:  # noqa: BLE001 - any import failure is what a task on this worker would meet
        text = " ".join(str(exc).split()) or type(exc).__name__
        return {"version": None, "build": None, "path": None, "error": f"{type(exc).__name__}: {text}"}
    if getattr(package, "__file__", None) is None:  # a directory named dimbsvm without __init__.py
        where = ", ".join(getattr(package, "__path__", [])) or "?"
        return {"version": None, "build": None, "path": where, "error": f"{where} is not a dimbsvm installation"}
    path = os.path.dirname(os.path.abspath(package.__file__))
    try:
        build = source_build(path)
    except OSError:  # sources that cannot be read (a zip, no permission): the version alone is compared
        build = None
    return {"version": str(getattr(package, "__version__", "unknown")), "build": build, "path": path,
            "error": None}
