"""A directory of immutable model versions with one champion pointer.

Layout::

    registry/
      versions/<id>/         immutable once renamed into place
        model/               artifact + SHA-256 manifest (see artifacts.py)
        job.yaml             the job that trained it
        version.json         data fingerprint, holdout metrics, when
      champion.json          {"version": id, ...}: replaced atomically (os.replace)
      history.jsonl          append-only: one JSON object per event
      .lock                  flock'ed around every change

Consistency: a version is written completely under a temporary name and
renamed, *then* the pointer is swapped, *then* history is appended. A process
killed between the steps leaves a complete version that is simply not the
champion (``versions()`` lists it with ``champion: False``), never a pointer
to a half-written model. The pointer swap is a compare-and-swap under an
exclusive file lock, so two retrainers racing on one registry cannot both
promote against the same champion.

Only local paths are supported for now (``fcntl`` locks and ``os.replace``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import os
import shutil
from pathlib import Path

from ..exceptions import StoreError
from .artifacts import load_model, save_model, verify_model

__all__ = ["ModelRegistry"]

logger = logging.getLogger(__name__)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class ModelRegistry:
    """Model versions, the champion pointer and the history of decisions.

    Parameters
    ----------
    root : str or path
        Registry directory (created on first write).

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
        """Id of the current champion, or None before the first promotion."""
        path = self.root / "champion.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())["version"]
        except (ValueError, KeyError) as exc:
            raise StoreError(f"registry {self.root}: champion.json is damaged ({exc})") from exc

    def versions(self) -> list[dict]:
        """Every complete version, oldest first, each with ``champion`` set."""
        champion = self.champion()
        out = []
        for path in sorted((self.root / "versions").glob("v*")):
            if path.name.endswith(".tmp") or not (path / "version.json").exists():
                continue
            info = json.loads((path / "version.json").read_text())
            info["champion"] = info["id"] == champion
            out.append(info)
        return out

    def exists(self) -> bool:
        """Whether ``root`` is a registry (it has a ``versions/`` directory or a champion pointer)."""
        return (self.root / "versions").is_dir() or (self.root / "champion.json").exists()

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
        stack = []
        for event in self.history():
            action = event.get("action")
            if action in ("promote", "manual_promote"):
                stack.append(event["version"])
            elif action == "rollback":
                if stack:
                    stack.pop()
                if not stack or stack[-1] != event["version"]:
                    stack.append(event["version"])
        return stack

    def history(self) -> list[dict]:
        """Every recorded event, oldest first."""
        path = self.root / "history.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def load(self, version: str):
        """Verify and load a version's model: ``(model, meta)``.

        Raises
        ------
        StoreError
            Unknown version, or its artifact fails verification (tampered or damaged).
        """
        path = self.root / "versions" / version
        if not (path / "version.json").exists():
            raise StoreError(f"registry {self.root}: no version {version!r}")
        try:
            return load_model(path / "model")
        except StoreError as exc:
            raise StoreError(f"registry {self.root}: version {version} is not loadable: {exc}") from exc

    def verify(self, version: str) -> None:
        """Check a version's artifact against its manifest without loading it."""
        verify_model(self.root / "versions" / version / "model")

    # -- writing ---------------------------------------------------------
    def add_version(self, model, *, job_text: str, info: dict, model_meta: dict) -> str:
        """Write a new immutable version; returns its id. Does not promote it."""
        with self._locked():
            versions = self.root / "versions"
            versions.mkdir(parents=True, exist_ok=True)
            number = 1 + sum(1 for p in versions.glob("v*") if not p.name.endswith(".tmp"))
            version = f"v{number:04d}-{_dt.datetime.now(_dt.UTC):%Y%m%dT%H%M%SZ}"
            tmp = versions / f"{version}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            save_model(model, tmp / "model", meta=model_meta)
            (tmp / "job.yaml").write_text(job_text)
            (tmp / "version.json").write_text(
                json.dumps(dict(info, id=version, created_at=_now()), indent=2, default=str) + "\n")
            os.replace(tmp, versions / version)
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
        """
        with self._locked():
            if not (self.root / "versions" / version / "version.json").exists():
                raise StoreError(f"registry {self.root}: no version {version!r}")
            current = self.champion()
            if current != expected_champion:
                self._append_history(dict(event or {}, action="not_promoted", version=version, time=_now(),
                                          reason=f"the champion changed to {current} while {version} was "
                                                 f"compared with {expected_champion}"))
                return False
            self._swap_pointer(version, reason)
            self._append_history(dict(event or {}, action="promote", version=version, previous=current,
                                      time=_now(), reason=reason))
        logger.info("registry %s: champion is now %s (%s)", self.root, version, reason)
        return True

    def record(self, event: dict) -> None:
        """Append a decision that changed nothing (e.g. a challenger kept out)."""
        with self._locked():
            self._append_history(dict(event, time=_now()))

    def set_champion(self, version: str, *, reason: str, action: str = "manual_promote") -> None:
        """Re-point the champion by hand (``dimbsvm promote``), recording why."""
        if not reason:
            raise StoreError("a reason is required to re-point the champion")
        self.verify(version)
        with self._locked():
            if not (self.root / "versions" / version / "version.json").exists():
                raise StoreError(f"registry {self.root}: no version {version!r}")
            previous = self.champion()
            self._swap_pointer(version, reason)
            self._append_history({"action": action, "version": version, "previous": previous,
                                  "time": _now(), "reason": reason})

    def rollback(self, *, reason: str) -> str:
        """Re-point the champion at the one before it in the promotion history; returns that version.

        Rollbacks step back: after promotions of A, B, C, a rollback makes B
        the champion and a second one A (not C again).
        """
        current, lineage = self.champion(), self.lineage()
        if len(lineage) < 2 or lineage[-1] != current:
            raise StoreError(f"registry {self.root}: nothing to roll back to (champion {current} replaced no other)")
        self.set_champion(lineage[-2], reason=reason, action="rollback")
        return lineage[-2]

    # -- internals -------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _swap_pointer(self, version: str, reason: str) -> None:
        tmp = self.root / "champion.json.tmp"
        tmp.write_text(json.dumps({"version": version, "since": _now(), "reason": reason}) + "\n")
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, self.root / "champion.json")

    def _append_history(self, event: dict) -> None:
        with open(self.root / "history.jsonl", "a") as handle:
            handle.write(json.dumps(event, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
