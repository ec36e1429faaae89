"""Exclusive file locks between processes, and file writes that a crash cannot tear.

:func:`exclusive_lock` takes an ``fcntl.flock`` lock on a lock file. The
kernel drops a flock lock when its holder dies, however it dies, so a lock
file left behind by a killed process is free: nothing ever has to guess
whether a lock is stale. The holder writes its pid into the file, which only
serves the message a refused process gets.

:func:`atomic_file` (and :func:`write_atomic`) write under a temporary name
unique to the writer, flush it to disk and rename it over the target: a
reader, or the next process after a crash, sees the old file or the whole new
one. A failed write (a full disk) removes its temporary file and raises the
caller's error class naming the path.

Only local file systems are supported (``flock`` is not reliable over NFS).
This module imports nothing of dimbsvm but its exceptions, so every part of
the package can use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import time
from pathlib import Path

from .exceptions import DimbsvmError

__all__ = ["HeldLock", "LockHeld", "atomic_file", "exclusive_lock", "fsync_dir", "temporary_name", "write_atomic"]

logger = logging.getLogger(__name__)


class LockHeld(DimbsvmError):
    """Another process holds the lock; ``pid`` is its process id when known (else None)."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class HeldLock:
    """An exclusive lock this process holds on a lock file, until :meth:`release`.

    Also a context manager that releases (and removes the lock file) on exit.
    """

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        """Whether the lock is still held (not yet released)."""
        return self._fd is not None

    def release(self, *, remove: bool = True) -> None:
        """Release the lock; with ``remove``, delete the lock file first. Releasing twice does nothing.

        The file is removed while the lock is still held and only if it is
        still the locked file, so a process that opened it meanwhile finds
        it gone when it gets the lock, and tries again on a new one.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if remove and _same_file(fd, self.path):
                with contextlib.suppress(OSError):
                    self.path.unlink()
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"HeldLock({str(self.path)!r}, held={self.held})"


def exclusive_lock(path, what: str, *, wait: bool = False, hint: str = "wait for it to finish") -> HeldLock:
    """Take an exclusive lock on the lock file ``path`` (created if missing).

    Parameters
    ----------
    path : str or path
        The lock file. Its directory must exist.
    what : str
        What the lock protects, for the message (e.g. ``"run directory runs/x"``).
    wait : bool, default=False
        Wait for the holder to release it; by default a held lock is refused at once.
    hint : str, default="wait for it to finish"
        What the refused user can do, appended to the message.

    Returns
    -------
    HeldLock

    Raises
    ------
    LockHeld
        Another process holds the lock (only without ``wait``): "<what> is
        being written by another dimbsvm process (pid N); <hint>".
    DimbsvmError
        The lock file cannot be created or opened (naming it and why).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / ".x.lock"
    >>> with exclusive_lock(path, "x") as lock:
    ...     lock.held
    True
    >>> path.exists()
    False
    """
    path = Path(path)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise DimbsvmError(f"{what}: cannot create its lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            pid = _holder_pid(fd)
            os.close(fd)
            holder = f"pid {pid}" if pid else "pid unknown"
            raise LockHeld(f"{what} is being written by another dimbsvm process ({holder}); {hint}", pid) from None
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            break
        # the holder removed the file while we waited for it: the lock is on a file nobody else will open
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:  # a full disk: the lock holds all the same, only the pid is not shown to others
        logger.debug("lock file %s: pid not written (%s)", path, exc)
    return HeldLock(path, fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _holder_pid(fd: int, patience: float = 0.5) -> int | None:
    """The pid the holder wrote, waiting briefly: a holder writes it just after taking the lock."""
    deadline = time.monotonic() + patience
    while (pid := _read_pid(fd)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return pid


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def fsync_dir(directory) -> None:
    """Flush a directory's entries (a rename into it) to disk; a file system that cannot is ignored."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path`` that no other writer (process or thread) uses.

    Examples
    --------
    >>> temporary_name(Path("a/b.json")).name.startswith(".b.json.")
    True
    """
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_file(path, mode: str = "wb", *, error: type[Exception] = DimbsvmError, durable: bool = True,
                **open_kwargs):
    """Open a temporary file that replaces ``path`` when the block ends without an error.

    The data is flushed to disk before the rename, and the rename after it,
    so ``path`` is the old file or the whole new one whatever happens.

    Parameters
    ----------
    path : str or path
        The file to write; its directory is created.
    mode : str, default="wb"
        ``"wb"`` or ``"w"`` (then ``open_kwargs`` such as ``newline`` apply).
    error : exception class, default=DimbsvmError
        Raised, naming ``path``, when the file system refuses (a full disk,
        no permission); the temporary file is removed.
    durable : bool, default=True
        Flush the file and its directory to disk. ``False`` for scratch
        files that nothing reads after a crash: other processes still see
        the old file or the whole new one, a crash of the machine may not.

    Yields
    ------
    file object

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> with atomic_file(target, "w") as handle:
    ...     _ = handle.write("whole")
    >>> target.read_text(), [p.name for p in target.parent.iterdir()]
    ('whole', ['x.txt'])
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, mode, **open_kwargs) as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        _remove(tmp)
        raise error(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _remove(tmp)
        raise


def write_atomic(path, data: bytes | str, *, error: type[Exception] = DimbsvmError) -> None:
    """Replace ``path`` by ``data`` (text is UTF-8) with :func:`atomic_file`."""
    with atomic_file(path, "wb", error=error) as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()

