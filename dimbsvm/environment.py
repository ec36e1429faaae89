"""The machine and software a benchmark ran on, for report headers."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform

__all__ = ["PACKAGES", "machine_info", "package_versions", "peak_rss_bytes", "utc_now"]

#: Distributions whose versions every report records.
PACKAGES = ("dimbsvm", "numpy", "scipy", "scikit-learn", "imbalanced-learn", "dask", "distributed",
            "pandas", "scikit-posthocs", "statsmodels", "matplotlib")


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
