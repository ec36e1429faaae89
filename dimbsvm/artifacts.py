"""Model artifacts that loading cannot turn into code execution.

A model directory holds::

    model.skops     the fitted estimator, in skops' format (no pickle)
    meta.json       what the model is: job, estimator, features (names in
                    training order), class map and positive class
    manifest.json   SHA-256 of every file above, checked on load

skops rebuilds objects only from types it trusts: scikit-learn's own, and the
dimbsvm classes the registered methods declare
(:func:`dimbsvm.estimators.trusted_types`): estimator and transformer classes,
never functions; loading builds them from their stored attributes and runs
none of their methods. A file that asks for any other
type is refused before anything in it is constructed. The manifest catches
damage and tampering of single files (a changed model with an unchanged
manifest); it is not a signature, so keep model directories where only
trusted writers can write.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import types
from pathlib import Path

from ._locks import temporary_name
from ._model_file import writing_model_file
from ._version import __version__
from .estimators import trusted_types
from .exceptions import StoreError
from .store.location import filesystem, is_url, location

logger = logging.getLogger(__name__)

__all__ = ["MODEL_FORMAT", "READABLE_MODEL_FORMATS", "save_model", "load_artifact", "verify_model", "save_object",
           "load_object", "positive_class"]


#: Held while ``skops.io`` is imported, by a loader or by the writer (:func:`_skops_dump`).
_SKOPS_IMPORT = threading.Lock()
#: skops' ``dump`` as :func:`_skops_dump` found it, once found.
_dump = None


def _skops():
    """``skops.io``, imported when a model is first loaded.

    Importing it imports every scikit-learn module (its list of trusted types
    walks them all): about a second that the checks, ``validate`` and runs
    without a model need not pay. Saving does not import it
    (:func:`_skops_dump`).
    """
    with _SKOPS_IMPORT:
        import skops.io

    return skops.io


def _skops_dump():
    """skops' ``dump``, without building the default trusted types of skops' loaders.

    ``skops.io`` computes, when imported, the default trusted types its
    *loaders* accept (``skops.io._trusted_types``: every scikit-learn estimator,
    found by importing every scikit-learn module, pytest included). Writing a
    file uses none of them: the writers (``get_state``) are plain functions
    that turn attributes into a schema and arrays. Where nothing in this process
    has imported ``skops.io`` yet, its modules are imported here with an empty
    stand-in for ``_trusted_types``, this ``dump`` is kept, and the modules are
    then taken out of ``sys.modules`` again, so that a later load imports the
    real ``skops.io`` and checks with its whole trusted list. The files are the
    same (``tests/test_saved_models.py`` compares them with ``skops.io.dump``'s).
    A loader left from the stand-in could only trust fewer types, never more,
    and none is left: the modules are dropped and imports of ``skops.io`` in
    this module wait for the lock.
    """
    global _dump
    with _SKOPS_IMPORT:
        if _dump is not None:
            return _dump
        if "skops.io" in sys.modules:  # imported already (e.g. to load a model): its dump costs nothing more
            import skops.io  # (waits for an import under way elsewhere to finish)

            _dump = skops.io.dump
            return _dump
        stand_in = types.ModuleType("skops.io._trusted_types", "empty trusted-type lists: skops' writers need none")
        stand_in.__getattr__ = _no_trusted_types
        sys.modules["skops.io._trusted_types"] = stand_in
        try:
            from skops.io._persist import dump
        except ImportError as exc:  # a skops whose writers want more of _trusted_types than its lists
            logger.debug("skops' writer needs its trusted types (%s); importing skops.io whole", exc)
            dump = None
        finally:
            import skops

            # a copy: another thread may be importing (the report's libraries) while this one saves
            for name in [name for name in sys.modules.copy() if name == "skops.io" or name.startswith("skops.io.")]:
                del sys.modules[name]
            skops.__dict__.pop("io", None)
        if dump is None:
            import skops.io

            dump = skops.io.dump
        _dump = dump
        return _dump


def _no_trusted_types(name):
    """Every trusted-type list of the stand-in ``skops.io._trusted_types``: empty."""
    if name.isupper():
        return []
    raise AttributeError(name)


_MODEL = "model.skops"
_META = "meta.json"
_MANIFEST = "manifest.json"

#: The format :func:`save_model` writes into a model's manifest.
MODEL_FORMAT = "dimbsvm-model-1"

#: The model formats this release loads (CHANGELOG.md states the promise): a model of any other is refused.
READABLE_MODEL_FORMATS = frozenset({MODEL_FORMAT})


def save_model(model, directory, *, meta: dict) -> Path:
    """Write ``model`` and its manifest to ``directory`` (created; must not exist).

    The directory is written under a temporary name and renamed when complete.

    Returns
    -------
    path : pathlib.Path
    """
    directory = Path(directory)
    if directory.exists():
        raise FileExistsError(f"model directory {directory} already exists")
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with writing_model_file():
        _skops_dump()(model, tmp / _MODEL)
    (tmp / _META).write_text(json.dumps(dict(meta, dimbsvm_version=__version__), indent=2, default=str) + "\n")
    manifest = {
        "format": MODEL_FORMAT,
        "files": {name: _sha256(tmp / name) for name in (_MODEL, _META)},
    }
    (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, directory)
    return directory


def verify_model(directory) -> dict:
    """Check every file of a model directory against its manifest; return the meta.

    Raises
    ------
    StoreError
        Missing manifest or file, a SHA-256 mismatch (naming the file), or a
        format this release does not read (:data:`READABLE_MODEL_FORMATS`).
    """
    directory = Path(directory)
    try:
        manifest = json.loads((directory / _MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"model {directory}: cannot read {_MANIFEST} ({exc})") from exc
    written = manifest.get("format") if isinstance(manifest, dict) else None
    if written not in READABLE_MODEL_FORMATS:
        raise StoreError(f"model {directory}: its format {written!r} is not one dimbsvm {__version__} reads "
                         f"({', '.join(sorted(READABLE_MODEL_FORMATS))}); load it with the release that wrote it "
                         "(meta.json's dimbsvm_version), or retrain")
    for name, expected in manifest.get("files", {}).items():
        path = directory / name
        if not path.is_file():
            raise StoreError(f"model {directory}: {name} is missing")
        actual = _sha256(path)
        if actual != expected:
            raise StoreError(f"model {directory}: {name} does not match its SHA-256 in {_MANIFEST} "
                             f"(expected {expected[:16]}…, found {actual[:16]}…); refusing to load it")
    if set(manifest.get("files", {})) != {_MODEL, _META}:
        raise StoreError(f"model {directory}: {_MANIFEST} does not list {_MODEL} and {_META}")
    return json.loads((directory / _META).read_text())


def load_artifact(directory, *, shown: str | None = None):
    """Verify a model directory and load its estimator with only trusted types.

    Parameters
    ----------
    directory : str or path-like
        A local model directory, or one at an fsspec URL (``s3://.../model``,
        e.g. a run published there), whose files are copied to a temporary
        directory and verified there, so what is loaded is what was checked.
    shown : str, optional
        How messages name the model (by default ``directory``): where it came
        from when ``directory`` is a download.

    Returns
    -------
    model : estimator
    meta : dict

    Raises
    ------
    StoreError
        Failed verification, or the file asks for a type that is not trusted.
    """
    if is_url(str(directory)):
        with tempfile.TemporaryDirectory(prefix="dimbsvm-model-") as tmp:
            local = Path(tmp)
            _fetch_model(location(str(directory)), local)
            return _load_verified(local, shown=shown or str(directory))
    return _load_verified(Path(directory), shown=shown or str(directory))


def _fetch_model(url: str, into: Path) -> None:
    """Copy a model directory's files from a URL (each named in the error when missing)."""
    fs, path = filesystem(url)
    for name in (_MANIFEST, _MODEL, _META):
        if not fs.exists(f"{path}/{name}"):
            raise StoreError(f"model {url}: {name} is missing")
        fs.get_file(f"{path}/{name}", str(into / name))


def _load_verified(directory: Path, *, shown: str):
    try:
        meta = verify_model(directory)
    except StoreError as exc:
        raise StoreError(str(exc).replace(f"model {directory}", f"model {shown}", 1)) from None
    if meta.get("dimbsvm_version") not in (None, __version__):
        logger.warning("model %s was written by dimbsvm %s; this is %s: its format is one this release reads, and "
                       "its scores may still differ where the estimators changed (CHANGELOG.md)", shown,
                       meta["dimbsvm_version"], __version__)
    path = directory / _MODEL
    untrusted = [t for t in _skops().get_untrusted_types(file=path) if t not in trusted_types()]
    if untrusted:
        raise StoreError(f"model {shown} contains types that are not trusted: {', '.join(untrusted)}")
    return _skops().load(path, trusted=trusted_types()), meta


def positive_class(meta: dict) -> str | None:
    """The name of a model's positive class, as its meta records it; ``None`` where the meta cannot tell.

    The meta's ``positive_class`` where present; else (models written before
    it was recorded) the class that ``class_map`` gives the code
    ``positive_label``.

    Examples
    --------
    >>> positive_class({"class_map": {"negative": 0, "positive": 1}, "positive_label": 1})
    'positive'
    >>> positive_class({"class_map": {}, "positive_label": 1}) is None
    True
    """
    if meta.get("positive_class") is not None:
        return str(meta["positive_class"])
    code = meta.get("positive_label")
    names = [name for name, value in (meta.get("class_map") or {}).items() if value == code]
    return names[0] if code is not None and len(names) == 1 else None


def save_object(obj, path) -> Path:
    """Write one object (e.g. a finished ensemble member) in skops' format, atomically.

    For a run's own intermediate results, so that a resumed run reloads them
    with the same trust rules as a model (:func:`load_object`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # dimbsvm's temporary name: what a killed writer leaves is cleaned up with the run's other leftovers, and a
    # run's mirror at a URL does not send it
    tmp = temporary_name(path)
    with writing_model_file():
        _skops_dump()(obj, tmp)
    os.replace(tmp, path)
    return path


def load_object(path):
    """Load a file written by :func:`save_object`, trusting only :func:`~dimbsvm.estimators.trusted_types` and scikit-learn's.

    Raises
    ------
    StoreError
        The file asks for a type that is not trusted, or cannot be read.
    """
    path = Path(path)
    try:
        untrusted = [t for t in _skops().get_untrusted_types(file=path) if t not in trusted_types()]
    except Exception as exc:  # skops raises several types for damaged files
        raise StoreError(f"{path}: cannot be read ({exc})") from exc
    if untrusted:
        raise StoreError(f"{path} contains types that are not trusted: {', '.join(untrusted)}")
    return _skops().load(path, trusted=trusted_types())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
