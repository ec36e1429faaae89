"""HPC-SVM on public KEEL imbalanced data: plain, class-weighted and with the OTHR threshold.

Protocol (that of ``benchmarks/keel-public.yaml``): stratified 5-fold CV
repeated with seeds 0 and 1, ``MinMaxScaler`` fitted on each training fold,
every method on identical folds (:func:`dimbsvm.evaluation.evaluate_fold`).
No parameter is tuned: every SVM has ``C=1``; the RBF width is
``gamma="scale"`` for ``SVC`` and HPC alike; HPC keeps its defaults
(``c1=1``, ``n_neighbors=5``, ``gamma=1``, ``eps=1e-6``). The hinge-loss
``LinearSVC`` rows are HPC with ``c1=0`` up to the bias penalty, so
``hpc_linear`` against ``linear_svc`` isolates the hypergraph term, and
``hpc_rbf`` against ``svc`` likewise (up to the bias, which ``SVC`` leaves
free).

Usage (from the repository root)::

    python -m benchmarks.hpc_quality                      # 10 datasets, all methods
    python -m benchmarks.hpc_quality --datasets glass6 pima --jobs 2 --out DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC, LinearSVC

from benchmarks.environment import machine_info, package_versions, utc_now
from dimbsvm.datasets import load_keel
from dimbsvm.evaluation import evaluate_fold, positive_label
from dimbsvm.svm.hpc import HPCClassifier

logger = logging.getLogger(__name__)

DATASETS = ["glass6", "ecoli1", "pima", "glass2", "haberman", "vehicle0", "abalone9-18",
            "new_thyroid1", "wisconsin", "yeast5"]
METRICS = ("g_mean", "f_measure", "auc", "fit_time")


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
        record = evaluate_fold(X, y, estimator=estimator, n_splits=5, seed=seed, fold=fold,
                               metrics=METRICS, pos_label=positive_label(y))
    record.update(dataset=dataset, method=method,
                  not_converged=sum(issubclass(w.category, ConvergenceWarning) for w in caught))
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


def markdown(per_dataset: pd.DataFrame, overall: pd.DataFrame) -> str:
    lines = ["| method | G-mean | F-measure | ROC-AUC | rank G | rank F | fit (s) | LIBLINEAR not converged |",
             "|---|---|---|---|---|---|---|---|"]
    for method, r in overall.iterrows():
        lines.append(f"| {method} | {100 * r.g_mean_mean:.1f} ± {100 * r.g_mean_std:.1f} "
                     f"| {100 * r.f_measure_mean:.1f} ± {100 * r.f_measure_std:.1f} "
                     f"| {100 * r.auc_mean:.1f} | {r.rank_g_mean:.2f} | {r.rank_f_measure:.2f} "
                     f"| {r.fit_time_mean:.3f} | {int(r.not_converged)} |")
    lines += ["", "G-mean per dataset (%):", ""]
    g = (100 * per_dataset["g_mean"].unstack("dataset")).round(1).loc[overall.index]
    lines.append("| method | " + " | ".join(g.columns) + " |")
    lines.append("|---|" + "---|" * len(g.columns))
    for method, r in g.iterrows():
        lines.append(f"| {method} | " + " | ".join(f"{v:.1f}" for v in r) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--jobs", type=int, default=1, help="parallel folds (joblib processes)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/hpc-quality"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
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
    per_dataset, overall = summarise(folds)
    args.out.mkdir(parents=True, exist_ok=True)
    folds.to_csv(args.out / "folds.csv", index=False)
    report = markdown(per_dataset, overall)
    run = {"started": started, "wall_seconds": round(wall, 1), "datasets": args.datasets,
           "methods": list(chosen), "machine": machine_info(), "packages": package_versions()}
    (args.out / "run.json").write_text(json.dumps(run, indent=2))
    (args.out / "report.md").write_text(report + "\n")
    logger.info("wall time %.1f s; results in %s", wall, args.out)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
