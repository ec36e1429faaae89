"""The CLI's one line for an error: what failed, where (a path, a URL and its endpoint), and what to do.

:func:`describe_error` is for the errors a user causes (dimbsvm's own,
``OSError``, ``ValueError``); :func:`describe_unexpected` for any other,
which is a bug unless an object-storage client raised it.
"""

from __future__ import annotations

import errno
import os

from .exceptions import DimbsvmError, one_line

__all__ = ["describe_error", "describe_unexpected"]


def describe_error(exc: BaseException, args) -> str:
    """The line (after ``error:``) for a user's error: object storage's with its URL and endpoint, a full disk
    with where the command wrote, an ``OSError`` with its path."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return _no_space(exc, args)
    remote = None if isinstance(exc, DimbsvmError) else _describe_remote(exc, args)
    return remote or _described(exc)


def describe_unexpected(exc: BaseException, args) -> tuple[str, int]:
    """``(line, exit status)`` for any other error: an object-storage client's (2), else a bug (1)."""
    from .store.remote_errors import from_storage_client

    if from_storage_client(exc):
        return f"error: {_describe_remote(exc, args) or one_line(exc)}", 2
    return (f"error: unexpected {type(exc).__name__}: {one_line(exc)} (this is probably a bug in dimbsvm; rerun "
            "with -v for the traceback and report it)", 1)


def _describe_remote(exc: BaseException, args) -> str | None:
    """An object-storage error said with the URLs of this command and the endpoint (None: not such an error)."""
    from .store.remote_errors import describe_remote_error

    return describe_remote_error(exc, _command_urls(args))


def _command_urls(args) -> list:
    """The URLs a command names: its arguments', and its job file's data source."""
    from .store.location import is_url

    values = []
    for value in vars(args).values():
        values.extend(value if isinstance(value, list) else [value])
    job = getattr(args, "job", None)
    if isinstance(job, str) and os.path.isfile(job):
        try:
            import yaml

            with open(job, encoding="utf-8") as file:
                source = (yaml.safe_load(file) or {}).get("data", {}).get("source")
            values.append(source)
        except Exception:  # noqa: BLE001 - only for naming URLs in a message already being written
            pass
    cluster_schemes = ("tcp://", "tls://", "inproc://", "ucx://")  # a scheduler's address is no data URL
    return [str(value) for value in values if is_url(str(value)) and not str(value).startswith(cluster_schemes)]


def _no_space(exc: OSError, args) -> str:
    """A full disk said with where the command was writing: the file, else its output (or a URL's staging)."""
    from .store.location import is_url

    if exc.filename is not None:
        return f"no space left on device while writing {exc.filename}; free space there and run again"
    out = getattr(args, "out", None) or getattr(args, "dest", None)
    if args.verb == "run" and is_url(str(out)):
        from .jobs.remote_run_dir import staging_dir

        return (f"no space left on device while writing {staging_dir(out)}, the local staging directory of {out}; "
                "free space there, or set DIMBSVM_STAGING_DIR to stage runs elsewhere, and run again (it resumes)")
    if out is not None and not is_url(str(out)):
        return f"no space left on device while writing {out}; free space there, or choose another --out"
    if args.verb == "run":
        return "no space left on device while writing the run directory under runs/; free space there, or give --out"
    import tempfile

    return (f"no space left on device (writing {out or 'the output'}, staged in {tempfile.gettempdir()}); free "
            "space there, or set TMPDIR")


def _described(exc: BaseException) -> str:
    """One line for a user-caused error; OSErrors name the path and the reason."""
    if isinstance(exc, OSError) and not isinstance(exc, DimbsvmError) and exc.strerror:
        paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
        return f"{paths}: {exc.strerror}" if paths else exc.strerror
    return one_line(exc)
