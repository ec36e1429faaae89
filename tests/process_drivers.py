"""Real writer processes for the durability tests: driver scripts in fresh interpreters, and races.

:func:`drive` runs a driver script (a prelude of imports, then the script)
in a fresh interpreter, with the repository and this directory importable;
the driver prints JSON as its last line. Inside a driver, :func:`race_two`
forks two processes that start at the same instant, so that two writers
really contend for one file.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def drive(prelude, script, *args, env=None, timeout=180):
    """Run ``prelude + script`` with ``args`` in a fresh interpreter; its stdout's last line, parsed as JSON."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(prelude) + textwrap.dedent(script), *map(str, args)],
                          cwd=ROOT, env=dict(os.environ, **(env or {}), PYTHONPATH=path), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def race_two(work, results, *, hold=0.0):
    """Run ``work(0)`` and ``work(1)`` in two forked processes released at the same instant.

    Both block on a pipe that this process then closes. Each child writes
    ``{"k", "pid", "outcome"}`` to the file ``results`` (an exception
    becomes ``{"error": str, "type": name}``), sleeps ``hold`` seconds
    (holding whatever it claimed while the other tries) and leaves with
    ``os._exit`` — no clean-up, as after a kill.

    Returns
    -------
    list of dict
        The two children's lines, in ``k`` order.
    """
    r, w = os.pipe()
    pids = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            try:
                outcome = work(k)
            except BaseException as exc:  # reported to the test, which decides
                outcome = {"error": str(exc), "type": type(exc).__name__}
            with open(results, "a") as out:
                out.write(json.dumps({"k": k, "pid": os.getpid(), "outcome": outcome}) + "\n")
            time.sleep(hold)
            os._exit(0)
        pids.append(pid)
    os.close(r)
    time.sleep(0.3)
    os.close(w)
    for pid in pids:
        os.waitpid(pid, 0)
    with open(results) as handle:
        lines = [json.loads(line) for line in handle]
    os.unlink(results)
    return sorted(lines, key=lambda line: line["k"])
