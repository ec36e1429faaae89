"""A directory of immutable model versions with one champion pointer.

Layout::

    registry/
      registry.json          {"dimbsvm_registry": 1}: marks the directory as a registry
      versions/<id>/         immutable once renamed into place
        model/               artifact + SHA-256 manifest (see artifacts.py)
        job.yaml             the job that trained it
        version.json         data fingerprint, holdout metrics, when
      history.jsonl          append-only: one JSON event per line, each ending in a newline
      champion.json          {"version": id, "event_id": ..., ...}: the pointer, replaced atomically
      tracking.json          {"mlflow": URI, "model_name": ...}: where retrain registers versions (optional;
                             promote and rollback move the MLflow champion alias there too)
      .lock                  flock'ed around every change

Which file is the truth: ``history.jsonl``. The champion is the version of
its last champion event (``promote``, ``manual_promote``, ``rollback``), and
the lineage that :meth:`ModelRegistry.rollback` steps back through is read
from it too. ``champion.json`` is the pointer derived from it, for a quick
look and for tools that read one file; a reader that finds the two disagreeing
trusts the history, and the next change re-points ``champion.json``.

Write order of a champion change, under the lock: the new pointer is written
to a temporary file and flushed (a full disk fails here, before anything
changed), then the event is appended to the history and flushed (the change
is committed from here), then the pointer is renamed into place. A version
is written completely under a temporary name and renamed before any pointer
names it. So a process killed at any byte, or a disk that fills up, leaves
the previous state or the new one:

* a torn last history line (no newline: its writer died or the disk filled
  mid-line) was never acknowledged; readers skip it and the next change cuts
  it off before appending, so no event is ever glued onto it. A failed append
  cuts its own bytes off at once;
* a history line that is not JSON in the middle of the file is either a torn
  line with a complete event glued on by an earlier dimbsvm (the event is
  recovered and the next change rewrites the line) or damage nothing can
  repair: a :class:`~dimbsvm.exceptions.StoreError` naming the file and line;
* a pointer without ``event_id`` was written by an earlier dimbsvm, which
  swapped the pointer before appending to the history: where it disagrees,
  the pointer is the newer and the next change records the missing event.

A directory is only ever written as a registry when it carries the marker
``registry.json``, is empty or missing (the marker is written first), or is a
registry of an earlier dimbsvm (``versions/`` with its pointer or history:
the marker is added on its next change). Any other directory is refused, and
nothing in it is written or deleted.

Only local paths are supported for now (``fcntl`` locks and ``os.replace``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from .._locks import exclusive_lock, fsync_dir, temporary_name, write_atomic
from ..exceptions import StoreError
from ..artifacts import load_artifact, save_model, verify_model
from .registry_history import History as _History, excerpt as _excerpt, glued_event_start as _glued_event_start
from .registry_history import lineage as _lineage, parse_event as _event

__all__ = ["CHAMPION_ACTIONS", "ModelRegistry"]

logger = logging.getLogger(__name__)

#: History actions that re-point the champion.
CHAMPION_ACTIONS = ("promote", "manual_promote", "rollback")

_MARKER, _HISTORY, _POINTER, _LOCK = "registry.json", "history.jsonl", "champion.json", ".lock"
_TRACKING = "tracking.json"
_VERSION_NAME = re.compile(r"v(\d+)-")
#: What a version id may be: a plain name (no separator, not ``.`` or ``..``).
_VERSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass
class _State:
    """The registry as one consistent reading: history first, then the pointer."""

    history: _History
    pointer: dict | None
    champion: str | None
    lineage: list
    missing_event: dict | None = None  # an earlier dimbsvm's pointer swap whose event it never appended


class ModelRegistry:
    """Model versions, the champion pointer and the history of decisions.

    Parameters
    ----------
    root : str or path
        Registry directory (created on first write; an existing directory
        must be a registry or empty).

    Examples
    --------
    >>> import tempfile
    >>> reg = ModelRegistry(tempfile.mkdtemp())
    >>> reg.champion() is None, reg.versions()
    (True, [])
    """

    def __init__(self, root):
        self.root = Path(root)

    # -- reading ---------------------------------------------------------
    def champion(self) -> str | None:
        """Id of the current champion, or None before the first promotion.

        Raises
        ------
        StoreError
            ``root`` is not a registry, or its history is damaged beyond repair.
        """
        return self._state().champion

    def versions(self) -> list[dict]:
        """Every complete version, oldest first, each with ``champion`` set."""
        champion = self.champion()
        out = []
        directory = self.root / "versions"
        for path in sorted(directory.glob("v*")) if directory.is_dir() else ():
            if path.name.endswith(".tmp") or not (path / "version.json").exists():
                continue
            info = _read_json(path / "version.json", f"registry {self.root}: version file")
            info["champion"] = info["id"] == champion
            out.append(info)
        return out

    def exists(self) -> bool:
        """Whether ``root`` is a registry (marked, or written by an earlier dimbsvm)."""
        return self._kind() in ("registry", "legacy")

    def check_usable(self) -> None:
        """Refuse, before any work, a ``root`` that is a file or a directory that is not a registry.

        A missing or empty directory is usable: the first change creates the registry there.

        Raises
        ------
        StoreError
            One line naming ``root``.
        """
        self._check_readable()

    def resolve(self, ref: str) -> str:
        """The version id ``ref`` names: ``"champion"``, a full id, or a unique prefix (``v0003``).

        Raises
        ------
        StoreError
            No champion yet, or no version (or more than one) matches.
        """
        if ref == "champion":
            champion = self.champion()
            if champion is None:
                raise StoreError(f"registry {self.root}: no champion yet")
            return champion
        ids = [info["id"] for info in self.versions()]
        if ref in ids:
            return ref
        matches = [version for version in ids if version.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise StoreError(f"registry {self.root}: no version {ref!r} (versions: {', '.join(ids) or 'none'})")
        raise StoreError(f"registry {self.root}: {ref!r} matches {len(matches)} versions: {', '.join(matches)}")

    def lineage(self) -> list[str]:
        """The champions in promotion order, rollbacks undone: the last is the champion, the one
        before it is what :meth:`rollback` returns to."""
        return self._state().lineage

    def history(self) -> list[dict]:
        """Every recorded event, oldest first (a torn last line, never acknowledged, is left out).

        Raises
        ------
        StoreError
            A line that is not an event and cannot be recovered, naming the file and line.
        """
        self._check_readable()
        return self._read_history().events

    def load(self, version: str):
        """Verify and load a version's model: ``(model, meta)``.

        Raises
        ------
        StoreError
            Unknown version, or its artifact fails verification (tampered or damaged).
        """
        path = self._version_path(version)
        if not (path / "version.json").exists():
            raise StoreError(f"registry {self.root}: no version {version!r}")
        try:
            return load_artifact(path / "model")
        except StoreError as exc:
            raise StoreError(f"registry {self.root}: version {version} is not loadable: {exc}") from exc

    def verify(self, version: str) -> None:
        """Check a version's artifact against its manifest without loading it."""
        verify_model(self._version_path(version) / "model")

    # -- writing ---------------------------------------------------------
    def add_version(self, model, *, job_text: str, info: dict, model_meta: dict) -> str:
        """Write a new immutable version; returns its id. Does not promote it.

        Raises
        ------
        StoreError
            The version cannot be written (a full disk): nothing of it is left behind.
        """
        with self._locked():
            versions = self.root / "versions"
            try:
                versions.mkdir(exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create {versions}: {exc.strerror or exc}") from exc
            for leftover in versions.glob("*.tmp"):  # only a writer holding the lock writes these: one that died
                shutil.rmtree(leftover, ignore_errors=True)
            numbers = [int(m.group(1)) for p in versions.iterdir() if (m := _VERSION_NAME.match(p.name))]
            version = f"v{1 + max(numbers, default=0):04d}-{_dt.datetime.now(_dt.UTC):%Y%m%dT%H%M%SZ}"
            tmp = versions / f"{version}.tmp"
            try:
                tmp.mkdir()
                save_model(model, tmp / "model", meta=model_meta)
                (tmp / "job.yaml").write_text(job_text)
                (tmp / "version.json").write_text(
                    json.dumps(dict(info, id=version, created_at=_now()), indent=2, default=str) + "\n")
                _fsync_tree(tmp)  # on disk before the name says it is complete
                os.replace(tmp, versions / version)
                fsync_dir(versions)
            except OSError as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                raise StoreError(f"registry {self.root}: cannot write version {version} in {versions}: "
                                 f"{exc.strerror or exc}; nothing was added") from exc
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        logger.info("registry %s: wrote version %s", self.root, version)
        return version

    def promote(self, version: str, *, reason: str, expected_champion: str | None, event: dict | None = None) -> bool:
        """Point the champion at ``version`` if the champion is still ``expected_champion``.

        The check and the swap happen under the registry lock, so of two
        retrainers that compared against the same champion only the first
        promotes. The decision is appended to the history either way.

        Returns
        -------
        promoted : bool

        Raises
        ------
        StoreError
            Unknown version, or the decision cannot be recorded (a full disk):
            then the registry is as it was.
        """
        with self._locked():
            self._require(version)
            current = self._state().champion
            if current != expected_champion:
                self._append(dict(event or {}, action="not_promoted", version=version, time=_now(),
                                  reason=f"the champion changed to {current} while {version} was "
                                         f"compared with {expected_champion}"))
                return False
            self._change_champion(dict(event or {}, action="promote", version=version, previous=current,
                                       time=_now(), reason=reason))
        logger.info("registry %s: champion is now %s (%s)", self.root, version, reason)
        return True

    def record(self, event: dict) -> None:
        """Append a decision that changed nothing (e.g. a challenger kept out)."""
        if event.get("action") in CHAMPION_ACTIONS:
            raise StoreError(f"registry {self.root}: a {event['action']!r} event changes the champion; "
                             "use promote, set_champion or rollback")
        with self._locked():
            self._append(dict(event, time=_now()))

    def set_champion(self, version: str, *, reason: str, action: str = "manual_promote") -> None:
        """Re-point the champion by hand (``dimbsvm promote``), recording why."""
        if not reason:
            raise StoreError("a reason is required to re-point the champion")
        if action not in CHAMPION_ACTIONS:
            raise StoreError(f"registry {self.root}: {action!r} is not a champion change "
                             f"(one of {', '.join(CHAMPION_ACTIONS)})")
        self._check_readable()
        self.verify(version)
        with self._locked():
            self._require(version)
            previous = self._state().champion
            self._change_champion({"action": action, "version": version, "previous": previous,
                                   "time": _now(), "reason": reason})

    def rollback(self, *, reason: str) -> str:
        """Re-point the champion at the one before it in the promotion history; returns that version.

        Rollbacks step back: after promotions of A, B, C, a rollback makes B
        the champion and a second one A (not C again). The lineage is read
        under the lock, so two rollbacks at once step back twice.
        """
        if not reason:
            raise StoreError("a reason is required to re-point the champion")
        with self._locked():
            state = self._state()
            current, lineage = state.champion, state.lineage
            if len(lineage) < 2 or lineage[-1] != current:
                raise StoreError(f"registry {self.root}: nothing to roll back to (champion {current} replaced "
                                 "no other)")
            target = lineage[-2]
            self._require(target)
            self.verify(target)
            self._change_champion({"action": "rollback", "version": target, "previous": current,
                                   "time": _now(), "reason": reason})
        return target

    def tracking(self) -> dict | None:
        """Where this registry's versions are also registered (``{"mlflow": URI, "model_name": ...}``), or None."""
        path = self.root / _TRACKING
        if not path.is_file():
            return None
        return _read_json(path, "tracking settings")

    def set_tracking(self, settings: dict) -> None:
        """Record where versions are registered (``dimbsvm retrain`` with tracking), for promote and rollback."""
        if self.tracking() == settings:
            return
        self._check_readable()
        with self._locked():
            write_atomic(self.root / _TRACKING, json.dumps(settings, indent=2, sort_keys=True) + "\n",
                         error=StoreError)

    # -- what the directory is -------------------------------------------
    def _kind(self) -> str:
        """``missing``, ``empty``, ``registry`` (marked), ``legacy`` (an earlier dimbsvm's), ``file`` or ``foreign``."""
        root = self.root
        if not root.exists():
            return "file" if root.is_symlink() else "missing"
        if not root.is_dir():
            return "file"
        marker = root / _MARKER
        if marker.exists():
            try:
                mark = json.loads(marker.read_text())
            except (OSError, ValueError):
                return "foreign"
            return "registry" if isinstance(mark, dict) and "dimbsvm_registry" in mark else "foreign"
        names = {path.name for path in root.iterdir()}
        if not names - {_LOCK}:
            return "empty"
        if (root / "versions").is_dir() and (names & {_POINTER, _HISTORY}
                                             or any((root / "versions").glob("v*/version.json"))):
            return "legacy"
        return "foreign"

    def _refuse(self, kind: str) -> None:
        if kind == "file":
            raise StoreError(f"registry {self.root} is a file (or a dangling link), not a registry directory")
        if kind == "foreign":
            raise StoreError(f"{self.root} is not a model registry (no {_MARKER}, and it holds other files): "
                             "dimbsvm neither writes into nor deletes from it; choose an empty or new directory")

    def _check_readable(self) -> None:
        self._refuse(self._kind())

    # -- reading the history and the pointer ----------------------------
    def _read_history(self) -> _History:
        path = self.root / _HISTORY
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return _History()
        except OSError as exc:
            raise StoreError(f"cannot read registry history {path}: {exc.strerror or exc}") from exc
        history = _History(complete=raw.rfind(b"\n") + 1, size=len(raw))
        for number, line in enumerate(raw[:history.complete].split(b"\n")[:-1], 1):
            if not line.strip():
                continue
            event = _event(line)
            if event is None:  # a torn line with a whole event glued on, by an earlier dimbsvm
                start = _glued_event_start(line)
                if start is None:
                    raise StoreError(
                        f"registry history {path}, line {number}, is damaged and cannot be repaired: "
                        f"{_excerpt(line)}; remove or fix that line by hand (each line must be one JSON event)")
                line = line[start:]
                event = _event(line)
                history.recovered.append(number)
            history.events.append(event)
            history.lines.append(line)
        return history

    def _read_pointer(self, history_has_champion: bool) -> dict | None:
        path = self.root / _POINTER
        try:
            pointer = json.loads(path.read_text())
            if not isinstance(pointer, dict) or not isinstance(pointer.get("version"), str):
                raise ValueError("no version in it")
            return pointer
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            if history_has_champion:  # the history is the truth; the next change rewrites the pointer
                logger.warning("registry %s: %s is damaged (%s); the champion is read from %s",
                               self.root, path, exc, _HISTORY)
                return {"version": None, "damaged": True}
            raise StoreError(f"registry pointer {path} is damaged ({exc}) and {_HISTORY} names no champion; "
                             "rewrite it as {\"version\": \"<champion id>\"}") from exc

    def _state(self) -> _State:
        """History first, then the pointer: a change between the two reads shows as the earlier state."""
        self._check_readable()
        history = self._read_history()
        champions = [event for event in history.events if event.get("action") in CHAMPION_ACTIONS]
        pointer = self._read_pointer(bool(champions))
        events, missing = champions, None
        if pointer is not None and "event_id" not in pointer and not pointer.get("damaged"):
            # an earlier dimbsvm swapped the pointer before appending its event: a pointer ahead is newer
            if not champions or champions[-1]["version"] != pointer["version"]:
                missing = {"action": "promote", "version": pointer["version"],
                           "previous": champions[-1]["version"] if champions else None,
                           "time": pointer.get("since") or _now(), "recovered": True,
                           "reason": f"recorded on repair: {_POINTER} named this version but {_HISTORY} had no "
                                     "event for it (an earlier dimbsvm was stopped between writing the two)"}
                events = champions + [missing]
        lineage = _lineage(events)
        champion = lineage[-1] if lineage else None
        if not events and pointer is not None and not pointer.get("damaged"):
            champion = pointer["version"]  # a pointer without any history (the history was removed)
        return _State(history, pointer, champion, lineage, missing)

    # -- writing ---------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self):
        """Hold the registry lock, having marked, adopted or repaired the directory."""
        self._refuse(self._kind())  # before anything is created in a directory that is not ours
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create registry {self.root}: {exc.strerror or exc}") from exc
        lock = exclusive_lock(self.root / _LOCK, f"registry {self.root}", wait=True)
        try:
            kind = self._kind()  # again: another process may have written it meanwhile
            self._refuse(kind)
            if kind != "registry":
                if kind == "legacy":
                    logger.info("registry %s: written by an earlier dimbsvm; marking it with %s", self.root, _MARKER)
                write_atomic(self.root / _MARKER, json.dumps({"dimbsvm_registry": 1}) + "\n", error=StoreError)
            self._repair()
            yield
        finally:
            lock.release(remove=False)  # the registry's lock file stays: removing it would gain nothing

    def _repair(self) -> None:
        """Make the files agree before a change: cut a torn tail, rewrite recovered lines, re-point."""
        path = self.root / _HISTORY
        # temporary files of a writer that died holding the lock (champion.json.tmp: an earlier dimbsvm's)
        for leftover in [*self.root.glob(".*.tmp"), self.root / f"{_POINTER}.tmp"]:
            with contextlib.suppress(OSError):
                leftover.unlink()
        state = self._state()
        history = state.history
        if history.recovered:
            logger.warning("registry %s: line(s) %s of %s held a torn event with a whole one glued on; keeping "
                           "the whole one", self.root, ", ".join(map(str, history.recovered)), path)
            write_atomic(path, b"".join(line + b"\n" for line in history.lines), error=StoreError)
        elif history.complete < history.size:
            logger.warning("registry %s: dropping a torn last line of %s (%d bytes, never acknowledged)",
                           self.root, path, history.size - history.complete)
            try:
                os.truncate(path, history.complete)
            except OSError as exc:
                raise StoreError(f"cannot repair registry history {path}: {exc.strerror or exc}") from exc
        if state.missing_event is not None:
            logger.warning("registry %s: %s named %s without its event in %s; recording it", self.root,
                           _POINTER, state.missing_event["version"], _HISTORY)
            self._append(dict(state.missing_event, event_id=_event_id()))
            state = self._state()
        if state.champion is not None and (state.pointer is None or "event_id" not in state.pointer
                                           or state.pointer.get("version") != state.champion):
            last = next((e for e in reversed(state.history.events) if e.get("action") in CHAMPION_ACTIONS), {})
            logger.info("registry %s: re-pointing %s at %s, as %s records", self.root, _POINTER, state.champion,
                        _HISTORY)
            write_atomic(self.root / _POINTER, _pointer_text(state.champion, last), error=StoreError)

    def _require(self, version: str) -> None:
        if not (self._version_path(version) / "version.json").exists():
            raise StoreError(f"registry {self.root}: no version {version!r}")

    def _version_path(self, version) -> Path:
        """The directory of ``version``, which must be one of ``versions/``'s own entries.

        A version id comes from the registry's files (its history, its
        champion pointer), which anyone with write access may have edited:
        an id such as ``../../elsewhere`` must not make the registry serve a
        model from outside itself.
        """
        versions = self.root / "versions"
        version = str(version)
        path = versions / version
        if not _VERSION_ID.fullmatch(version) or path.resolve().parent != versions.resolve():
            raise StoreError(f"registry {self.root}: version {version!r} is not a version of this registry (it "
                             "names a path outside versions/); its history or champion pointer was edited or damaged")
        return path

    def _change_champion(self, event: dict) -> None:
        """Commit a champion change: pointer prepared, event appended (the commit), pointer swapped."""
        event = dict(event, event_id=_event_id())
        pointer = self.root / _POINTER
        tmp = temporary_name(pointer)
        try:
            try:  # prepared first: a full disk fails here, before anything changed
                with open(tmp, "wb") as handle:
                    handle.write(_pointer_text(event["version"], event).encode())
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                raise StoreError(f"cannot write registry pointer {pointer}: {exc.strerror or exc}; the champion "
                                 f"is still {event.get('previous')}") from exc
            self._append(event)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        try:
            os.replace(tmp, pointer)
            fsync_dir(self.root)
        except OSError as exc:  # committed all the same: readers follow the history, the next change re-points
            logger.warning("registry %s: %s recorded in %s but %s was not updated (%s)", self.root,
                           event["version"], _HISTORY, pointer, exc.strerror or exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _append(self, event: dict) -> None:
        """Append one event as one line and flush it; a failed append leaves no byte of it behind."""
        path = self.root / _HISTORY
        data = (json.dumps(event, default=str) + "\n").encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot write registry history {path}: {exc.strerror or exc}") from exc
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):  # else the next change cuts the torn line off
                    os.ftruncate(fd, start)
                raise StoreError(f"cannot write registry history {path}: {exc.strerror or exc}; "
                                 f"the {event.get('action')} of {event.get('version')} was not recorded") from exc
        finally:
            os.close(fd)
        if start == 0:
            fsync_dir(self.root)


def _event_id() -> str:
    return secrets.token_hex(6)


def _pointer_text(version: str, event: dict) -> str:
    return json.dumps({"version": version, "since": event.get("time") or _now(), "reason": event.get("reason"),
                       "event_id": event.get("event_id")}) + "\n"


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{what} {path} is not readable: {exc}") from exc


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    for path in [directory, *(p for p in directory.rglob("*") if p.is_dir())]:
        fsync_dir(path)
