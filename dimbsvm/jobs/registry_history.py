"""The lines of a registry's ``history.jsonl``: its events as read (torn or glued lines recovered), and the
champion lineage they make (:mod:`dimbsvm.jobs.registry` reads and appends them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["History", "excerpt", "glued_event_start", "lineage", "parse_event"]


@dataclass
class History:
    """``history.jsonl`` as read: its events, and what a writer must repair."""

    events: list = field(default_factory=list)
    lines: list = field(default_factory=list)  # the complete lines' bytes, recovered ones rewritten
    complete: int = 0  # bytes up to the last newline
    size: int = 0
    recovered: list = field(default_factory=list)  # numbers of lines an event was recovered from


def lineage(events: list) -> list:
    """The champions the events made, oldest first: each promotion pushes its version (unless it is the champion
    already), each rollback pops one and names the version it went back to; the last is the champion.

    Examples
    --------
    >>> lineage([{"action": "promote", "version": "v1"}, {"action": "promote", "version": "v2"},
    ...          {"action": "rollback", "version": "v1"}])
    ['v1']
    """
    stack = []
    for event in events:
        action = event.get("action")
        if action in ("promote", "manual_promote"):
            if not stack or stack[-1] != event["version"]:  # promoting the champion again changes nothing
                stack.append(event["version"])
        elif action == "rollback":
            if stack:
                stack.pop()
            if not stack or stack[-1] != event["version"]:
                stack.append(event["version"])
    return stack


def parse_event(line: bytes) -> dict | None:
    """The event a history line holds, or None if it is not one."""
    try:
        event = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return event if isinstance(event, dict) and "action" in event else None


def glued_event_start(line: bytes) -> int | None:
    """Where a whole event starts in a line that begins with a torn one, or None.

    Examples
    --------
    >>> glued_event_start(b'{"action": "prom{"action": "promote", "version": "v2"}')
    16
    >>> glued_event_start(b'{"action": "prom') is None
    True
    """
    start = line.find(b"{", 1)
    while start != -1:
        if parse_event(line[start:]) is not None:
            return start
        start = line.find(b"{", start + 1)
    return None


def excerpt(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= 60 else text[:40] + " ... " + text[-15:])
