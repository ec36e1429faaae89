"""A run's finished ensemble members on disk, written in the background: the same files as written in order.

The truth is :class:`PartDirectory` without a writing thread (each save done
before it returns). Writes in the background must leave the same files,
raise a failed write, and, killed at any moment, leave each part whole or
absent: a resumed run loads every file there is.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dimbsvm.artifacts import load_object
from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator
from dimbsvm.jobs.part_store import PartDirectory

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def members():
    X, y = make_imbalanced(n_samples=300, n_features=5, minority_fraction=0.1, random_state=0)
    return list(make_estimator("ensemble_othr", {"n_estimators": 4, "random_state": 0}).fit(X, y).members_)


def _same_member(a, b):
    assert (a.threshold, a.margin_sign, a.n_draws) == (b.threshold, b.margin_sign, b.n_draws)
    np.testing.assert_array_equal(a.estimator.dual_coef_, b.estimator.dual_coef_)


def test_background_writes_leave_the_files_written_in_order(tmp_path, members):
    in_order, background = PartDirectory(tmp_path / "a"), PartDirectory(tmp_path / "b", background=True)
    for store in (in_order, background):
        for index, member in enumerate(members):
            store.save((0, 1), index, member)
            store.save((0, 2), index, member)
        store.forget((0, 1))  # after its saves: none of fold (0, 1) is left, whatever the writing thread's pace
    background.flush()
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert names == [f"0-2-part{i}.skops" for i in range(len(members))]
    for index, member in enumerate(members):
        _same_member(background.load((0, 2), index), member)
        _same_member(in_order.load((0, 2), index), member)
    assert background.load((0, 1), 0) is None
    background.close()


def test_load_waits_for_the_writes_asked_for_before_it(tmp_path, members):
    store = PartDirectory(tmp_path / "parts", background=True)
    store.save((1, 0), 3, members[3])
    _same_member(store.load((1, 0), 3), members[3])  # no flush asked for: load waits for the save
    store.close()


def test_a_failed_background_write_is_raised(tmp_path, members):
    (tmp_path / "not-a-directory").write_text("a file where the parts' directory should be")
    store = PartDirectory(tmp_path / "not-a-directory", background=True)
    store.save((0, 0), 0, members[0])  # returns at once; the write fails in the thread
    with pytest.raises(OSError):
        store.flush()
    store.save((0, 0), 1, members[1])
    with pytest.raises(OSError):
        store.close()
    assert (tmp_path / "not-a-directory").read_text().startswith("a file")  # what dimbsvm did not write


WRITER = """
import sys
from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator
from dimbsvm.jobs.part_store import PartDirectory

X, y = make_imbalanced(n_samples=300, n_features=5, minority_fraction=0.1, random_state=0)
members = make_estimator("ensemble_othr", {"n_estimators": 4, "random_state": 0}).fit(X, y).members_
store = PartDirectory(sys.argv[1], background=True)
store.save((0, 0), 0, members[0])
store.flush()
print("ready", flush=True)
for i in range(1, 100000):  # until killed
    store.save((0, i % 7), i, members[i % len(members)])
"""


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.9])
def test_a_writer_killed_at_any_moment_leaves_each_part_whole_or_absent(tmp_path, members, delay):
    directory = tmp_path / "members"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(directory)], stdout=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    written = sorted(directory.glob("*.skops"))
    assert written, "the writer was killed before its first part"
    for path in written:  # a part the resumed run finds is a member it can use
        index = int(path.stem.rsplit("part", 1)[1])
        _same_member(load_object(path), members[index % len(members)])
    # what a kill leaves besides: at most the one temporary file being written, under dimbsvm's temporary name,
    # which a resumed run's clean-up removes (and a URL run's mirror does not send)
    from dimbsvm.jobs.run_dir import _clear_leftovers

    assert len([p for p in directory.iterdir() if not p.name.endswith(".skops")]) <= 1
    _clear_leftovers(directory)
    assert all(p.name.endswith(".skops") for p in directory.iterdir())
