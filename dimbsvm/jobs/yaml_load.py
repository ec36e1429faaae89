"""Reading job and suite files: YAML parsed with limits, and duplicate keys refused.

``yaml.safe_load`` constructs no arbitrary objects, but it still trusts the
document's shape:

* a key given twice silently keeps the last value (``cv: {n_splits: 3}``
  followed later by ``n_splits: 10``), so a job may not run what its author
  reads in it;
* aliases (``*name``) share one node many times, and a document of a few
  hundred bytes can expand to billions of values (the "billion laughs"
  bomb): every later walk of the job (schema validation, fingerprints, copies)
  then runs out of memory or time;
* nesting thousands deep overflows the parser's stack (libyaml's composer
  crashes the interpreter; the pure-Python one raises ``RecursionError``);
* a path that is not a regular file (a FIFO, ``/dev/zero``, a directory)
  blocks or reads forever.

:func:`read_text_file` opens the file without blocking, refuses anything but
a regular file of at most :data:`MAX_FILE_BYTES`, and :func:`parse_yaml`
composes the document with libyaml's event parser (when present) and a
composer that counts: at most :data:`MAX_DEPTH` levels, aliases expanding to
at most :data:`MAX_EXPANDED_NODES` values, no recursive alias, no duplicate
key. Each refusal is a :class:`~dimbsvm.exceptions.JobSpecError` of one line
naming the file, the line and the cause.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, ScalarNode
from yaml.resolver import Resolver

from ..exceptions import JobSpecError

__all__ = ["MAX_DEPTH", "MAX_EXPANDED_NODES", "MAX_FILE_BYTES", "parse_yaml", "read_text_file"]

#: Largest job or suite file read, in bytes. The bundled jobs and suites are a few KiB; a megabyte of YAML is
#: thousands of search candidates, and past that the parse itself takes seconds.
MAX_FILE_BYTES = 1 << 20

#: Deepest nesting of mappings and sequences. A job nests 5 levels (``search.params.C.log_uniform``); the
#: limit stays far below the depth at which the parser's recursion fails (about 300 levels).
MAX_DEPTH = 64

#: Most values (nodes) a document may hold once its aliases are expanded. Far above any job (a few hundred)
#: and far below a YAML bomb (10**9 from 481 bytes).
MAX_EXPANDED_NODES = 100_000

_MERGE_TAG = "tag:yaml.org,2002:merge"

try:  # libyaml scans and parses in C; only the composing below is Python
    from yaml.cyaml import CParser as _EventSource
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventSource(Reader, Scanner, Parser):
        def __init__(self, stream):
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


def read_text_file(path, what: str) -> str:
    """The text of ``path``, a regular UTF-8 file of at most :data:`MAX_FILE_BYTES`.

    The file is opened without blocking and checked before anything is read,
    so a FIFO, a device or a directory is refused at once.

    Parameters
    ----------
    path : str or path-like
    what : str
        What the file is ("job", "suite"), for messages.

    Returns
    -------
    str

    Raises
    ------
    JobSpecError
        ``cannot read {what} file PATH: ...`` naming the reason.

    Examples
    --------
    >>> read_text_file("/dev/zero", "job")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: cannot read job file /dev/zero: it is a character device, not a regular file
    """
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise JobSpecError(f"cannot read {what} file {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JobSpecError(f"cannot read {what} file {path}: it is {_file_kind(info.st_mode)}, not a regular "
                               "file")
        if info.st_size > MAX_FILE_BYTES:
            raise JobSpecError(f"cannot read {what} file {path}: it is {_size(info.st_size)}, more than a {what} "
                               f"file may be ({_size(MAX_FILE_BYTES)})")
        data = _read_at_most(fd, MAX_FILE_BYTES + 1)  # + 1: a file that grew since fstat is still caught
    except OSError as exc:
        raise JobSpecError(f"cannot read {what} file {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise JobSpecError(f"cannot read {what} file {path}: it is more than a {what} file may be "
                           f"({_size(MAX_FILE_BYTES)})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobSpecError(f"cannot read {what} file {path}: not UTF-8 text (byte {exc.start} is "
                           f"{data[exc.start]:#04x})") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, min(1 << 16, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def parse_yaml(text: str, where: str):
    """The one YAML document in ``text``, composed with the limits of this module.

    Parameters
    ----------
    text : str
        The document.
    where : str
        The file, as messages name it (e.g. ``"job file jobs/x.yaml"``).

    Returns
    -------
    object
        What ``yaml.safe_load`` would return (``None`` for an empty document).

    Raises
    ------
    JobSpecError
        Not valid YAML, a duplicate key, nesting deeper than
        :data:`MAX_DEPTH`, a recursive alias, or aliases expanding past
        :data:`MAX_EXPANDED_NODES` values.

    Examples
    --------
    >>> parse_yaml("cv: {n_splits: 3}\\nmetrics: [g_mean]\\n", "job file x.yaml")
    {'cv': {'n_splits': 3}, 'metrics': ['g_mean']}
    >>> parse_yaml("cv:\\n  n_splits: 3\\n  n_splits: 10\\n", "job file x.yaml")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: job file x.yaml: duplicate key 'cv.n_splits' on line 3 (first on line 2); \
YAML would silently keep the last one: remove one of them
    """
    loader = _LimitedLoader(text, where)
    try:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own limit (1000 levels), met before ours when it scans ahead
            line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 1
            raise JobSpecError(f"{where}: nested more than {MAX_DEPTH} levels deep at line {line}") from None
        raise JobSpecError(f"{where} is not valid YAML: {exc}") from exc
    finally:
        if hasattr(loader, "dispose"):
            loader.dispose()


class _LimitedComposer(Composer):
    """PyYAML's composer, counting depth and alias expansion, and refusing duplicate keys.

    ``_expanded`` counts the document's nodes with each alias counted as the
    whole subtree it stands for (the anchored node's count, recorded when that
    node was finished), so a bomb is refused at the alias that crosses the
    limit, before anything is built from it.
    """

    def __init__(self, where: str):
        Composer.__init__(self)
        self._where = where
        self._depth = 0
        self._expanded = 0
        self._anchor_sizes = {}  # anchor -> expanded nodes of its (finished) node
        self._path = []  # keys and indices from the root to the node being composed

    def compose_node(self, parent, index):
        event = self.peek_event()
        if self.check_event(AliasEvent):
            self._expand_alias(event)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise JobSpecError(f"{self._where}: nested more than {MAX_DEPTH} levels deep at line "
                               f"{event.start_mark.line + 1}")
        self._path.append(_path_part(index))
        before = self._expanded
        self._expanded += 1
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, MappingNode):
                self._refuse_duplicate_keys(node)
        finally:
            self._path.pop()
            self._depth -= 1
        if event.anchor is not None:
            self._anchor_sizes[event.anchor] = self._expanded - before
        return node

    def _expand_alias(self, event) -> None:
        line = event.start_mark.line + 1
        if event.anchor in self.anchors and event.anchor not in self._anchor_sizes:
            raise JobSpecError(f"{self._where}: alias *{event.anchor} on line {line} refers to a node that "
                               "contains it (a recursive structure)")
        self._expanded += self._anchor_sizes.get(event.anchor, 1)  # an unknown anchor: the composer says so
        if self._expanded > MAX_EXPANDED_NODES:
            raise JobSpecError(f"{self._where}: aliases expand the document to more than {MAX_EXPANDED_NODES} "
                               f"values (at *{event.anchor} on line {line}); write the values out instead of "
                               "repeating aliases")

    def _refuse_duplicate_keys(self, node: MappingNode) -> None:
        first = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                continue  # merged keys (<<) may be overridden: that is what a merge is for
            name = self._key(key)
            line = key.start_mark.line + 1
            if name in first:
                dotted = ".".join([*filter(None, self._path), str(key.value)])
                raise JobSpecError(f"{self._where}: duplicate key '{dotted}' on line {line} (first on line "
                                   f"{first[name]}); YAML would silently keep the last one: remove one of them")
            first[name] = line

    def _key(self, key: ScalarNode):
        """The key as the constructed mapping will hold it (``1`` and ``1.0`` are the same key)."""
        try:
            value = self.construct_object(key)
            hash(value)
            return value
        except (yaml.YAMLError, TypeError, ValueError):
            return key.tag, key.value


def _path_part(index):
    """A path component from ``compose_node``'s ``index``: a key node, a list index, or ``None`` (a key itself)."""
    if isinstance(index, ScalarNode):
        return str(index.value)
    if isinstance(index, int) and not isinstance(index, bool):
        return str(index)
    return None


class _LimitedLoader(_EventSource, _LimitedComposer, SafeConstructor, Resolver):
    """libyaml's events (or PyYAML's), the limited composer, and ``safe_load``'s constructor."""

    def __init__(self, stream: str, where: str):
        _EventSource.__init__(self, stream)
        _LimitedComposer.__init__(self, where)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    # CParser composes in C: the Python composer's methods must win over its own
    get_single_node = _LimitedComposer.get_single_node
    compose_document = _LimitedComposer.compose_document
    compose_node = _LimitedComposer.compose_node
    compose_scalar_node = _LimitedComposer.compose_scalar_node
    compose_sequence_node = _LimitedComposer.compose_sequence_node
    compose_mapping_node = _LimitedComposer.compose_mapping_node


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"
