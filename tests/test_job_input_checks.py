"""Issue 30: job input refused before anything starts, each as one line naming the cause.

The CLI's rows are in the error catalogue (tests/test_error_catalogue.py,
``_input_rows``). Here the functions are called directly: the limits of the
YAML loader, the schema's bounds, the checking functions; the YAML bomb is
timed that way, as the CLI's start-up (seconds of imports) would swamp the
parse.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from dimbsvm.exceptions import DataError, JobSpecError


#: The "billion laughs": nine levels of nine aliases, 10**9 strings from a few hundred bytes.
BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
               for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())



# -- 30.1 the YAML loader --------------------------------------------------------------------------------------


def test_yaml_bomb_is_refused_in_milliseconds(tmp_path):
    from dimbsvm.jobs import load_job

    path = _write(tmp_path / "bomb.yaml", "data: {source: yeast5}\nestimator: {name: svc}\nbomb:\n" + _indent(BOMB))
    assert len(BOMB) < 500
    start = time.monotonic()
    with pytest.raises(JobSpecError, match=r"aliases expand the document to more than 100000 values \(at \*[a-i] "):
        load_job(path)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("text, message", [
    ("a: 1\na: 2\n", r"duplicate key 'a' on line 2 \(first on line 1\)"),
    ("a: 1\n'a': 2\n", r"duplicate key 'a' on line 2"),
    ("{1: x, 1.0: y}\n", r"duplicate key '1\.0' on line 1"),  # the same key once constructed
    ("features:\n  - name: a\n    name: b\n", r"duplicate key 'features\.0\.name' on line 3 \(first on line 2\)"),
    ("a: &a [*a]\n", r"alias \*a on line 1 refers to a node that contains it"),
    ("[" * 10_000 + "]" * 10_000, r"nested more than 64 levels deep at line 1"),
    ("a: *nowhere\n", r"is not valid YAML: found undefined alias 'nowhere'"),
    ("a: [unclosed\n", r"is not valid YAML"),
])
def test_yaml_refused(text, message):
    from dimbsvm.jobs.yaml_load import parse_yaml

    with pytest.raises(JobSpecError, match=message):
        parse_yaml(text, "job file x.yaml")


def test_yaml_accepted():
    from dimbsvm.jobs.yaml_load import parse_yaml

    # a merge may override merged keys; a few aliases are fine; what safe_load returns otherwise
    text = "base: &b {C: 1, gamma: 2}\nestimator:\n  <<: *b\n  C: 3\nagain: [*b, *b]\nnested: " + "[" * 60 + "]" * 60
    assert parse_yaml(text, "job file x.yaml") == yaml.safe_load(text)
    assert parse_yaml("", "job file x.yaml") is None
    root = Path(__file__).resolve().parents[1]
    for path in [*root.glob("jobs/*.yaml"), *root.glob("benchmarks/*.yaml"), root / "deploy/docker/compose.yaml"]:
        # every bundled job and suite, and a file of merges and aliases, as safe_load reads them
        assert parse_yaml(path.read_text(), str(path)) == yaml.safe_load(path.read_text()), path


def test_job_path_that_is_not_a_regular_file(tmp_path):
    from dimbsvm.jobs.yaml_load import MAX_FILE_BYTES, read_text_file

    with pytest.raises(JobSpecError, match=r"cannot read job file .*: it is a directory, not a regular file"):
        read_text_file(tmp_path, "job")
    os.mkfifo(tmp_path / "fifo")
    start = time.monotonic()
    with pytest.raises(JobSpecError, match=r"it is a FIFO \(named pipe\), not a regular file"):
        read_text_file(tmp_path / "fifo", "job")  # opened without waiting for a writer
    assert time.monotonic() - start < 2
    with pytest.raises(JobSpecError, match=r"cannot read suite file /dev/zero: it is a character device"):
        read_text_file("/dev/zero", "suite")
    big = _write(tmp_path / "big.yaml", "a: " + "x" * MAX_FILE_BYTES)
    with pytest.raises(JobSpecError, match=r"it is 1\.0 MiB, more than a job file may be \(1\.0 MiB\)"):
        read_text_file(big, "job")
    (tmp_path / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(JobSpecError, match=r"not UTF-8 text \(byte 9 is 0xe9\)"):
        read_text_file(tmp_path / "latin1.yaml", "job")
    with pytest.raises(JobSpecError, match=r"cannot read job file .*nope\.yaml: No such file or directory"):
        read_text_file(tmp_path / "nope.yaml", "job")


def test_suites_share_the_loader(tmp_path):
    from dimbsvm.jobs.spec import read_yaml

    with pytest.raises(JobSpecError, match=r"suite file .*suite\.yaml: duplicate key 'name' on line 2"):
        read_yaml(_write(tmp_path / "suite.yaml", "name: a\nname: b\n"), "suite")


# -- 30.2 to 30.4 the job's values ------------------------------------------------------------------------------

BASE = {"data": {"source": "yeast5"}, "estimator": {"name": "svc"}}


@pytest.mark.parametrize("extra, message", [
    ({"retrain": {"holdout": {"fraction": math.nan}}}, r"'retrain\.holdout\.fraction' is nan; it must be a finite"),
    ({"retrain": {"gates": {"auc": {"tolerance": math.inf}}}}, r"'retrain\.gates\.auc\.tolerance' is inf"),
    ({"search": {"params": {"C": [1, math.nan]}}}, r"'search\.params\.C\.1' is nan"),
    ({"search": {"params": {"C": [1]}, "floor": {"g_mean": math.nan}}}, r"'search\.floor\.g_mean' is nan"),
    ({"search": {"params": {"C": [1]}, "error_score": math.inf}}, r"'search\.error_score' is inf"),
    ({"execution": {"n_workers": 1.0}}, r"'execution\.n_workers' must be an integer, got 1\.0; write 1"),
    ({"execution": {"retries": 1.0}}, r"'execution\.retries' must be an integer, got 1\.0; write 1"),
    ({"cv": {"n_splits": 3.5}}, r"'cv\.n_splits' must be of type integer, got float 3\.5"),
    ({"cv": {"random_state": 2**32}}, r"'cv\.random_state' is 4294967296; it must be at most 4294967295"),
    ({"cv": {"random_state": 2**32 - 1, "n_repeats": 2}},
     r"cv\.random_state 4294967295 \+ 2 repeats reaches seed 4294967296; .* at most 4294967294"),
    ({"search": {"params": {"C": [1]}, "random_state": 2**32}}, r"'search\.random_state' is 4294967296"),
    ({"retrain": {"holdout": {"random_state": 2**40}}}, r"'retrain\.holdout\.random_state' is 1099511627776"),
    ({"cv": {"n_repeats": 1001}}, r"'cv\.n_repeats' is 1001; it must be at most 1000"),
    ({"cv": {"n_splits": 1001}}, r"'cv\.n_splits' is 1001; it must be at most 1000"),
    ({"cv": {"n_splits": 100, "n_repeats": 101}}, r"100 x 101 = 10100 fold tasks; at most 10000 are allowed"),
    ({"search": {"params": {"C": [1]}, "cv": 101}}, r"'search\.cv' is 101; it must be at most 100"),
    ({"execution": {"n_workers": 5000}}, r"'execution\.n_workers' is 5000; it must be at most 1024"),
])
def test_job_values_refused(extra, message):
    from dimbsvm.jobs import validate_job

    with pytest.raises(JobSpecError, match=message):
        validate_job({**BASE, **extra})


def test_job_values_accepted():
    from dimbsvm.jobs import validate_job

    # NaN (and -inf) score a failed search candidate: a meaning, not a slip
    for score in (math.nan, -math.inf, "nan", "raise", 0.0):
        validate_job({**BASE, "search": {"params": {"C": [1]}, "error_score": score}})
    job = validate_job({**BASE, "cv": {"n_splits": 1000, "n_repeats": 10, "random_state": 2**32 - 10}})
    assert job.cv.n_splits * job.cv.n_repeats == 10_000


def test_cli_flag_values():
    from dimbsvm.cli_parser import dashboard_address as _dashboard_address, seconds as _seconds

    assert _seconds("2.5") == 2.5
    for bad in ("nan", "inf", "-1", "0", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            _seconds(bad)
    for good in (":0", "8787", ":8787", "localhost:8787", "0.0.0.0:0", ":8787,:8887"):
        assert _dashboard_address(good) == good
    for bad in ("foo:bar", "localhost", ":70000", "[::1]:8787", "a b:1", ":-1", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="is not \\[HOST\\]:PORT"):
            _dashboard_address(bad)


def test_class_counts_are_capped():
    from dimbsvm.jobs.checks import JobData, check_class_count, format_class_counts

    assert format_class_counts([0, 1], [40, 9]) == "0: 40, 1: 9"
    text = format_class_counts(range(100_000), [2] * 100_000)
    assert text.endswith("9: 2 and 99990 more") and len(text) < 200
    check_class_count(JobData(X=np.zeros((2000, 1)), y=np.repeat(np.arange(1000), 2), meta={}), "ok.csv")
    with pytest.raises(DataError, match=r"1001 classes .* and 991 more\); a job may have at most 1000"):
        check_class_count(JobData(X=np.zeros((2002, 1)), y=np.repeat(np.arange(1001), 2), meta={}), "ids.csv")


# -- 30.5 numbers written for a locale -------------------------------------------------------------------------


@pytest.mark.parametrize("cells, example", [
    (["1,5", "2,25", "3,0", "4,5"], "'1,5'"),
    (["12%", "15 %", "7%", "9.5%"], "'12%'"),
    (["1.234,5", "2.000", "3.000.000,25", "4,5"], "'1.234,5'"),
    (["1,234", "2,000,000", "3", "4"], "'1,234'"),  # a few plain numbers among them
    (["1 234", "2 345", "3 456", "4 567"], "'1 234'"),
])
def test_csv_locale_numbers_refused(tmp_path, cells, example):
    from dimbsvm.datasets.tabular import load_csv, load_csv_features

    path = _write(tmp_path / "t.csv", "x0,rate,class\n" + "".join(f'{i},"{v}",{"ab"[i % 2]}\n'
                                                                  for i, v in enumerate(cells)))
    pattern = (rf"column 'rate' holds numbers written with a decimal comma, thousands separators or a percent sign "
               rf"\(line \d: {re.escape(example)}")
    with pytest.raises(DataError, match=pattern):
        load_csv(path)
    with pytest.raises(DataError, match=pattern):  # scoring a CSV reads its columns the same way
        load_csv_features(path, n_features=2)
    declared = load_csv(path, nominal=["rate"])  # a column declared nominal is still one-hot encoded
    assert declared.nominal_columns == ["rate"]
    assert declared.feature_names[1:] == [f"rate={c}" for c in sorted(cells)]


def test_csv_text_columns_still_nominal(tmp_path):
    from dimbsvm.datasets.tabular import load_csv

    text = "x0,code,when,class\n" + "".join(f"{i},{c},{w},{'ab'[i % 2]}\n" for i, (c, w) in enumerate(
        [("A1", "01.02.2023"), ("B2", "1.2.3"), ("A1", "2023-01-05"), ("C3", '"1,2,3"')]))
    ds = load_csv(_write(tmp_path / "t.csv", text))
    assert ds.nominal_columns == ["code", "when"]


def test_csv_mixed_text_still_names_the_cells(tmp_path):
    from dimbsvm.datasets.tabular import load_csv

    path = _write(tmp_path / "t.csv", 'x0,class\n1.5,a\n"1,5",b\nabc,a\n')  # not only locale numbers
    with pytest.raises(DataError, match=r"column 'x0' holds numbers except in 2 cell\(s\)"):
        load_csv(path)


# -- 30.6 what validate can know --------------------------------------------------------------------------------


def test_cron_must_match_within_years():
    from dimbsvm.jobs.schedule import parse_cron

    with pytest.raises(JobSpecError, match=r"'0 0 31 4 \*' never matches"):
        parse_cron("0 0 31 4 *")
    start = dt.datetime(2097, 3, 1, tzinfo=dt.UTC)  # 2100 is no leap year: the next February 29th is in 2104
    assert parse_cron("0 0 29 2 *", start).get_next(dt.datetime).year == 2104
    assert parse_cron("0 3 * * *", start).get_next(dt.datetime) == start.replace(hour=3)


def test_check_retrain_split():
    from dimbsvm.jobs import validate_job
    from dimbsvm.jobs.checks import JobData, check_retrain

    data = JobData(X=np.zeros((10, 1)), y=np.array([0] * 8 + [1] * 2), meta={})
    job = validate_job({**BASE, "retrain": {"holdout": {"fraction": 0.9}}})
    check_retrain(job, data)  # the split is checked for a retraining only
    with pytest.raises(DataError, match=r"fraction 0\.9 of 10 rows leaves for training 1, fewer than its 2 classes"):
        check_retrain(job, data, split=True)
    check_retrain(validate_job({**BASE, "retrain": {"holdout": {"fraction": 0.2}}}), data, split=True)


def test_a_parquet_source_or_ingest_keys_get_the_ingest_line_and_the_line_works(tmp_path, monkeypatch):
    """A job reads Parquet (and files whose columns need naming) through a store: the refusal is one line that
    gives the `dimbsvm ingest` command, and that command, run as printed, makes a store the job then runs on."""
    import shlex

    import pandas as pd

    from dimbsvm.cli import main

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"row": np.arange(120), "a": rng.normal(size=120), "b": rng.normal(size=120),
                          "note": ["x"] * 120, "label": ["neg"] * 100 + ["pos"] * 20})
    frame.to_parquet("train.parquet")
    job = {"name": "pq", "estimator": {"name": "svc_balanced"}, "cv": {"n_splits": 3}, "metrics": ["g_mean"]}
    here = tmp_path.resolve()  # (a job's data path is taken relative to the job file: named in full)
    for data, message in (({"source": "train.parquet"}, f"data source {here}/train.parquet: a job reads Parquet "
                           f"through a store; run dimbsvm ingest {here}/train.parquet {here}/train.zarr, then give "
                           "the store as data.source"),
                          ({"source": "train.parquet", "target": "label", "id": "row", "drop": ["note"]},
                           "'data.target' is an ingest option: a job reads a file whose columns need naming through a "
                           "store; run dimbsvm ingest train.parquet train.zarr --target label --id row --drop note, "
                           "then give the store as data.source")):
        Path("job.yaml").write_text(yaml.safe_dump(dict(job, data=data)))
        with pytest.raises(JobSpecError if "target" in data else DataError) as refused:
            from dimbsvm.jobs.checks import check_job

            check_job("job.yaml", run_dir=False)
        assert message in str(refused.value) and "\n" not in str(refused.value)
    command = str(refused.value).split("; run ", 1)[1].split(", then", 1)[0]
    assert main(shlex.split(command)[1:]) == 0  # the line as printed (relative to the job file's directory, here)
    Path("job.yaml").write_text(yaml.safe_dump(dict(job, data={"source": "train.zarr"})))
    assert main(["run", "job.yaml", "--out", "run"]) == 0
