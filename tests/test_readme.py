"""The README's examples run, each on its own, and name only what exists; RESULTS.md names no machine path.

Every ```python block of README.md is saved as a file and run by a fresh
interpreter, in an empty temporary directory (``TMPDIR`` too, so what an
example writes through :mod:`tempfile` goes away with the test), as a reader
who copies one example would run it. The test's id is the line of the block's
opening fence (``README.md:52``).
"""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
# benchmarks/ sits beside the package and is not installed (as in test_benchmarks.py)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Seconds one example may take at least: the timeout is three times the time the README states for it (busy CI
#: cores), and never below this.
TIMEOUT = 60
#: How the README states an example's time, in the paragraph just before its block: a range, "4-9 s" or "1-2 min".
STATED_TIME = re.compile(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?) (s|min)\b")
#: Examples that start a cluster or fit hundreds of SVMs: ``slow`` (still part of CI).
SLOW = ("LocalCluster(", "recommended(")

#: A path of a machine, or one that leaves the repository.
MACHINE_PATH = re.compile(r"(?<![\w.$~/:-])/(?:tmp|var/tmp|root|home|work|scratch|mnt|data|srv|opt|Users)(?:/|\b)")
OUTSIDE = re.compile(r"(?<![\w.])\.\./")


def fenced_blocks(text):
    """``(line of the opening fence, language, code)`` of every fenced block of ``text``, lines 1-based."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            language, start = lines[i][3:].strip(), i
            i += 1
            while not lines[i].startswith("```"):
                i += 1
            blocks.append((start + 1, language, "\n".join(lines[start + 1:i]) + "\n"))
        i += 1
    return blocks


def python_blocks():
    return [(line, code) for line, language, code in fenced_blocks(README.read_text()) if language == "python"]


def stated_seconds(line):
    """The upper bound of the time the README states for the block opening at ``line``, in seconds, or None.

    It is the first range in the paragraph that ends at the block's opening fence.
    """
    lines = README.read_text().splitlines()[:line - 1]
    while lines and not lines[-1].strip():
        lines.pop()
    start = len(lines)
    while start > 0 and lines[start - 1].strip() and not lines[start - 1].startswith("```"):
        start -= 1
    found = STATED_TIME.search(" ".join(lines[start:]))
    if found is None:
        return None
    return float(found.group(2)) * (60 if found.group(3) == "min" else 1)


def _params():
    return [pytest.param(code, stated_seconds(line), id=f"README.md:{line}",
                         marks=[pytest.mark.slow] if any(word in code for word in SLOW) else [])
            for line, code in python_blocks()]


def test_every_python_example_states_its_time_and_none_takes_over_a_minute_unsaid():
    for line, _ in python_blocks():
        seconds = stated_seconds(line)
        assert seconds is not None, (f"README.md:{line}: say how long the example takes, as a range ('4-9 s') "
                                     "in the paragraph just before it")
        assert seconds <= 60, f"README.md:{line}: over a minute ({seconds:g} s): make it smaller"


def test_readme_has_python_examples():
    assert len(python_blocks()) >= 5


def _run(argv, *, cwd, env, timeout):
    """``argv``'s exit status, stdout and stderr; on timeout its whole process group is killed (workers too)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


@pytest.mark.parametrize("code, stated", _params())
def test_python_example_runs_on_its_own(code, stated, tmp_path):
    example, cwd, tmp = tmp_path / "example.py", tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    example.write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env.update(TMPDIR=str(tmp), PYTHONWARNINGS="ignore", DASK_LOGGING__DISTRIBUTED="error")
    timeout = max(TIMEOUT, 3 * (stated or 0))  # far longer than the README says: the README is wrong
    status, out, err = _run([sys.executable, str(example)], cwd=cwd, env=env, timeout=timeout)
    assert status is not None, f"the example ran over {timeout:g} s\n--- stdout\n{out}\n--- stderr\n{err}"
    assert status == 0, f"exit status {status}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert out.strip(), "the example printed nothing"
    assert not list(cwd.iterdir()), f"the example wrote into the current directory: {list(cwd.iterdir())}"


def test_readme_names_no_path_outside_the_repository():
    text = README.read_text()
    found = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if MACHINE_PATH.search(line) or OUTSIDE.search(line)]
    assert not found, "\n".join(f"README.md:{n}: {line}" for n, line in found)


#: Files the README may name though they are not in the repository: what runs write (git-ignored).
WRITTEN = ("runs/", "bench-results/", "benchmarks/results/", "registry/", "stores/")
REPO_PATH = re.compile(r"(?<![\w./$-])((?:jobs|benchmarks|deploy|dimbsvm|tests)/[\w./-]*[\w/]|[A-Z][A-Z_]+\.md)\b")


def test_readme_names_only_files_in_the_repository():
    named = set(REPO_PATH.findall(README.read_text()))
    assert {"jobs/quickstart.yaml", "benchmarks/RESULTS.md", "deploy/README.md"} <= named
    missing = sorted(p for p in named if not (ROOT / p).exists() and not p.startswith(WRITTEN))
    assert not missing, f"README.md names files the repository lacks: {missing}"


def test_readme_sections_of_results_exist():
    """Every quoted section name after a mention of ``benchmarks/RESULTS.md`` names one of its sections."""
    headings = [line.lower() for line in RESULTS.read_text().splitlines() if line.startswith("## ")]
    text = " ".join(README.read_text().split())
    cited = [name for match in re.finditer(r"RESULTS\.md`?(?:'s)?,?((?:\s*(?:and\s+)?\"[^\"]+\",?)+)", text)
             for name in re.findall(r"\"([^\"]+)\"", match.group(1))]
    assert cited
    unknown = [name for name in cited if not any(name.lower() in heading for heading in headings)]
    assert not unknown, f"no section of RESULTS.md is named {unknown}"


def _option_strings():
    """``{verb: option strings}`` of dimbsvm's own parser; ``""``: the top-level options."""
    import argparse

    from dimbsvm.cli import _parser

    parser = _parser()
    options = {"": {s for a in parser._actions for s in a.option_strings}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                options[verb] = {s for a in sub._actions for s in a.option_strings}
    return options


def _code_text(text):
    """The README's command lines: its bash and unlabelled fenced blocks, and its inline code spans."""
    blocks = [code.replace("\\\n", " ") for _, language, code in fenced_blocks(text) if language in ("", "bash")]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return [line for block in blocks for line in block.splitlines()] + spans


#: Flags the README shows in prose that are not dimbsvm's: ``dask worker``'s, as in its cluster example.
DASK_FLAGS = {"--preload-nanny"}


def test_readme_cli_flags_exist():
    options = _option_strings()
    every = set().union(*options.values()) | DASK_FLAGS
    checked, wrong = 0, []
    for line in _code_text(README.read_text()):
        if line.lstrip().startswith(("--", "-v")):  # a flag in prose: one of some verb's
            flag = line.split()[0].split("=")[0]
            checked += 1
            if flag not in every:
                wrong.append(f"{flag} (in `{line}`)")
            continue
        for segment in re.split(r"(?<![\w.-])dimbsvm\s+(?=-|[a-z])", line)[1:]:
            words = segment.split("#")[0].split()
            verb = words[0] if words and not words[0].startswith("-") else ""
            if verb not in options:
                wrong.append(f"unknown command dimbsvm {verb} (in `{line}`)")
                continue
            for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words[1:] if verb else words)):
                checked += 1
                if flag.split("=")[0] not in options[verb] | options[""]:
                    wrong.append(f"dimbsvm {verb} {flag} (in `{line}`)")
    assert checked > 30
    assert not wrong, "\n".join(wrong)


def shell_commands(text):
    """``(block line, argv, files the block writes)`` of every ``dimbsvm`` command of the README's bash blocks."""
    import shlex

    commands = []
    for line, language, code in fenced_blocks(text):
        if language != "bash":
            continue
        lines = []
        for words in (shlex.split(c, comments=True) for c in code.replace("\\\n", " ").splitlines()):
            while "&&" in words:  # chained commands apart
                lines.append(words[:words.index("&&")])
                words = words[words.index("&&") + 1:]
            lines.append(words)
        written = {argv[argv.index(">") + 1] for argv in lines if ">" in argv[:-1]}
        commands += [(line, argv, written) for argv in lines if argv[:1] == ["dimbsvm"]]
    return commands


def test_readme_shell_commands_parse_and_name_existing_inputs():
    """Each ``dimbsvm`` command of a bash block parses; its job and ingested data exist, or the block writes them."""
    from dimbsvm.cli import _parser
    from dimbsvm.datasets.registry import bundled_names

    commands = shell_commands(README.read_text())
    assert len(commands) >= 7
    for line, argv, written in commands:
        where = f"README.md:{line}: {' '.join(argv)}"
        try:
            args = _parser().parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"does not parse: {where}")
        job = getattr(args, "job", None)
        if job is not None:
            assert (ROOT / job).is_file() or job in written, f"no job file {job}: {where}"
        if argv[1] == "ingest":
            assert args.source in bundled_names() or (ROOT / args.source).is_file(), f"no data {args.source}: {where}"


def test_readme_first_block_is_the_setup():
    """CI runs line 2 of the first block (.ci/run); line 1 installs and runs the main job."""
    _, language, code = fenced_blocks(README.read_text())[0]
    assert language == "bash" and code.splitlines() == [
        'pip install . && dimbsvm run jobs/quickstart.yaml',
        'pip install ".[dev,bench,mlflow]" && python -m pytest -q']  # mlflow: the tracking tests run in CI


RESULTS_MACHINE_PATH = re.compile(r"(?<![\w.$~/-])/(?:tmp|root|home|work)(?:/|\b)")


def test_results_md_names_no_machine_path():
    found = [(n, line[:160]) for n, line in enumerate(RESULTS.read_text().splitlines(), 1)
             if RESULTS_MACHINE_PATH.search(line)]
    assert not found, "\n".join(f"benchmarks/RESULTS.md:{n}: {line}" for n, line in found)


def test_results_generator_writes_no_machine_path(tmp_path):
    """A record naming paths of its machine is rendered without them, whole and as an update."""
    from benchmarks.results import portable_paths, render_results, update_results

    directory = tmp_path / "recall"
    directory.mkdir()
    summary = {"kind": "stored_stage_recall", "title": "Recall", "date": "2026-01-01",
               "command": ["python -m benchmarks.knn_scale --n 10 --cache /tmp/knn-cache --out /tmp/leaves",
                           "python -m benchmarks.strong_scaling --workdir /tmp --out /root/out/strong-1e7",
                           f"python -m benchmarks.x --out {ROOT}/benchmarks/results/x"],
               "description": "Run from a worktree (git worktree add /tmp/wt-base 293c257); data in /home/ann/d.",
               "machine": {"platform": "p", "processor": "x", "cpu_count": 2, "memory_gb": 1, "python": "3"},
               "rows": [{"dataset": "d", "n": 10, "k": 2, "k_store": 4, "recall_same_scaling": 1.0,
                         "recall_fold_scaling": 0.9, "short_rows": 0.0}]}
    (directory / "summary.json").write_text(json.dumps(summary))
    whole = render_results([directory], command="python -m benchmarks.results /tmp/recall")
    old = "# Benchmark results\n\n## Old\n\n- command: `x --cache /tmp/c --out /tmp/ab/base-1`\n"
    updated = update_results(old, [directory], command="c")
    for text in (whole, updated):
        assert not RESULTS_MACHINE_PATH.search(text), text
        assert "| d | 10 | 2 | 4 | 1.0000 |" in text  # the numbers as they were
    assert "--cache CACHE_DIR --out benchmarks/results/leaves`" in whole
    assert "--workdir WORK_DIR --out benchmarks/results/strong-1e7`" in whole
    assert "--out benchmarks/results/x`" in whole and "$TMPDIR/wt-base 293c257" in whole
    assert "`x --cache CACHE_DIR --out benchmarks/results/ab/base-1`" in updated
    assert portable_paths(RESULTS.read_text()) == RESULTS.read_text()  # what is committed is what it writes
