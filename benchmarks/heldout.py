"""A quality benchmark's results re-analysed without the datasets a configuration was chosen on.

Usage (from the repository root)::

    python -m benchmarks.heldout benchmarks/results/keel-all benchmarks/results/keel-all-heldout \\
        --chosen-on benchmarks/search-public.yaml
    python -m benchmarks.results benchmarks/results/keel-all-heldout --update

Copies ``SOURCE``'s per-fold records (``folds.csv``) less every dataset of the
``--chosen-on`` suite into ``DESTINATION``, with ``SOURCE``'s summary (its
run, machine and suite, renamed) restricted to the rest, then re-analyses it
with ``dimbsvm bench --rewrite`` (the same statistics as the full run: means,
ranks, Friedman, Holm-corrected Wilcoxon against the best control). The
records are those of the full run, not a new one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd


def held_out(source: Path, destination: Path, chosen_on: list[str], *, name: str, note: str) -> int:
    """Write ``destination`` from ``source`` without the ``chosen_on`` datasets; return how many remain."""
    from dimbsvm.bench.report import rewrite_results

    folds = pd.read_csv(source / "folds.csv")
    missing = sorted(set(chosen_on) - set(folds["dataset"]))
    if missing:
        raise SystemExit(f"{source}: the run has no fold of {', '.join(missing)}")
    summary = json.loads((source / "summary.json").read_text())
    destination.mkdir(parents=True, exist_ok=True)
    folds[~folds["dataset"].isin(chosen_on)].to_csv(destination / "folds.csv", index=False)
    summary["run"]["datasets"] = {k: v for k, v in summary["run"]["datasets"].items() if k not in chosen_on}
    summary["suite"]["datasets"] = [d for d in summary["suite"]["datasets"] if d not in chosen_on]
    summary["suite"]["name"] = name
    summary["suite"]["description"] = note
    (destination / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rewrite_results(destination)
    return len(summary["run"]["datasets"])


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.heldout``."""
    from dimbsvm.bench.suite import load_suite

    parser = argparse.ArgumentParser(prog="python -m benchmarks.heldout", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    parser.add_argument("--chosen-on", required=True, help="suite (YAML) whose datasets are left out")
    parser.add_argument("--what", default="dimbsvm.recommended()", help="what was chosen on them (for the title)")
    args = parser.parse_args(argv)
    chosen_on = list(load_suite(args.chosen_on)["datasets"])
    source = json.loads((args.source / "summary.json").read_text())
    source_name = source["suite"]["name"]
    kept = len(set(source["run"]["datasets"]) - set(chosen_on))
    note = (f"The {source_name} run re-analysed without the {len(chosen_on)} datasets of {args.chosen_on}, on which "
            f"{args.what} was chosen: the same folds and records, {kept} datasets (`python -m benchmarks.heldout "
            f"{args.source} {args.destination} --chosen-on {args.chosen_on}`). Fit and predict times as recorded "
            "in that run.")
    n = held_out(args.source, args.destination, chosen_on,
                 name=f"{source_name} on the {kept} sets {args.what} was not chosen on", note=note)
    print(f"{args.destination}: {n} datasets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
