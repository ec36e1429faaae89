"""The serial-fraction benchmark's arithmetic, checked against hand-made task streams with closed-form answers."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ sits beside the package and is not installed (as in test_benchmarks.py)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serial_fraction import (  # noqa: E402
    amdahl, analyse, decompose, gaps, joint_seconds, kinds_alone, ready_events, ready_histogram, render_markdown,
    step_seconds)

# Two workers over a 20 s window:
#   a: [2, 6) [6, 9) [12, 14)     (two touching runs count as one busy stretch)
#   b:    [4, 8)       [13, 17)
# busy workers: 0 on [0,2) [9,12) [17,20) = 2 + 3 + 3 = 8 s; 1 on [2,4) [8,9) [12,13) [14,17) = 2 + 1 + 1 + 3 = 7 s;
# 2 on [4,8) [13,14) = 4 + 1 = 5 s.
STREAM = [("read", "a", 2.0, 6.0), ("fit", "a", 6.0, 9.0), ("read", "a", 12.0, 14.0),
          ("read", "b", 4.0, 8.0), ("score", "b", 13.0, 17.0)]


def test_decompose_splits_the_window_by_busy_workers():
    parts = decompose([(w, b, e) for _, w, b, e in STREAM], 0.0, 20.0)
    assert parts == pytest.approx({"T": 20.0, "o": 8.0, "s": 7.0, "p": 5.0})
    assert parts["o"] + parts["s"] + parts["p"] == pytest.approx(parts["T"])


def test_decompose_clips_to_the_window_and_merges_a_workers_overlapping_runs():
    # a run before the window counts only inside it; a worker's overlapping runs are one busy stretch
    parts = decompose([("a", -5.0, 3.0), ("a", 1.0, 4.0), ("b", 2.0, 12.0)], 0.0, 10.0)
    assert parts == pytest.approx({"T": 10.0, "o": 0.0, "s": 8.0, "p": 2.0})


def test_amdahl_projection_in_closed_form():
    # T1 = 8 + 7 + 2*5 = 25; T16 = 15 + 10/16 = 15.625
    projection = amdahl(8.0, 7.0, 5.0, 16)
    assert projection == pytest.approx({"T1": 25.0, "Tn": 15.625, "speedup": 25.0 / 15.625})
    assert amdahl(0.0, 0.0, 5.0, 64)["speedup"] == pytest.approx(64.0)  # all parallel: n times faster


def test_kinds_alone_counts_the_seconds_no_other_worker_runs():
    kinds = kinds_alone(STREAM)
    # read: a[2,4) alone (2) + b's read [4,8) never alone + a[12,13) alone (1); fit [8,9) alone (1);
    # score [14,17) alone (3)
    assert kinds == {"read": {"tasks": 3, "seconds": pytest.approx(10.0), "alone": pytest.approx(3.0)},
                     "fit": {"tasks": 1, "seconds": pytest.approx(3.0), "alone": pytest.approx(1.0)},
                     "score": {"tasks": 1, "seconds": pytest.approx(4.0), "alone": pytest.approx(3.0)}}
    assert sum(k["alone"] for k in kinds.values()) == pytest.approx(7.0)  # = s


def test_gaps_are_the_idle_intervals_with_their_neighbours():
    found = gaps([(k, b, e) for k, _, b, e in STREAM], 0.0, 20.0)
    assert [(g["at"], g["seconds"], g["before"], g["after"]) for g in found] == [
        (9.0, 3.0, "fit", "read"), (17.0, 3.0, "score", "(end)"), (0.0, 2.0, "(start)", "read")]
    assert sum(g["seconds"] for g in found) == pytest.approx(8.0)  # = o
    assert len(gaps([(k, b, e) for k, _, b, e in STREAM], 0.0, 20.0, top=1)) == 1


def test_ready_tasks_from_transitions():
    transitions = [("x", "released", "waiting", 0.5), ("x", "waiting", "processing", 1.0),
                   ("y", "waiting", "queued", 2.0), ("y", "queued", "processing", 3.0),  # stays ready
                   ("x", "processing", "memory", 4.0), ("y", "processing", "memory", 6.0),
                   ("x", "memory", "released", 7.0)]
    events = ready_events(transitions)
    assert sorted(events) == [(1.0, 1), (2.0, 1), (4.0, -1), (6.0, -1)]
    assert step_seconds(events, 0.0, 8.0) == pytest.approx({0: 3.0, 1: 3.0, 2: 2.0})
    hist = ready_histogram({0: 3.0, 1: 3.0, 2: 2.0, 20: 1.0, 100: 0.5})
    assert hist == {"0": 3.0, "1": 3.0, "2": 2.0, "3-4": 0, "5-8": 0, "9-16": 0, "17-64": 1.0, ">64": 0.5}


def test_joint_seconds_are_the_product_of_two_step_functions():
    busy = [(1.0, 1), (3.0, -1)]
    ready = [(0.0, 2), (2.0, -2)]
    assert joint_seconds(busy, ready, 0.0, 4.0) == pytest.approx({(0, 2): 1.0, (1, 2): 1.0, (1, 0): 1.0,
                                                                  (0, 0): 1.0})


def test_analyse_reads_a_task_stream_and_renders():
    """The same stream as Dask's task stream records it, with a transfer that is not counted as busy."""
    stream = [{"key": f"{kind}-{i:032x}", "worker": f"tcp://127.0.0.1:{worker}",
               "startstops": [{"action": "transfer", "start": begin - 0.5, "stop": begin},
                              {"action": "compute", "start": begin, "stop": end}]}
              for i, (kind, worker, begin, end) in enumerate(STREAM)]
    transitions = [(kind, "waiting", "processing", begin) for kind, _, begin, _ in STREAM] + \
        [(kind, "processing", "memory", end) for kind, _, _, end in STREAM]
    result = analyse(stream, transitions, 0.0, 20.0)
    assert (result["T"], result["o"], result["s"], result["p"]) == pytest.approx((20.0, 8.0, 7.0, 5.0))
    assert result["tasks"] == 5 and result["transfer_seconds"] == pytest.approx(2.5)
    assert result["first_task"] == 2.0 and result["after_last_task"] == 3.0
    assert result["amdahl_16"]["speedup"] == pytest.approx(25.0 / 15.625)
    assert result["kinds"]["score"]["alone"] == pytest.approx(3.0)
    # the ready count equals the busy count here (every task starts as soon as it is ready)
    assert result["ready_histogram"]["0"] == pytest.approx(8.0) and result["ready_histogram"]["2"] == pytest.approx(5.0)
    assert result["s_with_2_ready"] == 0.0
    lines = render_markdown({"runs": [dict(result, n=1000, chunks=4)]})
    assert lines[2].startswith("| 1,000 | 0 | 4 | 5 | 20.0 | 8.0 | 7.0 | 5.0 |")


def test_knn_build_report_adds_the_warm_up_to_the_projection():
    # the kNN build's report: the job's tables, gaps timed from the knn_graph call, and the
    # projection with the numba warm-up every worker pays at once: (T1 + w) / (T16 + w)
    from benchmarks.knn_serial_fraction import render_markdown as knn_markdown

    result = analyse([{"key": f"{kind}-{i:032x}", "worker": worker,
                       "startstops": [{"action": "compute", "start": begin, "stop": end}]}
                      for i, (kind, worker, begin, end) in enumerate(STREAM)], [], 0.0, 20.0)
    run = dict(result, n=1000, chunks=4, warm_up_s=5.0, n_partitions=3, rounds=0, stage_recall=0.97, recall=0.96)
    lines = knn_markdown({"runs": [run]})
    assert any("seconds after the start of the `knn_graph` call" in line for line in lines)
    # T1 = 25, T16 = 15.625; with 5 s of warm-up: 30 / 20.625
    assert lines[-1] == "| 1,000 | 0 | 5.0 | 3 | 0 | 0.9700 | 0.9600 | 20.6 | 1.45 |"
