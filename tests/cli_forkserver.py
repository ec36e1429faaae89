"""A process that imports dimbsvm's heavy dependencies once, then forks one child per CLI invocation.

Used by ``test_error_catalogue.py``: most rows fail before a cluster starts, so
their time was the interpreter importing scikit-learn, Dask, Zarr (about 2 s
of CPU each, 98 rows). Each row still runs in its own process with its own
stdout, stderr and exit status: the child does what ``python -m dimbsvm.cli``
does (``dimbsvm.cli`` run as ``__main__`` by :mod:`runpy`, ``sys.path[0]`` the
working directory, uncaught exceptions through ``sys.excepthook`` and status 1,
non-daemon threads joined, then ``atexit``), only the imports are inherited.

What is imported here is imported before ``dimbsvm.cli`` would import it:
``dask`` and the libraries below, never ``distributed`` (the CLI sets Dask's
log level before ``distributed`` is first imported) nor ``dimbsvm.cli`` itself
(``-m`` runs it as ``__main__``, a second copy would warn). Whatever these
imports write on stderr (a warning) is sent to the caller, which asserts it is
nothing: a warning here would be missed by every child, since the warning
registries are inherited.

Protocol, one JSON object a line: the first line out is ``{"ready": seconds,
"stderr": text}``; then each request ``{"argv", "cwd", "stdout", "stderr",
"timeout"}`` (paths of files for the child's output) is answered
``{"returncode", "seconds"}`` once the child has exited (killed after
``timeout`` seconds: returncode -9).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time

PRELOAD = ("numpy", "scipy", "pandas", "sklearn.svm", "sklearn.pipeline", "sklearn.preprocessing", "zarr",
           "dask", "dask.array", "yaml", "dimbsvm.jobs", "dimbsvm.jobs.checks", "dimbsvm.store",
           "dimbsvm.datasets", "dimbsvm.estimators", "dimbsvm.artifacts")


def _child(request: dict, proto_in: int, proto_out: int) -> None:
    """In the forked child: become ``python -m dimbsvm.cli ARGS`` started in ``cwd``; never returns."""
    code = 1
    try:
        os.close(proto_in)
        os.close(proto_out)
        os.chdir(request["cwd"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
        os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
        import atexit
        import importlib
        import runpy
        import threading

        sys.path[0] = os.getcwd()  # what -m puts first
        importlib.invalidate_caches()
        sys.argv = ["-m", *request["argv"]]  # runpy sets argv[0] to the module's file, as -m does
        try:
            runpy.run_module("dimbsvm.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
            sys.excepthook(*sys.exc_info())
            code = 1
        threading._shutdown()  # as at interpreter exit: wait for non-daemon threads, then atexit
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                code = code or 120  # what Python returns when flushing stdout fails at exit
    finally:
        os._exit(code)


def main() -> None:
    proto_out = os.dup(1)  # the protocol: replies on the original stdout, requests on stdin
    proto_in = os.dup(0)
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
        sys.stderr.flush()
        sys.stdout.flush()
        os.dup2(saved, 2)
        err.seek(0)
        import_stderr = err.read().decode(errors="replace")
    assert "dimbsvm.cli" not in sys.modules and "distributed" not in sys.modules, "preloaded too much"
    ready = time.monotonic() - start
    reader = os.fdopen(proto_in, "r")
    writer = os.fdopen(proto_out, "w")
    writer.write(json.dumps({"ready": ready, "stderr": import_stderr}) + "\n")
    writer.flush()
    for line in reader:
        request = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(request, reader.fileno(), writer.fileno())
        deadline = started + request["timeout"]
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        writer.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                                 "seconds": time.monotonic() - started}) + "\n")
        writer.flush()


class ForkServer:
    """The caller's side: this file run as a process of its own, in ``env``; :meth:`run` a CLI invocation."""

    def __init__(self, env: dict, cwd):
        import subprocess

        self.proc = subprocess.Popen([sys.executable, __file__], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.proc.stdout.readline())
        self.import_seconds, self.import_stderr = hello["ready"], hello["stderr"]

    def run(self, args, cwd, timeout: float = 300):
        """``(CompletedProcess, seconds)`` of ``python -m dimbsvm.cli ARGS`` in ``cwd``, as a forked child.

        The seconds are the child's plus the imports it inherited. A child still running after
        ``timeout`` seconds is killed and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does.
        """
        import subprocess
        from pathlib import Path

        args = [str(a) for a in args]
        command = [sys.executable, "-m", "dimbsvm.cli", *args]
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            self.proc.stdin.write(json.dumps({"argv": args, "cwd": str(cwd), "stdout": str(out),
                                              "stderr": str(err), "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
            reply = json.loads(self.proc.stdout.readline())
            if reply["returncode"] == -9:
                raise subprocess.TimeoutExpired(command, timeout)
            return (subprocess.CompletedProcess(command, reply["returncode"], out.read_text(), err.read_text()),
                    reply["seconds"] + self.import_seconds)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@contextlib.contextmanager
def serving(env: dict, root, timeout: float = 300):
    """A running :class:`ForkServer` as ``run(*args, cwd=root, timeout=timeout) -> CompletedProcess``, closed after.

    Every call asserts that the shared imports printed nothing: a fresh interpreter would have printed it too.
    """
    server = ForkServer(env, root)

    def run(*args, cwd=None, timeout=timeout):
        proc, _ = server.run(args, cwd or root, timeout)
        assert not server.import_stderr, server.import_stderr
        return proc

    try:
        yield run
    finally:
        server.close()


if __name__ == "__main__":
    main()
