"""predict's check that every worker reaches the output before any row is scored (predict/reach.py).

Workers that cannot reach it are tested with real processes in test_cluster.py (a relative --out, workers without
the object store's credentials); here, what must pass and what the check leaves behind.
"""

from __future__ import annotations

import pytest

from dimbsvm.exceptions import DimbsvmError
from dimbsvm.predict.reach import check_workers_reach


def test_workers_that_share_this_machine_pass_and_no_probe_is_left(client, tmp_path):
    (tmp_path / "out").mkdir()
    with client.as_current():
        check_workers_reach(str(tmp_path / "out" / "p.csv"))
        # directories the writers will make: their nearest existing parent is probed, nothing is created
        check_workers_reach(str(tmp_path / "new" / "deeper" / "p.parquet"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not list((tmp_path / "out").iterdir())


def test_a_directory_this_process_cannot_write_is_one_line(client, small_tmpfs):
    import subprocess

    disk = small_tmpfs("64k")  # mounted read-only: root, too, cannot write there
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    with client.as_current(), pytest.raises(DimbsvmError, match=rf"prediction output {disk}/p\.csv: cannot write "
                                                                 rf"in {disk}: Read-only file system"):
        check_workers_reach(str(disk / "p.csv"))
