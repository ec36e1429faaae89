"""The README's CLI synopsis and the verbs' help against the parser itself (issue 51, item 7)."""

import re
from pathlib import Path

from dimbsvm.cli import _parser

ROOT = Path(__file__).resolve().parents[1]


def _verbs():
    [action] = [a for a in _parser()._actions if a.dest == "verb"]
    return action.choices


def _synopsis() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## CLI", 1)[1].split("```", 2)[1]


def test_the_readme_synopsis_lists_every_verb():
    listed = set(re.findall(r"^dimbsvm (\w+)", _synopsis(), flags=re.MULTILINE))
    assert set(_verbs()) <= listed, f"verbs missing from the README's CLI synopsis: {set(_verbs()) - listed}"


def test_each_verbs_scheduler_default_says_where_it_runs():
    """The verbs that place small work in this process say so (predict: a few partitions); ingest reads in this
    process; none claims an embedded cluster it does not start."""
    helps = {verb: next((a.help for a in parser._actions if a.dest == "scheduler"), None)
             for verb, parser in _verbs().items()}
    assert all("small work in this process" in helps[verb] for verb in ("run", "retrain", "schedule"))
    assert helps["ingest"] == "scheduler address, tcp:// or tls:// (default: this process reads the source, in threads)"
    assert "else at most two partitions in this process, else an embedded LocalCluster" in helps["predict"]
    assert helps["bench"].endswith("else an embedded LocalCluster)")
