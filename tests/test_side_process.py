"""The side process: calls answered in order, errors handed back, and it never outlives its parent's interest.

Its parent in the lifetime tests is a separate Python process (killed or left to exit), so that its end is what a
user's ``dimbsvm run`` ending would be.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dimbsvm._side_process import SideProcess, SideProcessError


def _alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (ended, not yet reaped by its parent) has ended too; the parent may reap it between
    # the signal above and reading its state, which reads as gone
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_gone(pid, timeout=30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def side():
    process = SideProcess()
    yield process
    process.close()


def test_calls_run_in_another_process_in_the_order_submitted(side):
    pids = [side.submit(os.getpid) for _ in range(3)]
    assert {future.result(timeout=60) for future in pids} == {side.pid}
    assert side.pid != os.getpid()
    # the answers come back in order: each call sees the environment the previous one left
    side.submit(_set_env, "DIMBSVM_SIDE_TEST", "set by the call before")
    assert side.submit(os.getenv, "DIMBSVM_SIDE_TEST").result(timeout=60) == "set by the call before"
    assert "DIMBSVM_SIDE_TEST" not in os.environ


def test_a_call_runs_in_the_callers_working_directory_of_the_moment(side, tmp_path, monkeypatch):
    """A relative path names the same file on both sides, even after the caller changed directory (a second
    run of a notebook, a test) since the side process started."""
    assert side.submit(os.getcwd).result(timeout=60) == os.getcwd()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.txt").write_text("this one")
    assert side.submit(os.getcwd).result(timeout=60) == str(tmp_path)
    assert side.submit(_read, "here.txt").result(timeout=60) == "this one"


def _set_env(name, value):
    os.environ[name] = value


def _read(path):
    with open(path) as handle:
        return handle.read()


def test_an_error_of_the_call_is_raised_by_its_future_and_the_process_goes_on(side):
    with pytest.raises(ZeroDivisionError):
        side.submit(divmod, 1, 0).result(timeout=60)
    assert side.submit(divmod, 7, 2).result(timeout=60) == (3, 1)


def test_a_result_that_cannot_be_pickled_is_a_side_process_error(side):
    with pytest.raises(SideProcessError, match="could not send back its result"):
        side.submit(threading.Lock).result(timeout=60)  # a lock does not pickle
    assert side.submit(abs, -2).result(timeout=60) == 2


def _warning_filters():
    return list(sys.warnoptions)


def test_the_side_process_has_this_interpreters_warning_filters(monkeypatch):
    # `python -W error::DeprecationWarning -m dimbsvm.cli run ...` draws its report under the same filters
    monkeypatch.setattr(sys, "warnoptions", [*sys.warnoptions, "error::DeprecationWarning"])
    process = SideProcess()
    try:
        assert "error::DeprecationWarning" in process.submit(_warning_filters).result(timeout=60)
    finally:
        process.close()


def test_calls_after_close_and_calls_pending_at_its_death_fail_with_a_side_process_error():
    process = SideProcess()
    slow = process.submit(time.sleep, 30)
    process.close()  # a call is pending: nobody will read it, so the process is killed
    with pytest.raises(SideProcessError, match="ended"):
        slow.result(timeout=60)
    assert _wait_gone(process.pid)
    with pytest.raises(SideProcessError, match="closed"):
        process.submit(abs, 1).result(timeout=60)


_PARENT = textwrap.dedent("""
    import sys, time
    from dimbsvm._side_process import SideProcess
    side = SideProcess()
    side.submit(abs, 1).result()
    print(side.pid, flush=True)
    if sys.argv[1] == "sleep":
        time.sleep(120)
""")


@pytest.mark.parametrize("how", ["exits", "killed"])
def test_the_side_process_ends_with_its_parent(how):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, "exit" if how == "exits" else "sleep"],
                              stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    if how == "killed":
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=60)
    assert _wait_gone(pid), f"side process {pid} outlived its parent ({how})"


_PARENT_KILLED_DURING_A_CALL = textwrap.dedent("""
    import time
    from dimbsvm._side_process import SideProcess
    side = SideProcess()
    side.submit(abs, 1).result()
    side.submit(time.sleep, 1.0)  # still running when this process is killed: its answer has nowhere to go
    print(side.pid, flush=True)
    time.sleep(120)
""")


def test_a_side_process_whose_parent_is_killed_during_a_call_ends_quietly():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT_KILLED_DURING_A_CALL], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=60)
    assert _wait_gone(pid), f"side process {pid} outlived its parent"
    assert "Traceback" not in parent.stderr.read()  # the side process shares this stderr; it had nothing to say


def test_a_report_process_that_died_is_replaced_and_the_report_is_drawn_anyway(monkeypatch, tmp_path, caplog):
    # a long-lived process (schedule) whose report process was killed: the next run starts another
    from dimbsvm.jobs import report_drawing

    monkeypatch.setattr(report_drawing, "_process", None)
    monkeypatch.setattr(report_drawing, "DRAWING_LIBRARIES", ())
    first = report_drawing.report_process()
    try:
        os.kill(first.pid, signal.SIGKILL)
        assert _wait_gone(first.pid)
        deadline = time.monotonic() + 30
        while first.alive and time.monotonic() < deadline:  # its reader sees the end
            time.sleep(0.05)
        assert not first.alive
        second = report_drawing.report_process()
        assert second is not first and second.alive
        assert second.submit(os.getpid).result(timeout=60) == second.pid
        assert "has ended; starting another" in caplog.text
    finally:
        report_drawing._process.close()
        first.close()
