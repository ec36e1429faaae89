"""Issue 30: job input refused before anything starts, each as one line naming the cause.

Rows run the real CLI in a subprocess, as the error catalogue of issue 17
does (tests/test_error_catalogue.py, whose row, environment and assertions
this file follows in small): exit status 2 (bad input), exactly one stderr
line naming the cause, no cluster started, no run directory left. Where a subprocess adds
nothing (the limits of the YAML loader, the checking functions), the
function is called directly; the YAML bomb is timed that way, as the CLI's
start-up (seconds of imports) would swamp the parse.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import yaml

from dimbsvm.exceptions import DataError, JobSpecError

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dimbsvm.cli"]


# -- rows, as the error catalogue runs them ---------------------------------------------------------------------


@dataclass
class Row:
    """One bad input: how to make it (``setup(directory)`` returns the CLI's arguments) and the one stderr line."""

    id: str
    case: str  # "30.N": the item
    setup: Callable[[Path], list]
    match: str  # regex searched in the one stderr line
    code: int = 2  # the CLI's status for bad input
    timeout: float = 180


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    runs: list  # run directories left under the row's directory (none must be)


def _env():
    """This checkout importable first; no scheduler address or Dask log level from the caller."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.pop("DASK_LOGGING__DISTRIBUTED", None)
    return env


def run_row(row: Row, directory: Path) -> Result:
    directory.mkdir(parents=True)
    command = CLI + [str(a) for a in row.setup(directory)]
    start = time.monotonic()
    proc = subprocess.run(command, cwd=directory, env=_env(), capture_output=True, text=True, timeout=row.timeout)
    runs = sorted(str(p) for p in directory.rglob("metrics.json"))
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start, runs)

# -- inputs ----------------------------------------------------------------------------------------------------


def _binary_data(n=100, minority=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), 4)
    y = np.array(["neg"] * (n - minority) + ["pos"] * minority)
    X[y == "pos"] += 1.0
    return X, y


def _csv(path: Path, X, y, header=None) -> Path:
    X = np.asarray(X, dtype=object)
    header = header or [f"x{j}" for j in range(X.shape[1])] + ["class"]
    lines = [",".join(header)] + [",".join(map(str, row)) + f",{label}" for row, label in zip(X, y)]
    return _write(path, "\n".join(lines) + "\n")


def _job(d: Path, data, **spec) -> Path:
    body = {"name": "checks", "data": {"source": str(data)}, "estimator": {"name": "svc"},
            "cv": {"n_splits": 3}, "execution": {"n_workers": 1}}
    body.update(spec)
    return _write(d / "job.yaml", yaml.safe_dump(body, sort_keys=False))

#: The "billion laughs": nine levels of nine aliases, 10**9 strings from a few hundred bytes.
BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
               for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _data(d: Path, name="data.csv", header=None, n_classes=2) -> Path:
    X, y = _binary_data()
    if n_classes == 3:
        X, y = X[:90], np.repeat(["a", "b", "c"], 30)
    return _csv(d / name, X, y, header=header)


def _validate(d: Path, *extra, data=None, **spec) -> list:
    return ["validate", _job(d, data if data is not None else _data(d), **spec), *extra]


def _job_text(d: Path, body: str) -> Path:
    """A job file written as text (YAML that a dict cannot express: duplicate keys, aliases)."""
    return _write(d / "job.yaml", f"data: {{source: {_data(d)}}}\nestimator: {{name: svc}}\ncv: {{n_splits: 3}}\n"
                                  + body)


def _fifo(d: Path) -> list:
    os.mkfifo(d / "job.yaml")
    return ["validate", d / "job.yaml"]


def _locale_csv(d: Path) -> Path:
    X, y = _binary_data()
    cells = np.asarray(X, dtype=object)
    cells[:, 1] = [f'"{v:.2f}"'.replace(".", ",") for v in X[:, 1]]  # a decimal comma, quoted as a spreadsheet does
    return _csv(d / "data.csv", cells, y)


def _many_classes(d: Path) -> Path:
    n = 2000  # more than MAX_CLASSES (1000), two rows each: passes every other check with n_splits 2
    rng = np.random.default_rng(0)
    return _csv(d / "ids.csv", np.round(rng.normal(size=(2 * n, 1)), 3), [f"c{i // 2}" for i in range(2 * n)])


def _holdout_other_columns(d: Path) -> list:
    holdout = _data(d, "holdout.csv", header=["x0", "x1", "z", "class"])
    return _validate(d, retrain={"holdout": {"source": str(holdout)}})


def _schedule(d: Path, cron: str, data=None) -> list:
    return ["schedule", _job(d, data if data is not None else _data(d)), "--registry", d / "reg", "--cron", cron,
            "--max-runs", "1"]


def _rows() -> list:
    cases = [
        # 30.1 the YAML file
        Row("duplicate-key", "30.1", lambda d: ["validate", _job_text(d, "cv: {n_splits: 4}\n")],
            r"job file .*job\.yaml: duplicate key 'cv' on line 4 \(first on line 3\)"),
        Row("yaml-bomb", "30.1", lambda d: ["validate", _job_text(d, "description: x\nbomb:\n" + _indent(BOMB))],
            r"aliases expand the document to more than 100000 values"),
        Row("job-is-a-fifo", "30.1", _fifo, r"cannot read job file .*job\.yaml: it is a FIFO \(named pipe\), not a "
                                            r"regular file", timeout=60),
        # 30.2 NaN and infinity
        Row("nan-tolerance", "30.2", lambda d: _validate(d, retrain={"gates": {"g_mean": {"tolerance": math.nan}}}),
            r"'retrain\.gates\.g_mean\.tolerance' is nan; it must be a finite number"),
        Row("nan-connect-timeout", "30.2", lambda d: [*_validate(d), "--connect-timeout", "nan"],
            r"argument --connect-timeout: 'nan' is not allowed: give a finite number of seconds above 0"),
        # 30.3 integers, seeds, addresses
        Row("float-n-splits", "30.3", lambda d: _validate(d, cv={"n_splits": 3.0}),
            r"'cv\.n_splits' must be an integer, got 3\.0; write 3"),
        Row("seed-too-large", "30.3", lambda d: _validate(d, cv={"n_splits": 3, "random_state": 2**32}),
            r"'cv\.random_state' is 4294967296; it must be at most 4294967295 \(numpy seeds are below 2\*\*32\)"),
        Row("dashboard-address", "30.3", lambda d: [*_validate(d), "--dashboard-address", "foo:bar"],
            r"argument --dashboard-address: 'foo:bar' is not \[HOST\]:PORT with PORT a number from 0 to 65535"),
        # 30.4 sizes
        Row("absurd-repeats", "30.4", lambda d: _validate(d, cv={"n_splits": 3, "n_repeats": 100_000_000}),
            r"'cv\.n_repeats' is 100000000; it must be at most 1000"),
        Row("too-many-classes", "30.4",
            lambda d: _validate(d, data=_many_classes(d), cv={"n_splits": 2}, metrics=["g_mean"]),
            r"ids\.csv: 2000 classes \(rows per class: 0: 2, .* and 1990 more\); a job may have at most 1000"),
        # 30.5 numbers written for a locale
        Row("csv-decimal-comma", "30.5", lambda d: _validate(d, data=_locale_csv(d)),
            r"column 'x1' holds numbers written with a decimal comma, thousands separators or a percent sign "
            r"\(line 2: '-?\d+,\d\d'.*declare the column nominal"),
        # 30.6 what validate can know
        Row("holdout-missing", "30.6", lambda d: _validate(d, retrain={"holdout": {"source": str(d / "nope.csv")}}),
            r"retrain\.holdout\.source: data source .*nope\.csv does not exist"),
        Row("holdout-other-columns", "30.6", _holdout_other_columns,
            r"retrain\.holdout\.source .*holdout\.csv: column 2 is 'z', in the training data .* it is 'x2'"),
        Row("f-measure-gate-three-classes", "30.6",
            lambda d: _validate(d, data=_data(d, n_classes=3), metrics=["g_mean"],
                                retrain={"gates": {"f_measure": {"tolerance": 0.0}}}),
            r"3 classes, but retrain\.gates f_measure need two; gate on g_mean or a_mean"),
        Row("holdout-fraction-too-small", "30.6",
            lambda d: _validate(d, "--registry", d / "reg", retrain={"holdout": {"fraction": 0.01}}),
            r"retrain\.holdout\.fraction 0\.01 of 100 rows holds out 1, fewer than its 2 classes"),
        Row("cron-never-matches", "30.6", lambda d: _schedule(d, "0 0 30 2 *"),
            r"cron expression '0 0 30 2 \*' never matches: no time within 8 years names it"),
        Row("schedule-checks-data", "30.6",
            lambda d: _schedule(d, "0 3 * * *", data=_csv(d / "one.csv", _binary_data()[0], ["a"] * 100)),
            r"only one class .* classification needs at least two"),
    ]
    return cases


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


ROWS = _rows()


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Run the selected rows two at a time (the CLI's start-up dominates); ``{id: Result or Exception}``."""
    selected = {item.callspec.params["row"].id for item in request.session.items
                if Path(str(item.path)) == Path(__file__) and hasattr(item, "callspec")
                and "row" in item.callspec.params}
    base = tmp_path_factory.mktemp("input-checks")

    def one(row):
        try:
            return run_row(row, base / row.id)
        except Exception as exc:  # noqa: BLE001 - reported by the row's test
            return exc

    rows = [row for row in ROWS if row.id in selected]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([r.id for r in rows], pool.map(one, rows)))


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_cli_refuses(row, results):
    result = results[row.id]
    if isinstance(result, Exception):
        raise result
    context = f"\nrow {row.id}: exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.returncode == row.code, context
    lines = result.stderr.splitlines()
    assert len(lines) == 1, context
    assert lines[0].startswith("dimbsvm"), context
    assert re.search(row.match, lines[0]), context
    assert len(lines[0]) < 1000, context  # a capped message, not a list of every class
    assert "Traceback" not in result.stderr, context
    assert "dashboard" not in result.stdout, "a cluster was started" + context
    assert not result.runs, context


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
    assert job["cv"]["n_splits"] * job["cv"]["n_repeats"] == 10_000


def test_cli_flag_values():
    from dimbsvm.cli import _dashboard_address, _seconds

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
