"""Where datasets live and which reader opens which file.

``READERS`` is the one table from file suffix to reader; :func:`load` is the
one entry point that uses it. Looking a KEEL dataset up by its bare name
(:func:`load_keel`) lives here too, so the readers never import the registry.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..exceptions import DataError
from ._base import Dataset
from .keel import read_keel
from .agnostic import load_agnostic
from .tabular import load_csv, load_npz, load_svmlight
from .timeseries import load_ts

__all__ = ["READERS", "bundled_names", "shared_datasets_dir", "load", "load_keel", "list_available"]

logger = logging.getLogger(__name__)

BUNDLED_DIR = Path(__file__).resolve().parent / "data"
SHARED_ENV = "DIMBSVM_SHARED_DATASETS"


def bundled_names() -> list[str]:
    """Names of the KEEL datasets shipped inside the package.

    Examples
    --------
    >>> "yeast5" in bundled_names()
    True
    """
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.dat"))


def shared_datasets_dir() -> Path | None:
    """The project's shared dataset folder, or None when it cannot be found.

    The environment variable ``DIMBSVM_SHARED_DATASETS`` wins when set.
    Otherwise, for the working directory, the package directory and each of
    their parents ``d``, the folder ``d/../shared/datasets`` is tried (the
    layout of a checkout next to a ``shared`` folder).

    Returns
    -------
    pathlib.Path or None
    """
    configured = os.environ.get(SHARED_ENV)
    if configured:
        path = Path(configured).expanduser()
        if path.is_dir():
            return path.resolve()
        logger.warning("%s=%s is not a directory; no shared datasets", SHARED_ENV, configured)
        return None
    cwd = Path.cwd().resolve()
    package = Path(__file__).resolve().parent
    for start in (cwd, package):
        for directory in (start, *start.parents):
            candidate = directory.parent / "shared" / "datasets"
            if candidate.is_dir():
                return candidate
    return None


def load_keel(name_or_path) -> Dataset:
    """Read a KEEL ``.dat`` file, or a KEEL dataset found by its bare name.

    Parameters
    ----------
    name_or_path : str or path-like
        Path to a ``.dat`` file, or a bare dataset name (``"yeast5"``) looked
        up in the bundled data, then in ``<shared>/keel/imbalanced/``.

    Returns
    -------
    Dataset
        As :func:`~dimbsvm.datasets.keel.read_keel` reads it.

    Raises
    ------
    DataError
        Unknown name, missing file, malformed header or rows (the message
        names the file and line).

    Examples
    --------
    >>> ds = load_keel("yeast5")
    >>> ds.X.shape, int(ds.y.sum()), ds.class_map
    ((1484, 8), 44, {'negative': 0, 'positive': 1})
    >>> ds.feature_names[:3]
    ['Mcg', 'Gvh', 'Alm']
    """
    return read_keel(_resolve_keel(name_or_path))


def _resolve_keel(name_or_path) -> Path:
    path = Path(name_or_path)
    if path.is_file():
        return path
    is_bare_name = path.parent == Path(".") and path.suffix in ("", ".dat")
    if not is_bare_name:
        raise DataError(f"{path}: file not found")
    stem = path.stem if path.suffix == ".dat" else path.name
    candidates = [BUNDLED_DIR / f"{stem}.dat"]
    shared = shared_datasets_dir()
    if shared is not None:
        candidates.append(shared / "keel" / "imbalanced" / f"{stem}.dat")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    where = f"; also looked in {candidates[-1].parent}" if shared is not None else ""
    raise DataError(
        f"{name_or_path!s}: no such file and no KEEL dataset of that name; "
        f"bundled datasets are {bundled_names()}{where}"
    )


#: The one table from file suffix to reader.
READERS = {
    ".dat": load_keel,
    ".csv": load_csv,
    ".npz": load_npz,
    ".svm": load_svmlight,
    ".libsvm": load_svmlight,
    ".svmlight": load_svmlight,
    ".txt": load_svmlight,
    ".data": load_agnostic,
    ".ts": load_ts,
}


def load(source, **kwargs) -> Dataset:
    """Read any supported dataset, choosing the reader by file suffix.

    Parameters
    ----------
    source : str or path-like
        A file (suffix picks the reader, see ``READERS``), a directory holding
        a ``*_train.data`` file (agnostic-learning set), or a bare KEEL
        dataset name without suffix (``"yeast5"``, see :func:`load_keel`), or
        the bare name of a shared agnostic-learning set (``"hiva"``).
    **kwargs
        Passed to the reader (e.g. ``target=`` for CSV).

    Returns
    -------
    Dataset

    Examples
    --------
    >>> load("yeast5").X.shape
    (1484, 8)
    """
    path = Path(source)
    if path.is_dir():
        if any(path.glob("*_train.data")):
            return load_agnostic(path, **kwargs)
        raise DataError(f"{path}: directory without a *_train.data file; nothing to load")
    suffix = path.suffix.lower()
    if not suffix and not path.exists():
        agnostic = _shared_agnostic(str(source))
        return load_agnostic(agnostic, **kwargs) if agnostic is not None else load_keel(str(source), **kwargs)
    reader = READERS.get(suffix)
    if reader is None:
        raise DataError(
            f"{path}: unknown file type {suffix or '(no suffix)'!r}; accepted suffixes are "
            f"{sorted(READERS)}, a directory with *_train.data, or a bundled KEEL name"
        )
    return reader(path, **kwargs)


def list_available() -> dict:
    """Dataset names that :func:`load` can find without a path.

    Returns
    -------
    dict
        ``{"bundled": [...], "shared": {"keel/imbalanced": [...],
        "keel/multiclass": [...], "agnostic": [...], "ucr": [...]}}``;
        ``"shared"`` is an empty dict when the shared folder is not found.

    Examples
    --------
    >>> "haberman" in list_available()["bundled"]
    True
    """
    shared = shared_datasets_dir()
    found: dict = {}
    if shared is not None:
        agnostic = shared / "agnostic"
        found = {
            "keel/imbalanced": _stems(shared / "keel" / "imbalanced", "*.dat"),
            "keel/multiclass": _stems(shared / "keel" / "multiclass", "*.csv"),
            "agnostic": sorted(
                d.name for d in agnostic.iterdir() if d.is_dir() and any(d.glob("*_train.data"))
            )
            if agnostic.is_dir()
            else [],
            "ucr": _stems(shared / "ucr", "*.ts"),
        }
    return {"bundled": bundled_names(), "shared": found}


def _shared_agnostic(name: str) -> Path | None:
    """The shared agnostic-learning set of this bare name (``hiva``), or None."""
    shared = shared_datasets_dir()
    folder = None if shared is None or "/" in name else shared / "agnostic" / name
    return folder if folder is not None and folder.is_dir() and any(folder.glob("*_train.data")) else None


def _stems(folder: Path, pattern: str) -> list[str]:
    return sorted(p.stem for p in folder.glob(pattern)) if folder.is_dir() else []
