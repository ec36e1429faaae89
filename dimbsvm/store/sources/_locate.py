"""Where a tabular source's files are, what format they hold, and their fingerprint.

A source is a local path or an fsspec URL (``s3://``, ``gs://``, ``az://``,
``file://``, ``http(s)://``), naming one file, a directory of files, or a
glob. The format comes from the suffix: ``.parquet``/``.pq`` is Parquet;
``.csv``, optionally compressed (``.csv.gz``, ``.csv.bz2``, ``.csv.xz``,
``.csv.zst``), is CSV. Only the listing and the files' metadata are read
here, never their rows. The filesystem of a URL, and the one-line error
naming the extra that installs it, come from
:func:`dimbsvm.store.location.filesystem`, as for stores.

Fingerprints (how ``ingest`` recognises a source it already stored):

* local files: the SHA-256 of their bytes, read in blocks (one local file
  gives exactly :func:`dimbsvm.store.fingerprint_file`, as the in-memory
  readers did, so a store written before is recognised);
* URLs: each object's fsspec metadata (path, size, and whatever version
  marks the filesystem reports: ETag, MD5, CRC32C, generation, last
  modification time); the bytes are not read twice. An object rewritten
  with the same size in the same second on a filesystem that reports no
  ETag or checksum would pass for unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import fsspec
from fsspec.compression import compr

from ...exceptions import DataError, one_line
from ..location import filesystem

__all__ = ["Location", "PARQUET_SUFFIXES", "CSV_SUFFIX", "COMPRESSED_CSV", "is_url", "locate", "looks_tabular"]

PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIX = ".csv"
#: Suffix after ``.csv`` -> fsspec compression name. Compressed files cannot be split into blocks,
#: so each is one partition.
COMPRESSED_CSV = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
#: fsspec ``info`` fields that change when an object's content does.
_VERSION_FIELDS = ("ETag", "etag", "md5Hash", "content_md5", "crc32c", "generation", "version_id", "VersionId",
                   "LastModified", "last_modified", "mtime", "updated")


@dataclass(frozen=True)
class Location:
    """The files of a source, as found.

    Attributes
    ----------
    text : str
        The source as given.
    format : {"parquet", "csv"}
    compression : str or None
        fsspec's name for a compressed CSV's codec.
    urls : tuple of str
        Every file, with its protocol, in the order rows are read.
    local : bool
        Whether the files are on this machine's file system.
    fs : fsspec.AbstractFileSystem
    """

    text: str
    format: str
    compression: str | None
    urls: tuple[str, ...]
    local: bool
    fs: fsspec.AbstractFileSystem = field(compare=False, repr=False)
    paths: tuple[str, ...] = field(default=(), repr=False)

    @property
    def name(self) -> str:
        """A short dataset name: the file's stem, or the directory's name."""
        path = PurePosixPath(self.text.rstrip("/").split("://", 1)[-1])
        if _has_magic(str(path)):
            path = next((p for p in path.parents if not _has_magic(str(p))), path)
            return path.name or "data"
        name = path.name
        for suffix in (*COMPRESSED_CSV, CSV_SUFFIX, *PARQUET_SUFFIXES):
            name = name.removesuffix(suffix)
        return name or "data"

    def fingerprint(self, file_digests=()) -> str:
        """The files' identity (see the module docstring).

        ``file_digests``: for local files, each one's
        :func:`~dimbsvm.store.fingerprints.fingerprint_file` in the order of
        ``paths`` (the reader computes them on the workers, beside its scan);
        URLs need none.
        """
        if self.local and len(self.paths) == 1:
            (only,) = file_digests
            return only
        digest = hashlib.sha256()
        if self.local:
            root = _common_root(self.paths)
            for path, file_digest in zip(self.paths, file_digests, strict=True):
                digest.update(json.dumps([str(Path(path).relative_to(root)), file_digest]).encode())
        else:
            for path in self.paths:
                info = self.fs.info(path)
                marks = {k: str(info[k]) for k in _VERSION_FIELDS if info.get(k) is not None}
                digest.update(json.dumps([path, info.get("size"), marks], sort_keys=True).encode())
        return digest.hexdigest()


def is_url(text: str) -> bool:
    """Whether ``text`` names its protocol (``s3://...``, ``file://...``)."""
    return "://" in text


def looks_tabular(source) -> bool:
    """Whether a path or URL is one this package reads (without touching remote storage).

    True for any URL, a glob, a ``.parquet``/``.pq``/``.csv`` (compressed)
    suffix, or a local directory holding Parquet files.

    Examples
    --------
    >>> looks_tabular("data/train.csv.gz"), looks_tabular("s3://bucket/rows/"), looks_tabular("yeast5")
    (True, True, False)
    """
    text = str(source)
    if is_url(text) or _has_magic(text) or _format_of(text)[0] is not None:
        return True
    path = Path(text)
    return path.is_dir() and any(p.suffix.lower() in PARQUET_SUFFIXES for p in path.iterdir())


def locate(source, storage_options=None) -> Location:
    """List a source's files and tell their format.

    Parameters
    ----------
    source : str or path
        A file, a directory of Parquet (or CSV) files, or a glob; local or a URL.
    storage_options : dict, default=None
        Passed to the fsspec filesystem (credentials, ``endpoint_url``, ...).

    Raises
    ------
    DataError
        The filesystem's package is missing (naming the extra to install),
        nothing is found, the suffix is neither Parquet nor CSV, or the
        files mix formats.
    """
    text = str(source)
    fs, path = filesystem(text, storage_options)  # a missing package: one line naming the extra to install
    local = "file" in _protocols(fs)
    try:
        if _has_magic(path):
            paths = sorted(fs.glob(path))
        elif fs.isdir(path):
            found = sorted(fs.find(path))
            paths = [p for p in found if _format_of(p)[0] == "parquet"] or [p for p in found
                                                                           if _format_of(p)[0] == "csv"]
            if not paths:
                raise DataError(f"{text}: no Parquet (.parquet, .pq) or CSV (.csv, .csv.gz, ...) files in this "
                                "directory")
        elif fs.isfile(path):
            paths = [path]
        else:
            raise DataError(f"{text}: file not found")
    except OSError as exc:  # an object store's "access denied", a dead endpoint
        raise DataError(f"{text}: cannot list it: {one_line(exc)}") from exc
    if not paths:
        raise DataError(f"{text}: no file matches")
    formats = {_format_of(p) for p in paths}
    if len(formats) > 1:
        raise DataError(f"{text}: the files mix formats ({', '.join(sorted(str(f[0]) for f in formats))}); "
                        "point at one kind of file")
    fmt, compression = formats.pop()
    if fmt is None:
        raise DataError(f"{text}: unknown tabular file type; Parquet (.parquet, .pq) and CSV (.csv, .csv.gz, "
                        ".csv.bz2, .csv.xz, .csv.zst) are read from URLs, directories and globs")
    if compression is not None and compression not in compr:
        raise DataError(f"{text}: reading {compression}-compressed CSV needs the zstandard package: "
                        "pip install zstandard")
    urls = tuple(fs.unstrip_protocol(p) for p in paths) if not local else tuple(paths)
    return Location(text=text, format=fmt, compression=compression, urls=urls, local=local, fs=fs,
                    paths=tuple(paths))


def _protocols(fs) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _format_of(path: str) -> tuple[str | None, str | None]:
    """(format, compression) from a file name's suffixes."""
    name = PurePosixPath(path.split("://", 1)[-1]).name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet", None
    if name.endswith(CSV_SUFFIX):
        return "csv", None
    for suffix, compression in COMPRESSED_CSV.items():
        if name.endswith(CSV_SUFFIX + suffix):
            return "csv", compression
    return None, None


def _has_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def _common_root(paths) -> Path:
    parents = [Path(p).parent for p in paths]
    root = parents[0]
    while any(root not in (p, *p.parents) for p in parents):
        root = root.parent
    return root

