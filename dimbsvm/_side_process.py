"""A Python process beside this one that runs calls in order: work taken off this process's critical path.

A run in this process spends its time on one core importing scikit-learn and
fitting, while the other core could be importing and drawing the report.
Threads cannot do that (both are Python code holding the interpreter lock);
a process can.

The side process is a fresh interpreter (``sys.executable -m
dimbsvm._side_process``), not a fork, so it is safe whatever threads this
process has. It reads pickled calls on its standard input and answers each on
its standard output, one at a time, in the order they came. It ends when its
standard input closes: when this process closes it, exits or is killed, so it
outlives its parent by at most the call it is running. Functions are pickled
by reference: a function it runs must live in a module that imports quickly
(what that module imports, the side process imports too).
"""

from __future__ import annotations

import collections
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future

__all__ = ["SideProcess", "SideProcessError"]

logger = logging.getLogger(__name__)

_HEADER = struct.Struct("<Q")  # the length of the pickle that follows


class SideProcessError(RuntimeError):
    """The side process could not answer a call: it did not start, it died, or its answer could not be pickled."""


class SideProcess:
    """A Python process that runs submitted calls in order; ``submit`` returns a :class:`~concurrent.futures.Future`.

    Raises
    ------
    SideProcessError
        Where the process cannot be started.
    """

    def __init__(self):
        env = dict(os.environ)
        # the same modules as here, whichever way this process found them (an installed package, a checkout on
        # PYTHONPATH, a test runner's rootdir)
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
        try:
            # with this interpreter's warning filters (-W), as a child of `python -W error` should be
            command = [sys.executable, *(f"-W{option}" for option in sys.warnoptions), "-m", __name__]
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as exc:
            raise SideProcessError(f"could not start a side process: {exc}") from exc
        self._pending = collections.deque()  # futures of the calls sent, answered in this order
        self._lock = threading.Lock()
        self._closed = False
        self._reader = threading.Thread(target=self._read_answers, name="dimbsvm-side-process", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether it still takes calls: neither closed nor ended."""
        with self._lock:
            return not self._closed and self._process.poll() is None

    def submit(self, func, /, *args, **kwargs) -> Future:
        """Run ``func(*args, **kwargs)`` in the side process after the calls submitted before it.

        The call runs in this process's working directory as it is now (a
        relative path means the same file on both sides, even after this
        process changed directory since the side process started).
        """
        future = Future()
        request = pickle.dumps((func, args, kwargs, _working_directory()), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._closed:
                future.set_exception(SideProcessError("the side process is closed or has died"))
                return future
            self._pending.append(future)
            try:
                self._process.stdin.write(_HEADER.pack(len(request)) + request)
                self._process.stdin.flush()
            except OSError as exc:  # it died: the reader fails every pending call
                logger.debug("side process %d: a call could not be sent: %s", self.pid, exc)
        return future

    def close(self) -> None:
        """Close its standard input, so that it ends; killed where calls are still unanswered (they fail).

        Nobody waits for those answers any more (this process is exiting, or
        gave up on the work): the process stops now rather than finish them.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unanswered = bool(self._pending)
            try:
                self._process.stdin.close()
            except OSError:
                pass
        if unanswered:
            self._process.kill()

    def _read_answers(self) -> None:
        answers = self._process.stdout
        while True:
            answer = _read_message(answers)
            if answer is None:
                break
            with self._lock:
                future = self._pending.popleft()
            try:
                ok, value = pickle.loads(answer)
            except Exception as exc:  # noqa: BLE001 - e.g. an exception class this process cannot import
                future.set_exception(SideProcessError(f"the side process's answer could not be read: {exc}"))
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        with self._lock:
            self._closed = True
            pending, self._pending = list(self._pending), collections.deque()
        code = self._process.wait()
        for future in pending:
            future.set_exception(SideProcessError(f"the side process ended (exit status {code}) before answering"))


def _read_message(stream):
    """The next length-prefixed message of ``stream``, or None at its end."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    message = stream.read(size)
    return message if len(message) == size else None


def _working_directory() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # removed since this process entered it: the side process stays where it is
        return None


def _answer(func, args, kwargs, directory) -> bytes:
    try:
        if directory is not None:
            os.chdir(directory)
        outcome = (True, func(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - handed to the caller, as a future's exception is
        outcome = (False, exc)
    try:
        return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception: its description instead
        what = f"{type(outcome[1]).__name__}: {outcome[1]}" if not outcome[0] else "its result"
        return pickle.dumps((False, SideProcessError(f"could not send back {what} ({exc})")))


def serve(requests, answers) -> None:
    """Answer the calls read from ``requests`` on ``answers`` until ``requests`` ends (the side process's loop).

    It also ends, quietly, when ``answers`` is closed: the parent died (killed) while a call ran.
    """
    while (request := _read_message(requests)) is not None:
        answer = _answer(*pickle.loads(request))
        try:
            answers.write(_HEADER.pack(len(answer)) + answer)
            answers.flush()
        except BrokenPipeError:
            return


if __name__ == "__main__":
    # Ctrl-C in a terminal reaches the whole process group: the parent decides what stops, and this process
    # ends when the parent closes its input
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print goes to stderr, not into the answers
    # the module's own copy, not this __main__ one: the exceptions it sends back are then classes the parent has
    from dimbsvm._side_process import serve as _serve

    _serve(sys.stdin.buffer, protocol_out)
    # its parent is exiting and may be waited for by whoever reads the stderr this process shares: the
    # interpreter's teardown of the drawing libraries would hold that pipe open for nothing
    sys.stderr.flush()
    os._exit(0)
