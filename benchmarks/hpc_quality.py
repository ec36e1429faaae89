"""HPC-SVM on public KEEL imbalanced data: plain, class-weighted and with the OTHR threshold.

Protocol (that of ``benchmarks/keel-public.yaml``): stratified 5-fold CV
repeated with seeds 0 and 1, ``MinMaxScaler`` fitted on each training fold,
every method on identical folds (the fold engine, :mod:`dimbsvm.model_selection.folds`).
No parameter is tuned: every SVM has ``C=1``; the RBF width is
``gamma="scale"`` for ``SVC`` and HPC alike; HPC keeps its defaults
(``c1=1``, ``n_neighbors=5``, ``gamma=1``, ``eps=1e-6``). The hinge-loss
``LinearSVC`` rows are HPC with ``c1=0`` up to the bias penalty, so
``hpc_linear`` against ``linear_svc`` isolates the hypergraph term, and
``hpc_rbf`` against ``svc`` likewise (up to the bias, which ``SVC`` leaves
free).

Writes ``folds.csv``, ``run.json``, ``summary.json`` (kind ``"hpc_quality"``,
read by ``python -m benchmarks.results``) and ``report.md`` to ``--out``.

Usage (from the repository root)::

    python -m benchmarks.hpc_quality                      # 10 datasets, all methods
    python -m benchmarks.hpc_quality --datasets glass6 pima --jobs 2 --out DIR
    python -m benchmarks.hpc_quality --summarize-only DIR # summary.json from DIR's folds.csv, run.json
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC, LinearSVC

from dimbsvm.environment import machine_info, package_versions, utc_now
from benchmarks.results import module_section
from dimbsvm.datasets import load_keel
from dimbsvm.model_selection.splits import minority_class

from dimbsvm.bench.quality import evaluate_method_fold
from dimbsvm.svm.hpc import HPCClassifier

logger = logging.getLogger(__name__)

DATASETS = ["glass6", "ecoli1", "pima", "glass2", "haberman", "vehicle0", "abalone9-18",
            "new_thyroid1", "wisconsin", "yeast5"]
METRICS = ("g_mean", "f_measure", "auc", "fit_time")
TITLE = "HPC-SVM on public KEEL imbalanced data: plain, class-weighted and with the OTHR threshold"
DESCRIPTION = ("Stratified 5-fold CV repeated with seeds 0 and 1, min-max scaling fitted per training fold, "
               "identical folds for every method; nothing tuned: C=1 everywhere, gamma='scale' for SVC and "
               "HPC's RBF, HPC's defaults (c1=1, n_neighbors=5). `linear_svc` (hinge) is HPC with c1=0 up to "
               "the bias penalty, so `hpc_linear` against `linear_svc` isolates the hypergraph term.")


def _othr(base):
    try:
        from dimbsvm.svm.othr import OTHRClassifier
    except ImportError:  # pragma: no cover - OTHR not available in this checkout
        return None
    return OTHRClassifier(base)


def methods():
    """``{name: unfitted estimator}``; OTHR rows are left out if OTHR cannot be imported."""
    table = {
        "linear_svc": LinearSVC(loss="hinge", C=1.0, max_iter=10_000, random_state=0),
        "linear_svc_balanced": LinearSVC(loss="hinge", C=1.0, class_weight="balanced",
                                         max_iter=10_000, random_state=0),
        "svc": SVC(kernel="rbf", C=1.0, gamma="scale"),
        "svc_balanced": SVC(kernel="rbf", C=1.0, gamma="scale", class_weight="balanced"),
        "hpc_linear": HPCClassifier(random_state=0),
        "hpc_linear_balanced": HPCClassifier(class_weight="balanced", random_state=0),
        "hpc_rbf": HPCClassifier(kernel="rbf", random_state=0),
        "hpc_rbf_balanced": HPCClassifier(kernel="rbf", class_weight="balanced", random_state=0),
        "othr_svc": _othr(SVC(kernel="rbf", C=1.0, gamma="scale")),
        "othr_hpc_linear": _othr(HPCClassifier(random_state=0)),
        "othr_hpc_rbf": _othr(HPCClassifier(kernel="rbf", random_state=0)),
    }
    return {name: est for name, est in table.items() if est is not None}


def _run_fold(dataset, X, y, method, estimator, seed, fold):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        record = evaluate_method_fold(X, y, dataset=dataset, method=method, estimator=estimator, n_splits=5,
                                      seed=seed, fold=fold, metrics=METRICS, pos_label=minority_class(y))
    record.pop("error")
    record.update(not_converged=sum(issubclass(w.category, ConvergenceWarning) for w in caught))
    return record


def summarise(folds: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-dataset means and the mean/std over datasets with average G-mean/F ranks."""
    per_dataset = folds.groupby(["method", "dataset"])[list(METRICS)].mean()
    rows = []
    for metric in ("g_mean", "f_measure"):
        matrix = per_dataset[metric].unstack("method")
        ranks = matrix.rank(axis=1, ascending=False).mean()
        rows.append(ranks.rename(f"rank_{metric}"))
    overall = per_dataset.groupby("method").agg(["mean", "std"])
    overall.columns = [f"{m}_{s}" for m, s in overall.columns]
    overall = overall.join(pd.concat(rows, axis=1))
    overall["not_converged"] = folds.groupby("method")["not_converged"].sum()
    return per_dataset, overall.sort_values("rank_g_mean")


def command_line(run: dict, out) -> tuple[str, str | None]:
    """The command of a run and a note if it was rebuilt rather than recorded.

    The command is ``run.json``'s, else rebuilt from its datasets and methods:
    ``run.json`` files written before the command was recorded hold the
    datasets and methods; the options that change results are rebuilt from
    them (``--jobs`` changes only the wall time and is not known).
    """
    if run.get("command"):
        return run["command"], None
    parts = ["python", "-m", "benchmarks.hpc_quality"]
    if list(run["datasets"]) != DATASETS:
        parts += ["--datasets", *run["datasets"]]
    if list(run["methods"]) != list(methods()):
        parts += ["--methods", *run["methods"]]
    parts += ["--out", str(out)]
    return shlex.join(parts), "rebuilt from run.json's datasets and methods; --jobs was not recorded"


def summary_from_files(directory) -> dict:
    """The ``summary.json`` (kind ``"hpc_quality"``) of a results directory, read from its files.

    Parameters
    ----------
    directory : str or Path
        Holds ``folds.csv`` (one row per fold fit) and ``run.json`` (start,
        wall time, datasets, methods, machine, packages) as :func:`main`
        writes them.

    Returns
    -------
    dict
        Header (command, date, wall time, machine, packages), ``datasets``,
        ``methods`` (by average G-mean rank), ``per_dataset[dataset][method]``
        with the mean and standard deviation over folds (``ddof=1``) of each
        metric, ``over_datasets[method]`` with the mean and standard deviation
        across datasets of the per-dataset means, average ranks and the
        LIBLINEAR non-convergence count.
    """
    directory = Path(directory)
    run = json.loads((directory / "run.json").read_text())
    folds = pd.read_csv(directory / "folds.csv")
    per_dataset, overall = summarise(folds)
    spread = folds.groupby(["method", "dataset"])[list(METRICS)].std(ddof=1)
    counts = folds.groupby(["method", "dataset"]).size()
    datasets = [d for d in run["datasets"] if d in set(folds["dataset"])]
    results = {}
    for (method, dataset), row in per_dataset.iterrows():
        results.setdefault(dataset, {})[method] = {
            **{m: {"mean": float(row[m]), "std": float(spread.loc[(method, dataset), m])} for m in METRICS},
            "n_folds": int(counts.loc[(method, dataset)]),
            "not_converged": int(folds[(folds["method"] == method) & (folds["dataset"] == dataset)]
                                 ["not_converged"].sum())}
    over = {method: {**{m: {"mean": float(r[f"{m}_mean"]), "std": float(r[f"{m}_std"])} for m in METRICS},
                     "rank_g_mean": float(r["rank_g_mean"]), "rank_f_measure": float(r["rank_f_measure"]),
                     "not_converged": int(r["not_converged"])}
            for method, r in overall.iterrows()}
    command, note = command_line(run, directory)
    return {"kind": "hpc_quality", "title": TITLE, "description": DESCRIPTION,
            "command": command, **({"command_note": note} if note else {}), "date": run["started"], "wall_seconds": run["wall_seconds"],
            "machine": run["machine"], "packages": run["packages"], "datasets": datasets,
            "methods": list(overall.index), "per_dataset": {d: results[d] for d in datasets}, "over_datasets": over,
            "n_folds": len(folds)}


def render_markdown(summary: dict) -> list[str]:
    """The tables of an ``"hpc_quality"`` summary (markdown lines), as RESULTS.md and report.md show them."""
    over, per = summary["over_datasets"], summary["per_dataset"]
    caption = (f"Mean over {len(summary['datasets'])} datasets (± standard deviation across datasets), in percent; "
               "methods by average G-mean rank (1 = best); fit time per fold; LIBLINEAR non-convergence warnings "
               "summed over folds.")
    lines = [caption, "",
             "| method | G-mean | F-measure | ROC-AUC | rank G | rank F | fit (s) | LIBLINEAR not converged |",
             "|---|---|---|---|---|---|---|---|"]
    for method in summary["methods"]:
        r = over[method]
        lines.append(f"| {method} | {100 * r['g_mean']['mean']:.1f} ± {100 * r['g_mean']['std']:.1f} "
                     f"| {100 * r['f_measure']['mean']:.1f} ± {100 * r['f_measure']['std']:.1f} "
                     f"| {100 * r['auc']['mean']:.1f} | {r['rank_g_mean']:.2f} | {r['rank_f_measure']:.2f} "
                     f"| {r['fit_time']['mean']:.3f} | {r['not_converged']} |")
    for metric, name in (("g_mean", "G-mean"), ("f_measure", "F-measure")):
        lines += ["", f"{name} per dataset (%, mean over folds):", "",
                  "| method | " + " | ".join(summary["datasets"]) + " |",
                  "|---|" + "---|" * len(summary["datasets"])]
        for method in summary["methods"]:
            cells = [f"{100 * per[d][method][metric]['mean']:.1f}" if method in per[d] else "–"
                     for d in summary["datasets"]]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def write_summary(directory) -> dict:
    """Write ``summary.json`` and ``report.md`` of a results directory from its files; return the summary."""
    directory = Path(directory)
    summary = summary_from_files(directory)
    (directory / "summary.json").write_text(json.dumps(summary, indent=1))
    (directory / "report.md").write_text("\n".join(module_section(summary, render_markdown)) + "\n")
    return summary


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--jobs", type=int, default=1, help="parallel folds (joblib processes)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/hpc-quality"))
    parser.add_argument("--summarize-only", type=Path, metavar="DIR",
                        help="only (re)write DIR/summary.json and DIR/report.md from DIR's folds.csv and run.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.summarize_only:
        write_summary(args.summarize_only)
        print(f"wrote {args.summarize_only / 'summary.json'}")
        return 0
    table = methods()
    chosen = {m: table[m] for m in (args.methods or table)}
    data = {name: load_keel(name) for name in args.datasets}
    start, started = time.perf_counter(), utc_now()
    calls = [delayed(_run_fold)(name, ds.X, ds.y, method, est, seed, fold)
             for name, ds in data.items() for method, est in chosen.items()
             for seed in (0, 1) for fold in range(5)]
    logger.info("%d fold fits on %d datasets x %d methods", len(calls), len(data), len(chosen))
    folds = pd.DataFrame(Parallel(n_jobs=args.jobs)(calls))
    wall = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    folds.to_csv(args.out / "folds.csv", index=False)
    run = {"command": "python -m benchmarks.hpc_quality " + shlex.join(argv), "started": started,
           "wall_seconds": round(wall, 1), "datasets": args.datasets, "methods": list(chosen),
           "machine": machine_info(), "packages": package_versions()}
    (args.out / "run.json").write_text(json.dumps(run, indent=2))
    summary = write_summary(args.out)
    logger.info("wall time %.1f s; results in %s", wall, args.out)
    print("\n".join(render_markdown(summary)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
