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

Resuming an interrupted run needs the machine (or a shared filesystem) that
holds its staging directory; object storage only ever holds finished runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..exceptions import DimbsvmError
from ..store.location import filesystem, location

__all__ = ["CLAIM_MARKER", "COMPLETE_MARKER", "RemoteOut", "check_staged_run", "plan_remote_out", "publish_run_dir",
           "staging_root"]

logger = logging.getLogger(__name__)

#: Written first: the prefix holds a run dimbsvm is publishing (objects there are dimbsvm's to replace).
CLAIM_MARKER = ".dimbsvm-run"
#: Written last, listing every file and its size: the run at the prefix is complete.
COMPLETE_MARKER = "_SUCCESS"
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
    if fs.exists(path):
        fs.rm(path, recursive=True)  # an interrupted publication of ours (the check above saw our claim)
    fs.pipe_file(f"{path}/{CLAIM_MARKER}", json.dumps({"writer": "dimbsvm", "version": __version__}).encode())
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    for i, file in enumerate(files, 1):
        fs.put_file(str(file), f"{path}/{file.relative_to(run_dir).as_posix()}")
        logger.debug("published %d/%d: %s", i, len(files), file.relative_to(run_dir))
    listing = {file.relative_to(run_dir).as_posix(): file.stat().st_size for file in files}
    fs.pipe_file(f"{path}/{COMPLETE_MARKER}", (json.dumps({"files": listing}, indent=1) + "\n").encode())
    logger.info("published %d files to %s", len(files), url)
    shutil.rmtree(run_dir)  # the staging copy, written by this run; the URL holds the run now
    try:
        run_dir.parent.rmdir()  # the URL's staging directory, when nothing else is left in it
    except OSError:
        pass
    return url
