"""Where a store lives: a local directory or an fsspec URL (``s3://``, ``gs://``, ``az://``, ``file://``).

Every part of the store layer names a store by a *location*: a
:class:`pathlib.Path` for a local directory, or the URL string itself for
object storage (``file://`` URLs become paths). :func:`join` and
:func:`zarr_store` are the two things callers need; nothing else in the
package should turn a URL into a ``Path`` (``Path("s3://b/k")`` is the
local path ``s3:/b/k``, which is how a run once wrote a directory named
``s3:``).

Credentials and endpoints come from the environment the filesystem package
reads (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ... for s3fs), so a
worker reads the same store as the client without being handed secrets.

Every call to S3 has bounded waits (:func:`bound_remote_calls`, applied when
this module is imported): an endpoint that accepts connections and never
answers is an error within about 100 s, not a hang.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from urllib.parse import urlsplit

from ..exceptions import StoreError

__all__ = ["EXTRAS", "filesystem", "is_url", "join", "local_path", "location", "name_of", "read_json", "zarr_store"]

logger = logging.getLogger(__name__)

#: The environment variable that sets how long a call to S3 waits for the endpoint's next bytes (seconds).
READ_TIMEOUT_VARIABLE = "DIMBSVM_S3_READ_TIMEOUT"

#: Its default: botocore's own is 60 s, and with its and s3fs' retries an endpoint that never answers held a
#: command for minutes without a word.
READ_TIMEOUT = 10.0

#: Tries of a call by botocore (the first included) within each of s3fs' own five: a dead endpoint costs ten waits
#: (botocore's default, three, made it fifteen).
S3_ATTEMPTS = 2


def s3_call_limits() -> dict:
    """botocore's ``config_kwargs`` of every S3 filesystem dimbsvm opens, unless the caller gives its own.

    A connection within 5 s (or the read timeout, if shorter), the answer's
    next bytes within ``DIMBSVM_S3_READ_TIMEOUT`` seconds (default
    :data:`READ_TIMEOUT`), :data:`S3_ATTEMPTS` tries.
    """
    text = os.environ.get(READ_TIMEOUT_VARIABLE) or ""
    try:
        read = float(text) if text.strip() else READ_TIMEOUT
    except ValueError:
        read = math.nan
    if not (math.isfinite(read) and read > 0):  # read when dimbsvm is imported: a warning, never a failed import
        logger.warning("%s=%r is not a positive number of seconds; S3 calls wait %g s", READ_TIMEOUT_VARIABLE, text,
                       READ_TIMEOUT)
        read = READ_TIMEOUT
    return {"connect_timeout": min(5.0, read), "read_timeout": read,
            "retries": {"total_max_attempts": S3_ATTEMPTS, "mode": "standard"}}


def bound_remote_calls() -> None:
    """Make :func:`s3_call_limits` fsspec's default for ``s3://`` in this process (a user's configuration kept).

    fsspec applies its configuration to every filesystem it makes, so the
    readers of Dask, Zarr and pandas get the limits too; a filesystem is
    pickled to the workers with them.
    """
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {}).setdefault("config_kwargs", s3_call_limits())


#: The extra that installs each URL scheme's filesystem package.
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}


def is_url(value) -> bool:
    """Whether ``value`` names a location by URL (other than a local ``file://`` one).

    Examples
    --------
    >>> is_url("s3://bucket/data.zarr"), is_url("data.zarr"), is_url("file:///tmp/x"), is_url(Path("s3:/b"))
    (True, False, False, False)
    """
    if not isinstance(value, str) or "://" not in value:
        return False
    return urlsplit(value).scheme not in ("", "file")


def location(value):
    """A store location: the URL string for object storage, else a :class:`~pathlib.Path`.

    Examples
    --------
    >>> location("s3://bucket/x.zarr/"), location("file:///tmp/x.zarr"), location("x.zarr")
    ('s3://bucket/x.zarr', PosixPath('/tmp/x.zarr'), PosixPath('x.zarr'))
    """
    if is_url(value):
        return str(value).rstrip("/")
    if isinstance(value, str) and value.startswith("file://"):
        return Path(urlsplit(value).path)
    return Path(value)


def join(base, *parts):
    """``base`` with ``parts`` appended, keeping the kind of location.

    Examples
    --------
    >>> join("s3://bucket/x.zarr", "knn", "X"), join(Path("x.zarr"), "X")
    ('s3://bucket/x.zarr/knn/X', PosixPath('x.zarr/X'))
    """
    base = location(base)
    if isinstance(base, Path):
        return base.joinpath(*parts)
    return "/".join([base, *(str(p).strip("/") for p in parts)])


def local_path(loc, what: str) -> Path:
    """``loc`` as a local path, or one line saying that ``what`` needs a local (or shared) filesystem.

    Examples
    --------
    >>> local_path("x.zarr", "a stage")
    PosixPath('x.zarr')
    >>> local_path("s3://b/x.zarr", "feature stages")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.StoreError: store s3://b/x.zarr: feature stages need the store on a local or shared filesystem; a store at a URL holds rows for jobs without stored stages
    """
    loc = location(loc)
    if isinstance(loc, Path):
        return loc
    raise StoreError(f"store {loc}: {what} need the store on a local or shared filesystem; a store at a URL holds "
                     "rows for jobs without stored stages")


def name_of(loc) -> str:
    """The last component of a location (``x.zarr`` for ``s3://bucket/x.zarr``)."""
    loc = location(loc)
    return loc.name if isinstance(loc, Path) else loc.rsplit("/", 1)[-1]


def filesystem(url: str, storage_options: dict | None = None):
    """``(fs, path)`` for a URL: its fsspec filesystem and the path on it.

    Raises
    ------
    StoreError
        The scheme's filesystem package is not installed (naming the extra to
        install), or fsspec does not know the scheme.
    """
    import fsspec

    scheme = urlsplit(url).scheme
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        extra = EXTRAS.get(scheme)
        hint = f'pip install "dimbsvm[{extra}]"' if extra else f"install the fsspec filesystem for {scheme}://"
        raise StoreError(f"{url}: reading {scheme}:// needs a package that is not installed ({exc}); {hint}") from None
    except ValueError as exc:
        raise StoreError(f"{url}: {exc}") from None


def zarr_store(loc, *, read_only: bool, storage_options: dict | None = None):
    """The Zarr store object for a location (local directory, or fsspec URL)."""
    from zarr.storage import FsspecStore, LocalStore

    loc = location(loc)
    if isinstance(loc, Path):
        return LocalStore(str(loc), read_only=read_only)
    filesystem(loc, storage_options)  # a missing filesystem package is one line naming the extra
    # from_url makes its own asynchronous filesystem, bound to zarr's event loop
    return FsspecStore.from_url(loc, storage_options=storage_options, read_only=read_only)


def read_json(loc):
    """A JSON document at a location, or None when it does not exist."""
    loc = location(loc)
    if isinstance(loc, Path):
        if not loc.is_file():
            return None
        return json.loads(loc.read_text())
    fs, path = filesystem(loc)
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None


bound_remote_calls()
