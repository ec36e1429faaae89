"""A run directory at a URL (``--out s3://bucket/runs/x``): written here, then published whole.

Object storage has no rename, so a run is not written there file by file: it
is written, and resumed after an interruption, in a local *staging* run
directory (:func:`staging_dir`, one per URL), exactly as a local ``--out``
is. When it is complete, :func:`publish_run_dir` uploads it: a claim marker
first (:data:`CLAIM_MARKER`: the prefix is dimbsvm's), then every file, then
the completion marker (:data:`COMPLETE_MARKER`, listing every file and its
size) last. A reader takes a prefix for a finished run only when the
completion marker is there; a crash at any byte leaves either no marker (and
rerunning the command publishes the run again: the staging copy is kept
until the upload is complete) or a complete run. A prefix that holds objects
dimbsvm did not write, or a finished run, is refused before anything runs.

While the run is written, its partial directory (saved folds, finished
ensemble members, the fingerprints they were saved for) is mirrored under
the URL (:data:`CHECKPOINT_PREFIX`, by :class:`Checkpoints`, every
:data:`CHECKPOINT_EVERY` seconds and once more when the run is interrupted),
so an interrupted run resumes on any machine: where the staging directory is
gone (a lost pod or VM), :func:`restore_checkpoints` brings the mirror back
into it first. A mirrored file is a whole object (a file appears in the
partial directory by a rename) and files are sent in the order they were
written, so a fold's record is never mirrored before its predictions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..exceptions import DimbsvmError
from ..store.location import filesystem, location

__all__ = ["CHECKPOINT_PREFIX", "CLAIM_MARKER", "COMPLETE_MARKER", "Checkpoints", "RemoteOut", "check_staged_run",
           "plan_remote_out", "publish_run_dir", "restore_checkpoints", "staging_root"]

logger = logging.getLogger(__name__)

#: Written first: the prefix holds a run dimbsvm is publishing (objects there are dimbsvm's to replace).
CLAIM_MARKER = ".dimbsvm-run"
#: Written last, listing every file and its size: the run at the prefix is complete.
COMPLETE_MARKER = "_SUCCESS"
#: The mirror of an unfinished run's partial directory, under the URL.
CHECKPOINT_PREFIX = ".partial"
#: Seconds between two mirrorings of the partial directory while a run is written.
CHECKPOINT_EVERY = 2.0
#: Where staging run directories live, unless ``DIMBSVM_STAGING_DIR`` names another directory.
DEFAULT_STAGING_ROOT = Path("~/.cache/dimbsvm/staging")


@dataclass(frozen=True)
class RemoteOut:
    """A ``--out`` URL and the local run directory it is written in first.

    Attributes
    ----------
    url : str
        Where the finished run is published.
    staging : pathlib.Path
        The local run directory (and, beside it, its partial directory while
        the run is written).
    finished : bool
        The staging run directory is already complete: an earlier publication
        was interrupted, and only the upload remains.
    """

    url: str
    staging: Path
    finished: bool


def staging_root() -> Path:
    """The directory that holds staging run directories (``DIMBSVM_STAGING_DIR`` or ``~/.cache/dimbsvm/staging``)."""
    return Path(os.environ.get("DIMBSVM_STAGING_DIR") or DEFAULT_STAGING_ROOT).expanduser()


def staging_dir(url: str) -> Path:
    """The local run directory of ``url``: the same for every run to that URL, named after its last part.

    Examples
    --------
    >>> staging_dir("s3://bucket/runs/x").name
    'x'
    """
    url = location(url)
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return staging_root() / digest / url.rsplit("/", 1)[-1]


def plan_remote_out(url: str) -> RemoteOut:
    """Check that a run may be published at ``url``; where it is staged.

    Raises
    ------
    DimbsvmError
        One line: the URL holds a finished run, or objects dimbsvm did not
        write (never replaced), or its filesystem package is missing.
    """
    url = location(url)
    fs, path = filesystem(url)
    if fs.exists(f"{path}/{COMPLETE_MARKER}"):
        raise DimbsvmError(f"--out {url} holds a finished run; choose another --out (a run is never published "
                           "over another)")
    found = fs.find(path) if fs.exists(path) else []
    if found and not fs.exists(f"{path}/{CLAIM_MARKER}"):
        raise DimbsvmError(f"--out {url} holds {len(found)} object(s) dimbsvm did not write (no {CLAIM_MARKER}); "
                           "choose an empty prefix")
    staging = staging_dir(url)
    return RemoteOut(url=url, staging=staging, finished=staging.is_dir())


def check_staged_run(remote: RemoteOut, job_path) -> None:
    """Refuse to publish a finished staged run that another job or other data made.

    Rerunning the command after an interrupted publication publishes the
    staged run instead of running again; that is right only for the job and
    data that made it.

    Raises
    ------
    DimbsvmError
        One line naming the staging directory, when the job file's or the
        data's fingerprint differs from the run's.
    """
    from ..store import content_fingerprint
    from .data import load_job_data
    from .run_dir import job_fingerprint, recorded_fingerprints
    from .spec import load_job_file

    job, _ = load_job_file(job_path)
    recorded_job, recorded_data = recorded_fingerprints(remote.staging)
    fingerprint = job_fingerprint(job)
    data_fingerprint = content_fingerprint(load_job_data(job.data.source, nominal=job.data.nominal).meta)
    if (recorded_job, recorded_data) != (fingerprint, data_fingerprint):
        what = "job" if recorded_job != fingerprint else "data"
        raise DimbsvmError(f"--out {remote.url}: the finished run waiting in {remote.staging} to be published there "
                           f"was made from another {what}; publish it with the job and data that made it, or "
                           "remove that directory to start over")


def _claim(fs, path: str) -> None:
    fs.pipe_file(f"{path}/{CLAIM_MARKER}", json.dumps({"writer": "dimbsvm", "version": __version__}).encode())


def _is_temporary(name: str) -> bool:
    """A file being written (``.<name>.<pid>-<random>.tmp``), which appears under its own name when complete."""
    return name.startswith(".") and name.endswith(".tmp")


class Checkpoints:
    """Mirror a URL run's partial directory under ``URL/.partial`` while the run is written.

    A context manager: entering claims the prefix (:data:`CLAIM_MARKER`) and
    starts a thread that mirrors the directory every :data:`CHECKPOINT_EVERY`
    seconds; leaving stops it, after one more mirroring when the run ended
    with an exception (an interruption: what was saved is what a resume
    elsewhere reuses). Each pass sends the files that are new or changed,
    oldest first, then removes the mirrored files that are gone (an ensemble
    fold's members once its record is saved). A pass that fails (the object
    store out of reach) is logged and tried again at the next one: the run
    goes on, and only its resumability elsewhere lags.

    Parameters
    ----------
    url : str
        The ``--out`` URL.
    partial : path-like
        The staging run's partial directory.
    """

    def __init__(self, url: str, partial):
        self.url = location(url)
        self.fs, path = filesystem(self.url)
        self.path = path
        self.root = f"{path}/{CHECKPOINT_PREFIX}"
        self.partial = Path(partial)
        self._sent: dict = {}  # relative path -> (size, mtime_ns) sent; None: found there, version unknown
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        _claim(self.fs, self.path)  # the prefix is dimbsvm's from now on
        found = self.fs.find(self.root) if self.fs.exists(self.root) else []
        self._sent = {p[len(self.root) + 1:]: None for p in found}
        self._thread = threading.Thread(target=self._every, name="dimbsvm-checkpoints", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        self._thread.join()
        if exc_type is not None:
            self.sync()
        return False

    def _every(self) -> None:
        while not self._stop.wait(CHECKPOINT_EVERY):
            self.sync()

    def sync(self) -> int:
        """Mirror the partial directory once; returns the files sent. Never raises for the object store."""
        with self._lock:
            try:
                return self._sync()
            except Exception as exc:  # noqa: BLE001 - a run is not stopped by its mirror; the next pass retries
                if isinstance(exc, FileNotFoundError) and not self.partial.is_dir():
                    return 0  # renamed into the finished run during the pass: nothing is lost
                logger.warning("could not mirror %s to %s/%s (the run goes on; tried again in %.0f s): %s",
                               self.partial, self.url, CHECKPOINT_PREFIX, CHECKPOINT_EVERY, exc)
                return 0

    def _sync(self) -> int:
        if not self.partial.is_dir():  # renamed into the finished run: published next, nothing to mirror
            return 0
        local = {}
        for file in self.partial.rglob("*"):
            if file.is_file() and not _is_temporary(file.name):
                stat = file.stat()
                local[file.relative_to(self.partial).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        sent = 0
        for relative, version in sorted(local.items(), key=lambda item: item[1][1]):  # in the order written
            if self._sent.get(relative) != version:
                self.fs.put_file(str(self.partial / relative), f"{self.root}/{relative}")
                self._sent[relative] = version
                sent += 1
        for relative in sorted(set(self._sent) - set(local)):
            self.fs.rm_file(f"{self.root}/{relative}")
            del self._sent[relative]
        if sent:
            logger.debug("mirrored %d file(s) of %s to %s/%s", sent, self.partial, self.url, CHECKPOINT_PREFIX)
        return sent


def restore_checkpoints(remote: RemoteOut) -> int:
    """Bring a URL run's mirrored partial directory into its staging directory, where this machine has none.

    The directory is downloaded beside its place and renamed into it, so an
    interruption here leaves no half-made partial directory. What is
    restored is then checked as any partial directory is (the job's and the
    data's fingerprints) before a fold of it is reused.

    Returns
    -------
    int
        Files restored (0: nothing mirrored there, or a local partial directory exists).
    """
    from .run_dir import partial_dir

    partial = partial_dir(remote.staging)
    if remote.finished or partial.exists() or partial.is_symlink():
        return 0
    fs, path = filesystem(remote.url)
    root = f"{path}/{CHECKPOINT_PREFIX}"
    found = fs.find(root) if fs.exists(root) else []
    if not found:
        return 0
    tmp = partial.with_name(f"{partial.name}.tmp-{os.getpid()}")  # a leftover name run_dir cleans up
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for name in found:
            target = tmp / name[len(root) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(name, str(target))
        os.replace(tmp, partial)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("restored %d file(s) of the interrupted run mirrored at %s/%s into %s", len(found), remote.url,
                CHECKPOINT_PREFIX, partial)
    return len(found)


def publish_run_dir(run_dir: Path, url: str) -> str:
    """Upload a finished local run directory to ``url``, the completion marker last; remove the local copy.

    Objects an interrupted publication left at ``url`` (dimbsvm's: the claim
    marker is there) are replaced.

    Returns
    -------
    url : str
    """
    url, run_dir = location(url), Path(run_dir)
    fs, path = filesystem(url)
    plan_remote_out(url)  # checked again: another writer may have finished there since the run started
    checkpoints = f"{path}/{CHECKPOINT_PREFIX}"
    fs.invalidate_cache(path)  # a listing cached before an interrupted publication ended would be stale
    if fs.exists(path):
        for entry in fs.ls(path, detail=False):  # an interrupted publication of ours (the check above saw our claim)
            if entry.rstrip("/") != checkpoints:  # the mirror goes last: until then the run resumes from it
                try:
                    fs.rm(entry, recursive=True)
                except FileNotFoundError:  # listed, but no object is left under it: nothing to remove
                    pass
    _claim(fs, path)
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    for i, file in enumerate(files, 1):
        fs.put_file(str(file), f"{path}/{file.relative_to(run_dir).as_posix()}")
        logger.debug("published %d/%d: %s", i, len(files), file.relative_to(run_dir))
    listing = {file.relative_to(run_dir).as_posix(): file.stat().st_size for file in files}
    fs.pipe_file(f"{path}/{COMPLETE_MARKER}", (json.dumps({"files": listing}, indent=1) + "\n").encode())
    if fs.exists(checkpoints):
        fs.rm(checkpoints, recursive=True)  # the run is complete there: its mirror is no longer needed
    logger.info("published %d files to %s", len(files), url)
    shutil.rmtree(run_dir)  # the staging copy, written by this run; the URL holds the run now
    try:
        run_dir.parent.rmdir()  # the URL's staging directory, when nothing else is left in it
    except OSError:
        pass
    return url
