"""Writing a prediction output: each partition's part by the task that scored it, then one finished output.

A Parquet output is a directory of part files with ``_SUCCESS`` written
last; a CSV output one file, its parts joined in order. Both appear under
their name only when complete: staged under a hidden name beside it and
renamed without replacing (on a local or shared filesystem), or, at a URL,
claimed first and written by conditional writes (object storage has no
rename): a second writer is refused, never replacing the first's output.
Cells a spreadsheet would run as formulas are quoted in CSV output.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import secrets
import shutil
from pathlib import Path

import dask
import pandas as pd

from ..exceptions import DimbsvmError
from ..store.location import filesystem, is_url

__all__ = ["CLAIM", "COMPLETE_MARKER", "spreadsheet_safe", "write_csv", "write_parquet"]

logger = logging.getLogger(__name__)

#: Written last into a Parquet output directory: without it the directory is not a finished output.
COMPLETE_MARKER = "_SUCCESS"

#: The object a writer of a Parquet output at a URL creates first, and only where none exists: its claim.
CLAIM = "_CLAIMED"


def _open(url: str, mode: str, storage_options):
    import fsspec

    return fsspec.open(url, mode, **(storage_options or {}))


def _write_parquet_part(frame: pd.DataFrame, url: str, storage_options) -> int:
    with _open(url, "wb", storage_options) as handle:
        frame.to_parquet(handle, index=False)
    return len(frame)


def _write_csv_part(frame: pd.DataFrame, url: str, header: bool, storage_options) -> int:
    with _open(url, "wt", storage_options) as handle:
        spreadsheet_safe(frame).to_csv(handle, index=False, header=header, lineterminator="\n")
    return len(frame)


#: How a cell that a spreadsheet would evaluate as a formula begins (OWASP's "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


#: Text that a spreadsheet reads as a number, sign included: left unquoted.
_PLAIN_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each text cell (and column name) that would start a formula quoted by a leading ``'``.

    A prediction CSV repeats the input's ids (and class names), which come
    from whoever wrote the input: opened in a spreadsheet, an id such as
    ``=HYPERLINK(...)`` would run. A leading apostrophe makes the cell text,
    as OWASP advises; numbers (a negative decision value, and text that is a
    plain signed number such as the class name ``-1``) are left as they are,
    and Parquet outputs, which no spreadsheet evaluates, are unchanged.

    Examples
    --------
    >>> safe = spreadsheet_safe(pd.DataFrame({"id": ["=1+1", "a-1", "@SUM(A1)", "-1", "-1+2"],
    ...                                       "decision": [-0.5, 1.0, 2.0, 3.0, 4.0]}))
    >>> safe["id"].tolist(), safe["decision"].tolist()
    (["'=1+1", 'a-1', "'@SUM(A1)", '-1', "'-1+2"], [-0.5, 1.0, 2.0, 3.0, 4.0])
    """
    text = [name for name in frame.columns
            if frame[name].dtype == object or pd.api.types.is_string_dtype(frame[name])]
    quoted = {name: "'" + name if isinstance(name, str) and name.startswith(FORMULA_STARTS) else name
              for name in frame.columns}
    if not text and quoted == {name: name for name in frame.columns}:
        return frame
    frame = frame.copy()
    for name in text:
        column = frame[name]
        try:  # (vectorised: a CSV of millions of ids is written part by part on the workers)
            risky = column.str.startswith(FORMULA_STARTS, na=False).astype(bool)
            # a plain number ("-1", "+1", "-2.5e3": svmlight's class names) is a value, never a formula
            risky &= ~column.str.fullmatch(_PLAIN_NUMBER, na=False).astype(bool)
        except AttributeError:  # no text in the column at all
            continue
        if risky.any():
            frame[name] = column.where(~risky, "'" + column.astype(str))
    return frame.rename(columns=quoted)


def _concatenate(urls: list, target: str, counts: list, storage_options, *, exclusive=False) -> int:
    """Copy the parts, in order, into ``target``; ``exclusive``: created only where no object of that name exists."""
    try:
        with _open(target, "xb" if exclusive else "wb", storage_options) as out:
            for url in urls:
                with _open(url, "rb", storage_options) as part:
                    shutil.copyfileobj(part, out, 1 << 20)
    except FileExistsError:
        raise DimbsvmError(_appeared(target)) from None
    return int(sum(counts))


def _appeared(out: str) -> str:
    return (f"prediction output {out} appeared while the predictions were written (another writer?); nothing was "
            "replaced and these predictions are left unwritten")


def _staging(out: str, what: str) -> str:
    """A hidden name beside ``out``, new for this write."""
    head, _, name = out.rpartition("/")
    return f"{head}/.{name}.{what}-{os.getpid()}-{secrets.token_hex(4)}" if head else \
        f".{name}.{what}-{os.getpid()}-{secrets.token_hex(4)}"


def write_parquet(parts: list, out: str, storage_options) -> int:
    staging = _staging(out, "partial")
    urls = [f"{staging}/part.{k:05d}.parquet" for k in range(len(parts))]
    try:
        _makedirs(staging, storage_options)
        counts = _compute_all([dask.delayed(_write_parquet_part)(part, url, storage_options)
                               for part, url in zip(parts, urls)])
        n_rows = int(sum(counts))
        marker = json.dumps({"rows": n_rows, "parts": len(parts)}) + "\n"
        if is_url(out):
            _commit_url(staging, out, urls, marker, storage_options)
        else:
            Path(staging, COMPLETE_MARKER).write_text(marker)
            _rename_no_replace(staging, out)
    finally:
        _remove(staging, storage_options)
    return n_rows


def write_csv(parts: list, out: str, storage_options) -> int:
    staging = _staging(out, "parts")
    whole = _staging(out, "partial")
    urls = [f"{staging}/part.{k:05d}.csv" for k in range(len(parts))]
    try:
        _makedirs(staging, storage_options)
        counts = [dask.delayed(_write_csv_part)(part, url, k == 0, storage_options)
                  for k, (part, url) in enumerate(zip(parts, urls))]
        if is_url(out):
            # an object appears whole under its name when its upload completes, and only where none of that name
            # exists (a conditional write): a second writer is refused, not replacing the first's
            (n_rows,) = _compute_all([dask.delayed(_concatenate)(urls, out, counts, storage_options,
                                                                 exclusive=True)])
        else:
            (n_rows,) = _compute_all([dask.delayed(_concatenate)(urls, whole, counts, storage_options)])
            _rename_no_replace(whole, out)
    finally:
        _remove(staging, storage_options)
        _remove(whole, storage_options)
    return n_rows


def _compute_all(tasks: list) -> tuple:
    """Compute ``tasks``; on a failure, only once no task is still writing, so that the staging can be removed.

    On a distributed client every task is waited for before the first error
    is raised (a task already running cannot be stopped, and one finishing
    after the staging was removed would leave a part behind). Without a
    client the tasks run one at a time in this process, stopping at the
    first error.
    """
    from ..parallel import current_client

    client = current_client()
    if client is None:
        return dask.compute(*tasks, scheduler="sync")
    from distributed import wait

    futures = client.compute(tasks)
    try:
        return tuple(client.gather(futures))
    except BaseException:
        wait(futures)
        raise


def _commit_url(staging: str, out: str, urls: list, marker: str, storage_options) -> None:
    """Claim ``out``, move the parts under it and write the completion marker last (object storage has no rename).

    The claim is an object created only where none of its name exists (a
    conditional write): of two writers of one output the second is refused
    before it moves a part, so that the parts of two runs never mix.
    """
    fs, root = filesystem(out, storage_options)
    if fs.exists(root):
        raise DimbsvmError(_appeared(out))
    claim = f"{root}/{CLAIM}"
    try:
        fs.pipe_file(claim, b"", mode="create")
    except FileExistsError:
        raise DimbsvmError(_appeared(out)) from None
    for url in urls:
        fs.mv(filesystem(url, storage_options)[1], f"{root}/{url.rsplit('/', 1)[-1]}")
    fs.pipe_file(f"{root}/{COMPLETE_MARKER}", marker.encode())
    try:
        fs.rm(claim)
    except OSError as exc:  # the output is complete; the claim left beside it is said, not fatal
        logger.warning("could not remove %s: %s", claim, exc)


def _makedirs(location: str, storage_options) -> None:
    if is_url(location):
        return  # object storage has no directories
    Path(location).mkdir(parents=True)


def _remove(location: str, storage_options) -> None:
    """Remove a staging file or directory this write created, if it is still there."""
    try:
        if is_url(location):
            fs, path = filesystem(location, storage_options)
            if fs.exists(path):
                fs.rm(path, recursive=True)
        elif os.path.isdir(location):
            shutil.rmtree(location)
        elif os.path.lexists(location):
            os.unlink(location)
    except OSError as exc:  # a leftover hidden staging name, said in the log; never a failed prediction
        logger.warning("could not remove %s: %s", location, exc)


def _rename_no_replace(source: str, target: str) -> None:
    """Rename ``source`` to ``target``, refusing (not replacing) a ``target`` that appeared meanwhile."""
    if os.path.isdir(source):
        renameat2 = getattr(_libc(), "renameat2", None)
        if renameat2 is not None:
            at_fdcwd, rename_noreplace = -100, 1
            if renameat2(at_fdcwd, os.fsencode(source), at_fdcwd, os.fsencode(target), rename_noreplace) == 0:
                return
            err = ctypes.get_errno()
            if err == errno.EEXIST:
                raise DimbsvmError(f"prediction output {target} appeared while the predictions were written; they "
                                   "are left unwritten")
            if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise OSError(err, os.strerror(err), target)
        if os.path.lexists(target):  # a system without renameat2: checked just before the rename
            raise DimbsvmError(f"prediction output {target} appeared while the predictions were written; they are "
                               "left unwritten")
        os.rename(source, target)
        return
    try:
        os.link(source, target)  # a file: the link fails where the target exists
    except FileExistsError:
        raise DimbsvmError(f"prediction output {target} appeared while the predictions were written; they are left "
                           "unwritten") from None
    os.unlink(source)


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
