"""Replicating the HPC-SVM paper's Tables 2 and 3 (accuracy on UCI data) with nested CV.

Protocol: outer stratified 5-fold CV (shuffled, seed 0); in each outer
training fold a grid search with inner stratified 3-fold CV (seed 0) picks the
parameters by accuracy, the pipeline ``MinMaxScaler -> estimator`` is refitted
on the whole outer training fold and scored on its test fold. Parameters are
never chosen on a test fold. The paper's grids: ``C, c1, gamma_K`` in
``{1e-2, ..., 1e2}`` and ``k`` in ``{3, 4, 5, 6, 10, 15}``; ``--grid reduced``
takes ``c1`` in ``{1e-2, 1e-1, 1}`` and ``k`` in ``{5, 10}`` (the issue's
quick reference), which the exact kernel path needs to stay within minutes.

Peers with the same outer folds and grids over what they have: the exact
soft-margin SVM with a free bias (``SVC``, linear or RBF) and, for the linear
case, ``LinearSVC(loss="hinge")``.

Data: the paper's UCI sets found in ``../shared/datasets``: ``keel/multiclass``
CSVs (german is its one-hot 61-column version, not the 24-column numeric one)
and ``keel/imbalanced/haberman.dat``; CMC is "long-term use" (class 2) against
the rest, whose majority rate (77.4 %) matches the paper's SVM row.

Each run writes ``<kernel>-<grid>-<datasets>.json`` (fold records, command,
machine, packages) and its ``.md`` table to ``--out``, then rewrites
``summary.json`` (kind ``"hpc_replicate"``, read by ``python -m
benchmarks.results``) from every run file in ``--out``.

Usage (from the repository root)::

    python -m benchmarks.hpc_replicate --kernel linear --out benchmarks/results/hpc-replicate
    python -m benchmarks.hpc_replicate --kernel rbf --grid reduced --datasets sonar heart
    python -m benchmarks.hpc_replicate --report benchmarks/results/hpc-replicate/*.json
    python -m benchmarks.hpc_replicate --summarize-only benchmarks/results/hpc-replicate
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC

from dimbsvm.environment import machine_info, package_versions, utc_now
from benchmarks.results import module_section
from dimbsvm.datasets import load_csv, load_keel, shared_datasets_dir
from dimbsvm.svm.hpc import HPCClassifier

logger = logging.getLogger(__name__)

#: The paper's (SVM, HPCSVM) accuracies: Table 2 (linear) and Table 3 (Gaussian kernel).
PAPER = {
    "linear": {"australian": (85.51, 87.11), "bupa": (67.53, 71.01), "german": (74.90, 77.70),
               "ionosphere": (87.75, 88.89), "sonar": (72.16, 78.78), "wdbc": (93.51, 98.07),
               "pima": (71.48, 78.27), "heart": (80.00, 85.19), "tic-tac-toe": (98.33, 98.33),
               "wisconsin": (96.04, 97.36), "haberman": (73.53, 75.15),
               "contraceptive": (77.39, 78.41)},
    "rbf": {"australian": (85.51, 87.11), "bupa": (71.01, 75.65), "german": (75.40, 77.20),
            "ionosphere": (94.31, 96.02), "sonar": (88.47, 88.47), "wdbc": (96.14, 98.77),
            "pima": (72.39, 78.40), "heart": (82.96, 84.81), "tic-tac-toe": (98.33, 98.33),
            "wisconsin": (95.60, 97.66), "haberman": (73.53, 75.81),
            "contraceptive": (77.39, 78.59)},
}
DATASETS = ["australian", "bupa", "german", "ionosphere", "sonar", "wdbc", "pima", "heart",
            "tic-tac-toe", "wisconsin", "haberman", "contraceptive"]
POWERS = [1e-2, 1e-1, 1.0, 1e1, 1e2]
TITLE = "HPC-SVM: replicating the paper's Tables 2 and 3 (accuracy on UCI data, nested CV)"
DESCRIPTION = ("Outer stratified 5-fold CV (seed 0); in each outer training fold a grid search with inner "
               "stratified 3-fold CV (seed 0) picks the parameters by accuracy; MinMaxScaler -> estimator refitted "
               "on the outer training fold and scored on its test fold. `paper` grid: C, c1, gamma_K in "
               "{1e-2, ..., 1e2}, k in {3, 4, 5, 6, 10, 15}; `reduced` grid: c1 in {1e-2, 1e-1, 1}, k in {5, 10}.")


def load(name):
    """``(X, y)`` of one of :data:`DATASETS`, binary."""
    if name == "haberman":
        ds = load_keel("haberman")
        return ds.X, ds.y
    ds = load_csv(shared_datasets_dir() / "keel" / "multiclass" / f"{name}.csv")
    y = ds.y
    if name == "contraceptive":
        y = (y == ds.class_map["2"]).astype(int)
    return ds.X, y


def grids(kernel, grid):
    """``{method: (estimator, param grid)}`` with pipeline step names."""
    c1 = POWERS if grid == "paper" else [1e-2, 1e-1, 1.0]
    k = [3, 4, 5, 6, 10, 15] if grid == "paper" else [5, 10]
    hpc = {"hpcclassifier__C": POWERS, "hpcclassifier__c1": c1, "hpcclassifier__n_neighbors": k}
    if kernel == "linear":
        return {
            "hpc_linear": (HPCClassifier(max_iter=10_000, random_state=0), hpc),
            "svc_linear": (SVC(kernel="linear"), {"svc__C": POWERS}),
            "linear_svc_hinge": (LinearSVC(loss="hinge", max_iter=10_000, random_state=0),
                                 {"linearsvc__C": POWERS}),
        }
    return {
        "hpc_rbf": (HPCClassifier(kernel="rbf", max_iter=10_000, random_state=0),
                    {**hpc, "hpcclassifier__kernel_gamma": POWERS}),
        "svc_rbf": (SVC(kernel="rbf"), {"svc__C": POWERS, "svc__gamma": POWERS}),
    }


def outer_fold(name, X, y, method, estimator, grid, fold):
    """Grid search on the outer training fold, accuracy on its test fold."""
    outer = StratifiedKFold(5, shuffle=True, random_state=0)
    train, test = list(outer.split(X, y))[fold]
    search = GridSearchCV(make_pipeline(MinMaxScaler(), estimator), grid, scoring="accuracy",
                          cv=StratifiedKFold(3, shuffle=True, random_state=0), error_score="raise")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        search.fit(X[train], y[train])
    return {"dataset": name, "method": method, "fold": fold,
            "accuracy": float(search.score(X[test], y[test])),
            "params": {k.split("__")[1]: v for k, v in search.best_params_.items()},
            "seconds": time.perf_counter() - start,
            "not_converged": sum(issubclass(w.category, ConvergenceWarning) for w in caught)}


def _kernel_of(run: dict, path: Path) -> str:
    """The kernel of a run file: recorded, else the one whose method names its records use."""
    if run.get("kernel"):
        return run["kernel"]
    names = {r["method"] for r in run["records"]}
    for kernel in ("linear", "rbf"):
        if names <= set(grids(kernel, run["grid"])):
            return kernel
    return path.stem.split("-", 1)[0]


def _command_of(run: dict, kernel: str, out) -> tuple[str, bool]:
    """``(command, rebuilt)``: recorded, else rebuilt from the run's kernel, grid, datasets and methods."""
    if run.get("command"):
        return run["command"], False
    datasets = list(dict.fromkeys(r["dataset"] for r in run["records"]))
    names = list(dict.fromkeys(r["method"] for r in run["records"]))
    parts = ["python", "-m", "benchmarks.hpc_replicate", "--kernel", kernel, "--grid", run["grid"]]
    if datasets != DATASETS:
        parts += ["--datasets", *datasets]
    if set(names) != set(grids(kernel, run["grid"])):
        parts += ["--methods", *names]
    return shlex.join([*parts, "--out", str(out)]), True


def _stats(values) -> dict:
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if len(values) > 1 else float("nan")}


def summarize(paths, *, out=None) -> dict:
    """The ``summary.json`` (kind ``"hpc_replicate"``) of run files written by :func:`main`.

    Parameters
    ----------
    paths : iterable of Path
        ``<kernel>-<grid>-<datasets>.json`` files. A (kernel, dataset,
        method) measured by several files is taken from the one started last.
    out : Path, optional
        Results directory shown in rebuilt commands (default: the first file's).

    Returns
    -------
    dict
        Header (commands, first start date, summed wall time, machine,
        packages), ``runs`` (one entry per file) and ``tables[kernel]``:
        ``datasets``, ``methods`` (HPC first), ``grid`` per dataset,
        ``results[dataset][method]`` (accuracy mean and standard deviation
        over the 5 outer folds, ``ddof=1``; most frequent chosen parameters;
        seconds per outer fold; convergence warnings), ``over_datasets``
        (mean of the per-dataset means) and the paper's accuracies
        (:data:`PAPER`) for the same datasets.
    """
    paths = [Path(p) for p in paths]
    runs = sorted(((p, json.loads(p.read_text())) for p in paths), key=lambda item: item[1]["started"])
    if not runs:
        raise ValueError("no run files to summarize")
    out = out if out is not None else paths[0].parent
    by, run_entries, rebuilt = {}, [], []
    for path, run in runs:
        kernel = _kernel_of(run, path)
        command, was_rebuilt = _command_of(run, kernel, out)
        if was_rebuilt:
            rebuilt.append(path.name)
        run_entries.append({"file": path.name, "kernel": kernel, "grid": run["grid"], "command": command,
                            "started": run["started"], "wall_seconds": run["wall_seconds"],
                            "datasets": list(dict.fromkeys(r["dataset"] for r in run["records"])),
                            "methods": list(dict.fromkeys(r["method"] for r in run["records"]))})
        fresh = {}
        for r in run["records"]:
            fresh.setdefault((kernel, r["dataset"], r["method"]), []).append({**r, "grid": run["grid"]})
        by.update(fresh)  # later runs replace earlier ones
    tables = {}
    for kernel in ("linear", "rbf"):
        keys = [k for k in by if k[0] == kernel]
        if not keys:
            continue
        methods = sorted(dict.fromkeys(k[2] for k in keys), key=lambda m: not m.startswith("hpc"))
        datasets = [d for d in DATASETS if any(k[1] == d for k in keys)]
        datasets += sorted({k[1] for k in keys} - set(datasets))
        results = {}
        for d in datasets:
            for m in methods:
                records = by.get((kernel, d, m))
                if not records:
                    continue
                common = Counter(json.dumps(r["params"], sort_keys=True) for r in records).most_common(1)[0]
                results.setdefault(d, {})[m] = {
                    "accuracy": _stats([r["accuracy"] for r in records]), "n_folds": len(records),
                    "grid": records[0]["grid"], "params_mode": json.loads(common[0]), "params_mode_count": common[1],
                    "seconds": float(np.mean([r["seconds"] for r in records])),
                    "not_converged": int(sum(r["not_converged"] for r in records))}
        complete = [d for d in datasets if all(m in results[d] for m in methods)]
        over = {m: {"mean": float(np.mean([results[d][m]["accuracy"]["mean"] for d in complete])),
                    "n_datasets": len(complete)} for m in methods}
        wins = {m: sum(results[d][methods[0]]["accuracy"]["mean"] > results[d][m]["accuracy"]["mean"]
                       for d in complete) for m in methods[1:]}
        paper = {d: list(PAPER[kernel][d]) for d in datasets if d in PAPER[kernel]}
        paper_mean = ([float(np.mean([paper[d][i] for d in complete])) for i in (0, 1)]
                      if all(d in paper for d in complete) and complete else None)
        tables[kernel] = {"datasets": datasets, "methods": methods, "results": results, "complete": complete,
                          "over_datasets": over, "wins": wins, "paper": paper, "paper_mean": paper_mean}
    first = runs[0][1]
    summary = {"kind": "hpc_replicate", "title": TITLE, "description": DESCRIPTION,
               "command": [e["command"] for e in run_entries], "date": first["started"],
               "wall_seconds": round(sum(e["wall_seconds"] for e in run_entries), 1),
               "machine": first["machine"], "packages": first["packages"], "runs": run_entries, "tables": tables}
    if rebuilt:
        summary["command_note"] = (f"the commands of {', '.join(rebuilt)} are rebuilt from the run file's "
                                   "grid, datasets and methods; --jobs was not recorded")
    machines = {json.dumps(run["machine"], sort_keys=True) for _, run in runs}
    if len(machines) > 1:
        summary["machine_note"] = "the run files were measured on different machines; see runs"
        for entry, (_, run) in zip(run_entries, runs):
            entry["machine"] = run["machine"]
    return summary


def render_markdown(summary: dict) -> list[str]:
    """The tables of an ``"hpc_replicate"`` summary (markdown lines), as RESULTS.md and the ``.md`` files show them."""
    caption = ("Accuracy in percent: mean ± standard deviation over the 5 outer folds; parameters chosen by the "
               "inner 3-fold CV on each outer training fold. `paper` columns are the accuracies the HPC-SVM paper "
               "reports (Table 2: linear, Table 3: Gaussian kernel), not measured here.")
    lines = [caption, ""]
    if summary.get("machine_note"):
        lines += [summary["machine_note"] + ".", ""]
    titles = {"linear": "Linear kernel (paper's Table 2)", "rbf": "Gaussian kernel (paper's Table 3)"}
    for kernel, table in summary["tables"].items():
        methods, results = table["methods"], table["results"]
        hpc = methods[0]
        lines += [f"{titles.get(kernel, kernel)}:", "",
                  "| dataset | grid | " + " | ".join(methods) + " | paper SVM | paper HPCSVM | most frequent "
                  f"{hpc} parameters |", "|---" * (len(methods) + 5) + "|"]
        for d in table["datasets"]:
            row = results[d]
            cells = [f"{100 * row[m]['accuracy']['mean']:.2f} ± {100 * row[m]['accuracy']['std']:.2f}"
                     if m in row else "–" for m in methods]
            svm, hpcsvm = (f"{v:.2f}" for v in table["paper"][d]) if d in table["paper"] else ("–", "–")
            grid = next(iter(row.values()))["grid"]
            mode = (f"{json.dumps(row[hpc]['params_mode'], sort_keys=True)} "
                    f"({row[hpc]['params_mode_count']}/{row[hpc]['n_folds']})" if hpc in row else "–")
            lines.append(f"| {d} | {grid} | " + " | ".join(cells) + f" | {svm} | {hpcsvm} | {mode} |")
        over, paper_mean = table["over_datasets"], table["paper_mean"]
        paper_cells = [f"{v:.2f}" for v in paper_mean] if paper_mean else ["", ""]
        lines.append(f"| **mean over {len(table['complete'])}** | | "
                     + " | ".join(f"**{100 * over[m]['mean']:.2f}**" for m in methods)
                     + f" | {paper_cells[0]} | {paper_cells[1]} | |")
        if table["wins"]:
            lines += ["", f"{hpc} more accurate than: " + ", ".join(
                f"{m} on {w}/{len(table['complete'])} datasets" for m, w in table["wins"].items()) + "."]
        lines.append("")
    lines.append("Runs: " + "; ".join(f"`{r['file']}` ({r['kernel']}, {r['grid']} grid, {r['wall_seconds']:.0f} s, "
                                      f"started {r['started']})" for r in summary["runs"]) + ".")
    return lines


def _run_files(directory: Path) -> list[Path]:
    return sorted(p for p in Path(directory).glob("*.json") if p.name != "summary.json")


def write_summary(directory) -> dict:
    """Write ``summary.json`` of a results directory from all its run files; return the summary."""
    directory = Path(directory)
    summary = summarize(_run_files(directory), out=directory)
    (directory / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=["linear", "rbf"], default="linear")
    parser.add_argument("--grid", choices=["paper", "reduced"], default="paper")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/hpc-replicate"))
    parser.add_argument("--report", type=Path, nargs="+", default=None,
                        help="only print the tables of earlier runs' JSON files")
    parser.add_argument("--summarize-only", type=Path, metavar="DIR",
                        help="only (re)write DIR/summary.json from the run files in DIR")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.report:
        print("\n".join(render_markdown(summarize(args.report))))
        return 0
    if args.summarize_only:
        write_summary(args.summarize_only)
        print(f"wrote {args.summarize_only / 'summary.json'}")
        return 0
    table = grids(args.kernel, args.grid)
    chosen = {m: table[m] for m in (args.methods or table)}
    data = {name: load(name) for name in args.datasets}
    calls = [delayed(outer_fold)(name, X, y, m, est, grid, fold)
             for name, (X, y) in data.items() for m, (est, grid) in chosen.items()
             for fold in range(5)]
    start, started = time.perf_counter(), utc_now()
    records = Parallel(n_jobs=args.jobs)(calls)
    wall = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    everything = set(args.datasets) == set(DATASETS)
    tag = f"{args.kernel}-{args.grid}-{'all' if everything else '-'.join(args.datasets)}"
    path = args.out / f"{tag}.json"
    path.write_text(json.dumps(
        {"records": records, "started": started, "wall_seconds": round(wall, 1), "kernel": args.kernel,
         "grid": args.grid, "command": "python -m benchmarks.hpc_replicate " + shlex.join(argv),
         "machine": machine_info(), "packages": package_versions()},
        indent=1, default=str))
    text = "\n".join(module_section(summarize([path]), render_markdown))
    (args.out / f"{tag}.md").write_text(text + "\n")
    write_summary(args.out)
    logger.info("wall time %.1f s", wall)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
