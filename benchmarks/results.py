"""Regenerate ``benchmarks/RESULTS.md`` from results directories.

Usage (from the repository root)::

    python -m benchmarks.results benchmarks/results/keel-public [DIR ...] [--output benchmarks/RESULTS.md]

Each directory's ``summary.json`` says what kind of benchmark wrote it. A kind
with an entry in :data:`RENDERERS` is rendered by it; any other kind names the
benchmark module that wrote it (kind ``"hpc_scale"`` is
``benchmarks/hpc_scale.py``, a ``-`` in a kind stands for ``_``) and is rendered
by that module's ``render_markdown(summary)``, under a header this script
writes from the summary's ``command``, ``date`` (or ``started``), ``machine``
and, if present, ``packages``, ``title``, ``description`` and
``wall_seconds``. The numbers in RESULTS.md are only ever written by this
script, so they always match a results directory.

RESULTS.md names no path of the machine a benchmark ran on: the text is
passed through :func:`portable_paths`, which turns a recorded ``--cache /tmp/x``
into ``--cache CACHE_DIR``, ``--out /root/out/x`` into
``--out benchmarks/results/x`` and any other such path into a placeholder.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
import sys
from pathlib import Path

from dimbsvm.bench import report
from dimbsvm.environment import utc_now

__all__ = ["RENDERERS", "find_renderer", "machine_line", "main", "module_section", "portable_paths",
           "render_results"]

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "RESULTS.md"
REPOSITORY = DEFAULT_OUTPUT.parent.parent

#: Options whose value is a machine path in a recorded command, and what RESULTS.md shows instead
#: (``--out``: the path's last parts under ``benchmarks/results/``, where results directories go).
PATH_OPTIONS = {"--cache": "CACHE_DIR", "--workdir": "WORK_DIR", "--exchange-dir": "SCRATCH_DIR",
                "--scheduler-file": "scheduler.json", "--out": None}

#: A path of the machine: under its temporary directory, a home, or a scratch or work file system.
_MACHINE_PATH = re.compile(r"(?<![\w.$~/-])/(?:var/tmp|tmp|root|home/[^/\s`'\"),;|]+|work|scratch|mnt)"
                           r"(?:/[^\s`'\"),;|]*)?(?=$|[\s`'\"),;|])")
#: Generic replacement of a machine path's root (the rest of the path is kept).
_ROOTS = ((re.compile(r"^/(?:var/)?tmp(?=/|$)"), "$TMPDIR"), (re.compile(r"^/(?:root|home/[^/]+)(?=/|$)"), "~"),
          (re.compile(r"^/(?:work|scratch|mnt)(?=/|$)"), "SCRATCH_DIR"))


def write_summary(out, summary: dict, report_text: str | None = None) -> None:
    """Write a benchmark's ``summary.json`` (and its table as ``report.md``) into ``out``, created if needed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if report_text is not None:
        (out / "report.md").write_text(report_text + "\n")


def docstring_text(doc: str, first: int, stop: int | None = None, note: str = "") -> str:
    """A benchmark's description: its docstring's paragraphs ``first:stop`` on one line, then ``note``."""
    text = " ".join(" ".join(doc.split("\n\n")[first:stop]).split())
    return f"{text} {note}" if note else text


def when_and_where(started: str, wall_start: float) -> dict:
    """A summary's ``date``, ``wall_seconds`` (since ``time.perf_counter()`` was ``wall_start``), ``machine``, ``packages``."""
    import time

    from dimbsvm.environment import machine_info, package_versions

    return {"date": started, "wall_seconds": time.perf_counter() - wall_start, "machine": machine_info(),
            "packages": package_versions()}


def publish(summary: dict, render, out=None) -> int:
    """Print ``render(summary)`` and, with ``out``, write the summary and that table there; ``main``'s exit status."""
    text = render(summary)
    print(text)
    if out:
        write_summary(out, summary, text)
    return 0


def _results_dir(path: str) -> str:
    """``benchmarks/results/`` and the path's parts under its machine root (less a leading ``out``, ``results``)."""
    parts = [p for p in _generic(path).split("/") if p][1:]  # without the placeholder of the root
    if parts[:1] in (["out"], ["results"]):
        parts = parts[1:]
    return "/".join(["benchmarks", "results", *parts])


def _generic(path: str) -> str:
    for root, placeholder in _ROOTS:
        if root.match(path):
            return root.sub(placeholder, path, count=1)
    return path


def portable_paths(text: str) -> str:
    """``text`` with the paths of the machine it was recorded on replaced (RESULTS.md names none).

    A path inside this repository becomes relative to it; the value of an
    option of :data:`PATH_OPTIONS` becomes its placeholder (``--out``: a
    directory under ``benchmarks/results/``); any other path under the
    temporary directory, a home or ``/work``, ``/scratch``, ``/mnt`` keeps
    its last parts under ``$TMPDIR``, ``~`` or ``SCRATCH_DIR``. Numbers and
    other text are left as they are.

    Examples
    --------
    >>> portable_paths("python -m benchmarks.hpc_scale --n 1000 --cache /tmp/hpcscale --out /root/out/scale-1e7")
    'python -m benchmarks.hpc_scale --n 1000 --cache CACHE_DIR --out benchmarks/results/scale-1e7'
    >>> portable_paths("`git worktree add /tmp/wt-base 293c257`, then the command from /tmp/wt-base; /proc/stat")
    '`git worktree add $TMPDIR/wt-base 293c257`, then the command from $TMPDIR/wt-base; /proc/stat'
    >>> portable_paths("--workdir /tmp --out /home/ann/runs/a, in /work/data")
    '--workdir WORK_DIR --out benchmarks/results/runs/a, in SCRATCH_DIR/data'
    >>> portable_paths(f"--out {REPOSITORY}/benchmarks/results/scale, from {REPOSITORY}")
    '--out benchmarks/results/scale, from .'
    """
    inside = r"(?<![\w.$~/-])" + re.escape(str(REPOSITORY))
    text = re.sub(inside + "/", "", text)
    text = re.sub(inside + r"(?=$|[\s`'\"),;|])", ".", text)

    def option(match):
        name, path = match.group(1), match.group(3)
        value = PATH_OPTIONS[name] or _results_dir(path)
        return f"{name}{match.group(2)}{value}"

    names = "|".join(re.escape(name) for name in PATH_OPTIONS)
    text = re.sub(rf"(?<![\w-])({names})(=|\s+)({_MACHINE_PATH.pattern})", option, text)
    return _MACHINE_PATH.sub(lambda match: _generic(match.group(0)), text)


def _quality_section(summary: dict, directory: Path) -> list[str]:
    suite = summary["suite"]
    lines = [f"## Quality: {suite['name']}", ""]
    if suite.get("description"):
        lines += [suite["description"].strip(), ""]
    lines += [
        *report.header_lines(summary),
        "",
        f"Mean over {len(summary['datasets'])} datasets (± standard deviation across datasets), average ranks:",
        "",
        report.mean_table(summary),
        "",
        "Methods:",
        "",
        *report.methods_legend(summary),
        "",
        *report.table_notes(summary),
        "",
        *report.significance_lines(summary),
        "",
        f"Per-dataset tables and plots: `{directory}/report.md` (results directories are not committed; "
        "the command above recreates them).",
    ]
    return lines


def _scale_section(summary: dict, directory: Path) -> list[str]:
    from .scale import render_markdown

    machine = summary.get("machine", {})
    return [
        "## Scale: synthetic stores (make_imbalanced, 32 features, 1 % minority)",
        "",
        f"Command: `{summary['command']}`; date {summary['date']}; machine: "
        + ", ".join(f"{k} {v}" for k, v in machine.items()),
        "",
        "Seconds per stage and the cluster's peak process memory (summed over workers) on an embedded "
        "cluster of single-threaded workers; quality on the last 20 % of rows. Peers run in one process, "
        "in memory, in the same script.",
        "",
        render_markdown(summary),
    ]


#: ``summary["kind"]`` -> function(summary, directory) returning markdown lines.
RENDERERS = {"quality": _quality_section, "scale": _scale_section}


def machine_line(machine: dict) -> str:
    """One line describing the machine of :func:`dimbsvm.environment.machine_info`.

    Examples
    --------
    >>> machine_line({"platform": "Linux", "processor": "AMD EPYC", "cpu_count": 2, "memory_gb": 23.5,
    ...               "python": "3.11.7"})
    'Linux; AMD EPYC; 2 logical CPUs; 23.5 GiB memory; Python 3.11.7'
    """
    known = ("platform", "processor", "cpu_count", "memory_gb", "python")
    if not all(k in machine for k in known):
        return ", ".join(f"{k} {v}" for k, v in machine.items())
    return (f"{machine['platform']}; {machine['processor']}; {machine['cpu_count']} logical CPUs; "
            f"{machine['memory_gb']} GiB memory; Python {machine['python']}")


def _module_name(kind) -> str | None:
    """``benchmarks.<module>`` for a kind, or None if the kind cannot name a module."""
    if not isinstance(kind, str):
        return None
    name = kind.replace("-", "_")
    return f"{__package__ or 'benchmarks'}.{name}" if name.isidentifier() else None


def find_renderer(kind):
    """The section function for a kind: :data:`RENDERERS`, else the kind's module's ``render_markdown``.

    Parameters
    ----------
    kind : str
        ``summary["kind"]``.

    Returns
    -------
    callable or None
        ``function(summary, directory) -> list[str]``; None if the kind has no
        explicit renderer and no module ``benchmarks.<kind>`` with a
        ``render_markdown`` function. An import error raised *inside* an
        existing module propagates.
    """
    if kind in RENDERERS:
        return RENDERERS[kind]
    module_name = _module_name(kind)
    if module_name is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise
    render = getattr(module, "render_markdown", None)
    if not callable(render):
        return None

    def section(summary: dict, directory: Path) -> list[str]:
        return module_section(summary, render, source=directory / "summary.json")

    return section


def module_section(summary: dict, render, *, source="summary") -> list[str]:
    """A RESULTS.md section: a header written from the summary, then ``render(summary)``.

    Benchmarks whose kind is rendered by the generic rule use this for their
    own ``report.md`` too, so the two always agree.

    Parameters
    ----------
    summary : dict
        Needs ``kind``, ``command`` (a string or a list of strings),
        ``date`` (or ``started``) and ``machine``; ``title``,
        ``description``, ``command_note`` (how the command is known, if it
        was not recorded), ``wall_seconds`` and ``packages`` are shown if
        present.
    render : callable
        ``render(summary) -> str or list[str]``, the tables.
    source : str or Path, default="summary"
        Where the summary came from, for error messages.

    Raises
    ------
    ValueError
        The summary lacks the command, date or machine.
    """
    missing = [key for key in ("command", "machine") if key not in summary]
    date = summary.get("date", summary.get("started"))
    if date is None:
        missing.append("date")
    if missing:
        raise ValueError(f"{source}: kind {summary.get('kind')!r} lacks {', '.join(missing)}")
    lines = [f"## {summary.get('title') or summary.get('kind')}", ""]
    if summary.get("description"):
        lines += [summary["description"].strip(), ""]
    when = f"- date: {date} (UTC)"
    if summary.get("wall_seconds") is not None:
        when += f"; wall time {summary['wall_seconds']:.0f} s"
    commands = summary["command"] if isinstance(summary["command"], list) else [summary["command"]]
    lines += [f"- command: `{c}`" for c in commands]
    if summary.get("command_note"):
        lines.append(f"- about the commands: {summary['command_note']}")
    lines += [when, f"- machine: {machine_line(summary['machine'])}"]
    if summary.get("packages"):
        lines.append("- packages: " + ", ".join(f"{k} {v}" for k, v in summary["packages"].items()))
    body = render(summary)
    lines += ["", *([body] if isinstance(body, str) else body)]
    return lines


def render_results(directories, *, command: str, placeholders: bool = True) -> str:
    """RESULTS.md as text, one section per results directory in the order given.

    ``placeholders``: a "not measured yet" section for the scale benchmark
    when no directory holds it (a whole file; not when updating one).

    Raises
    ------
    FileNotFoundError
        A directory without ``summary.json``.
    ValueError
        A summary of a kind without a renderer (neither in :data:`RENDERERS`
        nor a module ``benchmarks.<kind>`` with ``render_markdown``), or a
        summary without the command, date and machine of its run.
    """
    sections = []
    kinds = set()
    for directory in map(Path, directories):
        path = directory / "summary.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found; run the benchmark first")
        summary = json.loads(path.read_text())
        kind = summary.get("kind")
        renderer = find_renderer(kind)
        if renderer is None:
            raise ValueError(f"{path}: unknown benchmark kind {kind!r}; known: {', '.join(RENDERERS)}, or a "
                             "module benchmarks/<kind>.py with render_markdown(summary)")
        kinds.add(kind)
        sections.append(renderer(summary, directory))
    parts = [
        "# Benchmark results",
        "",
        f"Generated by `{command}` on {utc_now()} (UTC) from the results directories named below. "
        "Do not edit by hand: rerun the benchmark commands, then this one.",
        "",
    ]
    for section in sections:
        parts += [*section, ""]
    if placeholders and "scale" not in kinds:
        parts += ["## Scale", "", "Not measured yet (`benchmarks/scale.py`).", ""]
    return portable_paths("\n".join(parts))


def update_results(existing: str, directories, *, command: str) -> str:
    """``existing`` RESULTS.md with the sections of ``directories`` replaced (same ``## `` title) or appended.

    For a benchmark rerun without the results directories of every other
    section at hand: the other sections are kept as they are, and the ones
    given are still only ever written by their renderer.
    """
    rendered = render_results(directories, command=command, placeholders=False)
    new_sections = _sections(rendered)[1:]  # [0] is the generated header
    old = _sections(existing)
    titles = [section[0] for section in old]
    for section in new_sections:
        if section[0] in titles:
            old[titles.index(section[0])] = section
        else:
            old.append(section)
            titles.append(section[0])
    for section in old[:-1]:  # a blank line before every heading
        while section and not section[-1].strip():
            section.pop()
        section.append("")
    text = "\n".join(line for section in old for line in section)
    return portable_paths(text.rstrip("\n") + "\n")


def _sections(text: str) -> list[list[str]]:
    """Lines of ``text`` cut before every ``## `` heading (the part before the first is section 0)."""
    sections = [[]]
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append([])
        sections[-1].append(line)
    return sections


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.results``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.results",
                                     description="Regenerate benchmarks/RESULTS.md from results directories.")
    parser.add_argument("directories", nargs="+", help="results directories (each with summary.json)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write (default: %(default)s)")
    parser.add_argument("--update", action="store_true",
                        help="replace (or append) only these directories' sections in the existing file")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.results " + shlex.join(argv)
    try:
        if args.update and Path(args.output).is_file():
            text = update_results(Path(args.output).read_text(), args.directories, command=command)
        else:
            text = render_results(args.directories, command=command)
    except (FileNotFoundError, ValueError) as exc:
        print(f"benchmarks.results: error: {exc}", file=sys.stderr)
        return 2
    Path(args.output).write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
