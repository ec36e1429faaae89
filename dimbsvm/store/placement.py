"""Where a store is written: claimed under a lock, built beside its target, swapped in when complete.

An ingest never writes into the directory it is asked for. It takes the
target's lock (``.<name>.lock`` beside it, so two ingests into one path are
serialised, never interleaved), checks that whatever is there is dimbsvm's
own (a store, recognised by its meta, or nothing, or an empty directory),
builds the new store in a staging directory beside the target
(``.<name>.staging-<pid>-<token>``) and only then swaps it in:

- into an absent path or an empty directory, by one ``rename``;
- over an existing store, by an atomic exchange of the two directories
  (Linux ``renameat2(RENAME_EXCHANGE)``) after which the old store, now at
  the staging name, is deleted. Where the exchange is not available the old
  store is first renamed aside (``.<name>.replaced-<pid>-<token>``); if the
  process dies between the two renames, the next ingest into the path puts
  it back (:func:`clean_leftovers`).

On object storage (a URL) there is no rename: a store is written in place,
its completion marker last, by the one writer that created its ``zarr.json``
(an exclusive create, S3's conditional write), and an existing store there
is reused or refused, never replaced.

So whatever byte a crash hits, the path holds the old complete store or the
new one; the only leftovers are hidden staging directories, which the next
ingest into the same path removes under the lock (no live writer can own
one then: a writer holds the lock for as long as its staging directory
exists).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import os
import secrets
import shutil
import time
from pathlib import Path

from .._locks import LockHeld, exclusive_lock, fsync_dir
from ..exceptions import StoreError
from .location import filesystem
from .stages import read_meta

__all__ = ["check_replaceable", "check_target", "check_url_target", "claim_url", "clean_leftovers", "discard_staged",
           "lock_target", "stage_beside", "swap_in"]

logger = logging.getLogger("dimbsvm.store")

_STAGING = "staging"
_REPLACED = "replaced"


def _sibling(path: Path, kind: str, token: str | None = None) -> Path:
    suffix = f".{kind}-{os.getpid()}-{token or secrets.token_hex(4)}"
    return path.with_name(f".{path.name}{suffix}")


def _siblings(path: Path, kind: str) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}.{kind}-*"))


@contextlib.contextmanager
def lock_target(path):
    """Hold the exclusive lock of a store path for the duration of a write.

    The lock is ``fcntl.flock`` on ``.<name>.lock`` beside the path
    (:func:`dimbsvm._locks.exclusive_lock`): it dies with its process, so a
    killed ingest never leaves a path locked, and the file is removed on
    release. A second writer waits (saying so in the log) and then sees the
    first one's result.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_file = path.with_name(f".{path.name}.lock")
    try:
        lock = exclusive_lock(lock_file, f"store {path}", hint="waiting for it to finish")
    except LockHeld as exc:
        logger.warning("%s", exc)
        lock = exclusive_lock(lock_file, f"store {path}", wait=True)
    with lock:
        yield


def check_target(path) -> str:
    """What is at a store's path, refusing anything dimbsvm did not write.

    Returns
    -------
    {"absent", "empty", "store"}
        Nothing, an empty directory, or a directory holding a dimbsvm store
        (complete or not) and nothing but Zarr groups below it.

    Raises
    ------
    StoreError
        The path is a file, a link, the current directory (or one above it),
        or a directory that is not a dimbsvm store. With or without
        overwrite: overwrite replaces a store, never anything else.
    """
    path = Path(path)
    if path.is_symlink():
        raise StoreError(f"store path {path} is a symbolic link; give the store's real path")
    if not path.exists():
        return "absent"
    if not path.is_dir():
        raise StoreError(f"store path {path} is an existing file, not a store directory; choose another path")
    if Path.cwd().resolve().is_relative_to(path.resolve()):
        raise StoreError(f"store path {path} is the current directory (or holds it); give a new directory's path")
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return "empty"
    if read_meta(path) is None:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise StoreError(f"store path {path} is an existing directory that is not a dimbsvm store (it holds "
                         f"{shown}); dimbsvm never writes over it: choose a path that does not exist yet")
    return "store"


def check_replaceable(path) -> None:
    """Refuse to replace a store that also holds files dimbsvm did not write (they would go with it).

    A store holds its ``zarr.json`` and Zarr groups and arrays below it (its
    rows and feature stages); anything else was put there by someone else.
    """
    path = Path(path)
    foreign = sorted(p.name for p in path.iterdir() if p.name != "zarr.json" and not _is_zarr_node(p))
    if foreign:
        raise StoreError(f"store {path} also holds {', '.join(foreign[:3])}, which dimbsvm did not write; "
                         "move them out of the store before replacing it")


def _is_zarr_node(path: Path) -> bool:
    """A directory of Zarr groups or arrays (a store's arrays and feature stages), at any depth."""
    if not path.is_dir() or path.is_symlink():
        return False
    if (path / "zarr.json").is_file():
        return True
    children = list(path.iterdir())
    return bool(children) and all(_is_zarr_node(child) for child in children)


def clean_leftovers(path) -> None:
    """Undo what writers killed part-way left beside ``path``.

    A store that a replacement renamed aside and did not swap in (a crash
    between two renames, where the atomic exchange is not available) is put
    back; staging directories are removed. Call under :func:`lock_target`:
    a live writer's staging exists only while that writer holds the lock.
    """
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        for aside in reversed(_siblings(path, _REPLACED)):
            meta = read_meta(aside)
            if meta and meta.get("complete"):
                os.rename(aside, path)
                logger.warning("store %s: put back the store an interrupted replacement had moved to %s",
                               path, aside)
                break
    for left in _siblings(path, _STAGING):
        logger.info("store %s: removing %s, left by an ingest that did not finish", path, left)
        shutil.rmtree(left, ignore_errors=True)


def stage_beside(path) -> Path:
    """A new staging path beside ``path`` (not created)."""
    return _sibling(Path(path), _STAGING)


def discard_staged(staged, *, settle_s: float = 5.0) -> None:
    """Remove a staging directory after a failed write (the target is untouched).

    When one chunk write fails, writes of other chunks already under way
    still finish (in Dask's and zarr's threads) and may recreate files just
    removed, so removal is repeated until the directory stays gone, for at
    most ``settle_s`` seconds; what is left then is removed by the next
    ingest into the same path.
    """
    staged = Path(staged)
    deadline = time.monotonic() + settle_s
    while True:
        shutil.rmtree(staged, ignore_errors=True)
        time.sleep(0.05)
        if not staged.exists():
            return
        if time.monotonic() > deadline:
            logger.warning("could not remove %s (writes still under way); the next ingest removes it", staged)
            return


def swap_in(staged, path, target_state: str) -> None:
    """Move a complete staged store to ``path``; the old store (if any) is deleted only after.

    Parameters
    ----------
    staged : path
        The complete new store.
    path : path
        The store's path.
    target_state : {"absent", "empty", "store"}
        What :func:`check_target` found there (under the same lock).
    """
    staged, path = Path(staged), Path(path)
    fsync_dir(staged)
    if target_state in ("absent", "empty"):
        os.rename(staged, path)  # over an empty directory too: POSIX rename replaces it
        fsync_dir(path.parent)
        return
    if _exchange(staged, path):
        fsync_dir(path.parent)
        shutil.rmtree(staged)  # now the old store
        return
    aside = _sibling(path, _REPLACED)
    os.rename(path, aside)
    os.rename(staged, path)
    fsync_dir(path.parent)
    shutil.rmtree(aside)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two directories (Linux renameat2); False where the system cannot."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # a file system or kernel without the exchange: fall back to two renames
    raise OSError(err, os.strerror(err), str(b))


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def check_url_target(url: str) -> str:
    """What is at a store URL: ``"absent"`` (no object under it) or ``"store"``; anything else is refused."""
    fs, root = filesystem(url)
    listed = [key for key in fs.find(root, maxdepth=1, withdirs=True) if key.rstrip("/") != root.rstrip("/")]
    if not listed:
        return "absent"
    if read_meta(url) is None:
        names = sorted(key.rstrip("/").rsplit("/", 1)[-1] for key in listed)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise StoreError(f"store URL {url} holds objects that are not a dimbsvm store ({shown}); dimbsvm never "
                         "writes over them: choose a URL with nothing under it")
    return "store"


def claim_url(url: str) -> None:
    """Create a new store's ``zarr.json`` at ``url``, failing if any other writer created it first.

    The exclusive create is S3's conditional write (``If-None-Match``); a
    filesystem without one is checked for the object first, which leaves a
    window between the check and the write (said in the log).
    """
    import socket

    fs, root = filesystem(url)
    key = f"{root.rstrip('/')}/zarr.json"
    claim = {"zarr_format": 3, "node_type": "group", "attributes": {
        "dimbsvm": {"complete": False, "writer": f"{socket.gethostname()}:{os.getpid()}"}}}
    try:
        fs.pipe_file(key, json.dumps(claim).encode(), mode="create")
    except FileExistsError:
        raise StoreError(f"store {url} was created by another writer meanwhile; ingest again once it has "
                         "finished (it is then reused or refused)") from None
    except (TypeError, NotImplementedError):
        if fs.exists(key):
            raise StoreError(f"store {url} was created by another writer meanwhile") from None
        logger.warning("%s: this filesystem has no exclusive create; two ingests started at once could mix", url)
        fs.pipe_file(key, json.dumps(claim).encode())
