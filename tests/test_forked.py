"""A call in a forked copy of this process (the report's side process draws half a page there).

Each case runs in a fresh interpreter: the test process has threads of its own, and a process with other
threads must not fork.
"""

from process_drivers import drive

DRIVER = """
import json, os, threading, time
from dimbsvm._forked import ForkedCallError, start_in_fork

answers = {}
parent = os.getpid()
answers["value"] = start_in_fork(lambda: {"pid": os.getpid(), "sum": sum(range(10))}).result()
answers["value"]["other_pid"] = answers["value"].pop("pid") != parent


def fails():
    raise ValueError("no such figure")


try:
    start_in_fork(fails).result()
except ForkedCallError as exc:
    answers["error"] = str(exc)


def dies():
    os._exit(3)


try:
    start_in_fork(dies).result()
except ForkedCallError as exc:
    answers["died"] = str(exc)
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
answers["with_a_thread"] = start_in_fork(lambda: 1)
stop.set()
thread.join()
print(json.dumps(answers))
"""


def test_a_forked_call_answers_raises_and_is_declined_beside_another_thread():
    answers = drive("", DRIVER)
    assert answers["value"] == {"sum": 45, "other_pid": True}
    assert answers["error"] == "ValueError: no such figure"
    assert answers["died"].startswith("the forked process ended without an answer")
    assert answers["with_a_thread"] is None


HANGING = """
import json, time
from dimbsvm._forked import ForkedCallError, start_in_fork

call = start_in_fork(lambda: time.sleep(600))
started = time.monotonic()
try:
    call.result(timeout=1.0)
except ForkedCallError as exc:
    print(json.dumps({"error": str(exc), "waited": time.monotonic() - started}))
"""


def test_a_forked_call_that_does_not_answer_in_time_is_killed():
    answer = drive("", HANGING)
    assert answer["error"] == "the forked process did not answer within 1.0 s"
    assert answer["waited"] < 30
