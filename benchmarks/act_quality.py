"""ACT replication: ACT_F, ACT_I, CT_I against plain, class-weighted and C-tuned SVC.

Usage (from the repository root)::

    python -m benchmarks.act_quality [--datasets glass6 yeast5 ...] [--methods act svc ...]
        [--n-splits 5] [--seeds 0 1] [--workers 2] [--out DIR]

Protocol (the OTHR issue's): stratified 5-fold CV with shuffling, repeated
with seeds 0 and 1; min-max scaling fitted on each training fold; base
``SVC(kernel="rbf", C=1, gamma="scale")``. Every (dataset, method, seed,
fold) is one Dask task on an embedded ``LocalCluster`` (or ``--scheduler``);
all methods see identical folds (:func:`dimbsvm.evaluation.fold_indices`).
ACT never sees the test fold: it stops on a validation split of the training
fold. For ACT methods the task also records the kept round, the rounds run,
the kernel's growth (mean diagonal of ``K~`` over that of ``K``) at the kept
round and whether LIBSVM hit its iteration bound.

Methods (:data:`METHODS`): ``svc``, ``svc_balanced``; ``svc_tuned_c`` and
``svc_balanced_tuned_c`` (C chosen per training fold by an inner stratified
3-fold CV on G-mean over :data:`C_GRID`: nested CV); ``act`` (ACT_F as
published: eq. 13 sum, cumulative kernel) and ``act_tuned_c`` (its C
tuned the same way); ``act_trace`` (scale-neutral
``D``, the kernel keeps its trace); ``act_mean`` (``D / |SV|``);
``act_feature`` (feature-space distance inside ``D``); ``act_input``
(ACT_I), ``ct`` (CT_I); ``act_othr`` (ACT under the OTHR threshold);
``ensemble_act`` (``EnsembleOTHRClassifier(ACTClassifier())``, 5 stratified
bags of half the fold).

Writes ``folds.csv`` (one row per task) and ``report.md`` (means over folds
per dataset, the mean over datasets) to ``--out``, and logs the table.
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from dimbsvm.datasets import load_keel
from dimbsvm.distributed import cluster_client, run_tasks
from dimbsvm.evaluation import build_pipeline, fold_indices, positive_label
from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier
from dimbsvm.svm.act import ACTClassifier

__all__ = ["C_GRID", "DATASETS", "METHODS", "build_method", "evaluate", "main"]

logger = logging.getLogger(__name__)

#: The issue's four datasets (paper's g7, car3, yeast5, ab19) first, then the OTHR issue's public suite.
DATASETS = ["glass6", "car-good", "yeast5", "abalone19", "ecoli1", "pima", "page-blocks0", "segment0",
            "yeast4", "glass2", "vowel0", "ecoli3", "haberman", "vehicle0", "winequality-red-4",
            "shuttle-c2-vs-c4", "abalone9-18", "yeast6", "wisconsin", "new_thyroid1"]
#: C values of the nested-CV control.
C_GRID = [0.1, 1.0, 10.0, 100.0, 1000.0]
METHODS = ["svc", "svc_balanced", "svc_tuned_c", "svc_balanced_tuned_c", "act", "act_tuned_c", "act_trace",
           "act_mean", "act_feature", "act_input", "ct", "act_othr", "ensemble_act"]
DEFAULT_METHODS = ["svc", "svc_balanced", "svc_tuned_c", "act", "act_trace", "act_mean", "act_input", "ct",
                   "act_othr"]


def build_method(name, seed=0):
    """An unfitted estimator for one method name of :data:`METHODS`."""
    if name in ("svc", "svc_balanced", "svc_tuned_c", "svc_balanced_tuned_c"):
        svc = SVC(kernel="rbf", C=1.0, gamma="scale", class_weight="balanced" if "balanced" in name else None)
        if not name.endswith("tuned_c"):
            return svc
        return GridSearchCV(svc, {"C": C_GRID}, scoring=make_scorer(g_mean),
                            cv=StratifiedKFold(3, shuffle=True, random_state=seed))
    act = {"act": {}, "act_trace": {"conformal_scale": "trace"}, "act_mean": {"conformal_scale": "mean"},
           "act_feature": {"conformal_distance": "feature"}, "act_input": {"variant": "act_input"},
           "ct": {"variant": "ct"}}
    if name in act:
        return ACTClassifier(random_state=seed, **act[name])
    if name == "act_tuned_c":
        return GridSearchCV(ACTClassifier(random_state=seed), {"C": C_GRID}, scoring=make_scorer(g_mean),
                            cv=StratifiedKFold(3, shuffle=True, random_state=seed))
    if name == "act_othr":
        return OTHRClassifier(ACTClassifier(random_state=seed))
    if name == "ensemble_act":
        return EnsembleOTHRClassifier(ACTClassifier(), n_estimators=5, bootstrap="stratified", max_samples=0.5,
                                      random_state=seed)
    raise ValueError(f"unknown method {name!r}; accepted: {', '.join(METHODS)}")


def evaluate(data, *, dataset, method, seed, fold, n_splits):
    """Fit one method on one fold's training rows and score its test rows (a task body)."""
    X, y = data[dataset]
    train, test = fold_indices(y, n_splits=n_splits, seed=seed, fold=fold)
    pos_label = positive_label(y)
    model = build_pipeline(build_method(method, seed), scaler="minmax")
    start = time.perf_counter()
    model.fit(X[train], y[train])
    fit_time = time.perf_counter() - start
    predicted = model.predict(X[test])
    record = {"dataset": dataset, "method": method, "seed": seed, "fold": fold,
              "g_mean": g_mean(y[test], predicted), "f_measure": f_measure(y[test], predicted, pos_label=pos_label),
              "fit_time": fit_time}
    final = model[-1]
    act = getattr(final, "best_estimator_", getattr(final, "estimator_", final))
    if isinstance(act, ACTClassifier):
        kept = act.rounds_[act.best_round_]
        record.update(best_round=act.best_round_, n_rounds=len(act.rounds_) - 1,
                      kernel_scale=kept["kernel_scale"], stop=act.stop_reason_,
                      all_converged=all(r["converged"] for r in act.rounds_))
    if hasattr(final, "best_params_"):
        record["C"] = final.best_params_["C"]
    return record


def _summary(records, methods):
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    table = {}
    for d in datasets:
        for m in methods:
            rows = [r for r in records if r["dataset"] == d and r["method"] == m]
            if rows:
                table[d, m] = {k: float(np.mean([r[k] for r in rows])) for k in ("g_mean", "f_measure", "fit_time")}
                rounds = [r["best_round"] for r in rows if "best_round" in r]
                if rounds:
                    table[d, m]["best_round"] = float(np.mean(rounds))
                    table[d, m]["kernel_scale"] = float(np.median([r["kernel_scale"] for r in rows]))
                    table[d, m]["not_converged"] = sum(not r["all_converged"] for r in rows)
    return datasets, table


def _report(records, methods, command, wall):
    datasets, table = _summary(records, methods)
    lines = [f"# ACT replication\n\ncommand: `{command}`; wall time {wall:.0f} s\n",
             "Mean over folds (5-fold stratified CV, seeds as given), in percent. G-mean / F-measure.\n",
             "| dataset | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for d in datasets:
        cells = [f"{100 * table[d, m]['g_mean']:.1f} / {100 * table[d, m]['f_measure']:.1f}"
                 if (d, m) in table else "" for m in methods]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    means = []
    for m in methods:
        values = [table[d, m] for d in datasets if (d, m) in table]
        means.append(f"**{100 * np.mean([v['g_mean'] for v in values]):.1f} / "
                     f"{100 * np.mean([v['f_measure'] for v in values]):.1f}**")
    lines.append(f"| mean over {len(datasets)} | " + " | ".join(means) + " |")
    act_methods = [m for m in methods if any("best_round" in table.get((d, m), {}) for d in datasets)]
    caption = ("ACT diagnostics per dataset: mean kept round; median kernel growth "
               "(mean diag K~ / mean diag K) at the kept round; folds where LIBSVM hit its bound.")
    lines += ["", caption, "", "| dataset | " + " | ".join(act_methods) + " |"]
    lines.append("|---" * (len(act_methods) + 1) + "|")
    for d in datasets:
        cells = [f"{table[d, m]['best_round']:.1f}, x{table[d, m]['kernel_scale']:.3g}, {table[d, m]['not_converged']}"
                 if "best_round" in table.get((d, m), {}) else "" for m in act_methods]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    fit = [f"{np.mean([table[d, m]['fit_time'] for d in datasets if (d, m) in table]):.2f}" for m in methods]
    lines += ["", "Mean fit time per fold (s): " + ", ".join(f"{m} {t}" for m, t in zip(methods, fit))]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Run the benchmark; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.act_quality", description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS[:4])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=METHODS)
    parser.add_argument("--n-splits", type=int, default=5)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--out", type=Path, default=Path("act-quality"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("dimbsvm.svm.act").setLevel(logging.ERROR)  # per-fold warnings are in folds.csv
    data = {}
    for name in args.datasets:
        ds = load_keel(name)
        data[name] = (np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y))
    calls = [{"dataset": d, "method": m, "seed": s, "fold": f, "n_splits": args.n_splits}
             for d in args.datasets for m in args.methods for s in args.seeds for f in range(args.n_splits)]
    calls.sort(key=lambda c: -len(data[c["dataset"]][1]))  # big tasks first
    start = time.perf_counter()
    with cluster_client(args.scheduler, n_workers=args.workers) as client:
        records = run_tasks(client, evaluate, calls, shared={"data": data}, label="ACT folds")
    wall = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in records for k in r))
    with open(args.out / "folds.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(records)
    command = "python -m benchmarks.act_quality " + " ".join(argv if argv is not None else sys.argv[1:])
    report = _report(records, args.methods, command, wall)
    (args.out / "report.md").write_text(report)
    logger.info("%s", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
