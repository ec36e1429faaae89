"""Structural-similarity features against their baselines: the paper's table, then imbalanced data.

Two parts, each a set of (dataset, method, repeat, fold) tasks on an embedded
``LocalCluster`` (2 workers by default). Folds are
:func:`dimbsvm.model_selection.splits.fold_indices` (stratified 5-fold, shuffled with
seeds 0, 1, ...), the same folds the quality suite uses; min-max scaling is
fitted on each training fold; every linear SVM is ``LinearSVC(C=1)`` and
every RBF SVM ``SVC(C=1, gamma="scale")`` (no per-dataset C search, unlike
the paper, which grid-searched C and gamma by 5-fold CV).

``paper``
    satimage, splice and vowel from ``../shared/datasets/keel/multiclass``
    (the paper's datasets that we have; splice's nucleotides one-hot
    encoded), linear SVMs one-vs-rest (``OneVsRestClassifier``), as the
    paper's LIBLINEAR runs: ``lin``, ``lin+str`` (lambda 1; the paper's
    "rbf+lin": its kNN graph uses Euclidean distance, which ranks
    neighbours as the RBF kernel does), ``hik`` (``HIKEncoder(100)``),
    ``hik+str`` (lambda 10; the paper's "rbf+hik"), ``rbf`` and
    ``rbf_balanced`` (``class_weight="balanced"``). k = 10. Accuracy,
    a-mean and g-mean over all classes.
``imbalanced``
    Binary sets: by default the 20 public KEEL sets of the OTHR issue
    (``benchmarks/keel-public.yaml``); ``--datasets`` adds e.g. ``magic``,
    ``letter`` (class 0 against the rest), ``sylva`` and ``synthetic``
    (``make_imbalanced(20000, 32, minority_fraction=0.05)``).
    ``LinearSVC(class_weight="balanced")`` and ``OTHRClassifier(LinearSVC())``
    without and with structural features over a grid of lambda, k and the
    normalisation of n(x); the training-fold G-mean is recorded beside the
    test G-mean to show over-fitting.

Usage (from the repository root)::

    python -m benchmarks.structural_quality paper --datasets satimage
    python -m benchmarks.structural_quality imbalanced --repeats 2
    python -m benchmarks.structural_quality imbalanced --datasets magic letter sylva synthetic \\
        --methods lin_bal lin_bal+str_l1 lin_bal+str_l0.3 othr_cv+str_l0.3

Writes ``folds.csv``, ``report.md`` and ``summary.json`` (kind
``"structural_quality"``, read by ``python -m benchmarks.results``;
:func:`summarize`, :func:`render_markdown`) to ``--out`` (default
``benchmarks/results/structural-<part>``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC

from dimbsvm import HIKEncoder, OTHRClassifier, StructuralFeatures
from dimbsvm.model_selection.splits import fold_indices, minority_class
from dimbsvm.metrics import a_mean, f_measure, g_mean

logger = logging.getLogger("benchmarks.structural_quality")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
PAPER_DATASETS = ("satimage", "splice", "vowel")
KEEL_PUBLIC = ("glass6", "yeast5", "abalone19", "car-good", "ecoli1", "pima", "page-blocks0", "segment0", "yeast4",
               "glass2", "vowel0", "ecoli3", "haberman", "vehicle0", "winequality-red-4", "shuttle-c2-vs-c4",
               "abalone9-18", "yeast6", "wisconsin", "new_thyroid1")


def _str(weight, k=10, normalize="none", base="linear"):
    return StructuralFeatures(n_neighbors=k, weight=weight, normalize=normalize, base=base, method="exact")


def _ovr(estimator, multiclass):
    return OneVsRestClassifier(estimator) if multiclass else estimator


# name -> (feature stages, classifier factory taking `multiclass`)
PAPER_METHODS = {
    "lin": (list, lambda mc: _ovr(LinearSVC(C=1.0), mc)),
    "lin+str": (lambda: [_str(1.0)], lambda mc: _ovr(LinearSVC(C=1.0), mc)),
    "hik": (lambda: [HIKEncoder(100)], lambda mc: _ovr(LinearSVC(C=1.0), mc)),
    "hik+str": (lambda: [_str(10.0, base="hik")], lambda mc: _ovr(LinearSVC(C=1.0), mc)),
    "rbf": (list, lambda mc: SVC(C=1.0, gamma="scale")),
    "rbf_balanced": (list, lambda mc: SVC(C=1.0, gamma="scale", class_weight="balanced")),
}


def _lin_bal(mc):
    return LinearSVC(C=1.0, class_weight="balanced")


def _othr(margins):
    return lambda mc: OTHRClassifier(estimator=LinearSVC(C=1.0), margins=margins, knn_method="exact")


IMBALANCED_METHODS = {
    "lin_bal": (list, _lin_bal),
    "lin_bal+str_l1": (lambda: [_str(1.0)], _lin_bal),
    "lin_bal+str_l0.3": (lambda: [_str(0.3)], _lin_bal),
    "lin_bal+str_l0.1": (lambda: [_str(0.1)], _lin_bal),
    "lin_bal+str_l0.3_k30": (lambda: [_str(0.3, k=30)], _lin_bal),
    "lin_bal+str_l1_degree": (lambda: [_str(1.0, normalize="degree")], _lin_bal),
    "lin_bal+str_l0.3_degree": (lambda: [_str(0.3, normalize="degree")], _lin_bal),
    "othr": (list, _othr("train")),
    "othr+str_l1": (lambda: [_str(1.0)], _othr("train")),
    "othr+str_l0.3": (lambda: [_str(0.3)], _othr("train")),
    "othr_cv": (list, _othr("cv")),
    "othr_cv+str_l0.3": (lambda: [_str(0.3)], _othr("cv")),
    "hik_bal": (lambda: [HIKEncoder(100)], _lin_bal),
    "hik_bal+str_l10": (lambda: [_str(10.0, base="hik")], _lin_bal),
    "hik_bal+str_l3": (lambda: [_str(3.0, base="hik")], _lin_bal),
}


def load_dataset(name):
    """``(X, y)`` of a dataset by name: KEEL imbalanced/multiclass, sylva, magic, letter or synthetic."""
    from dimbsvm.datasets import load, load_csv, make_imbalanced

    if name == "synthetic":
        X, y = make_imbalanced(20_000, 32, minority_fraction=0.05, random_state=0)
        return np.asarray(X.compute(), dtype=np.float64), np.asarray(y.compute(), dtype=np.int64)
    if name == "sylva":
        data = load(SHARED / "agnostic" / "sylva")
        return data.X, data.y
    csv = SHARED / "keel" / "multiclass" / f"{name}.csv"
    if csv.exists():
        data = load_csv(csv)
        y = data.y
        if name == "letter":  # 26 balanced classes: one letter against the rest (about 1:25)
            y = (y == 0).astype(np.int64)
        return data.X, y
    data = load(name)
    return data.X, data.y


def evaluate(X, y, *, part, method, seed, fold, n_splits):
    """Task body: one method on one fold; returns a flat record."""
    table = PAPER_METHODS if part == "paper" else IMBALANCED_METHODS
    make_features, make_classifier = table[method]
    train, test = fold_indices(y, n_splits=n_splits, seed=seed, fold=fold)
    multiclass = len(np.unique(y)) > 2
    model = make_pipeline(MinMaxScaler(), *make_features(), make_classifier(multiclass))
    tic = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X[train], y[train])
    fit_time = time.perf_counter() - tic
    y_pred = model.predict(X[test])
    record = {"method": method, "seed": seed, "fold": fold, "fit_time": fit_time,
              "accuracy": float(np.mean(y_pred == y[test])), "a_mean": a_mean(y[test], y_pred),
              "g_mean": g_mean(y[test], y_pred),
              "not_converged": sum(issubclass(w.category, ConvergenceWarning) for w in caught)}
    if not multiclass:
        pos = minority_class(y)
        record["f_measure"] = f_measure(y[test], y_pred, pos_label=pos)
        scores = model.decision_function(X[test])
        record["auc"] = float(roc_auc_score(y[test] == pos, scores if pos == model.classes_[1] else -scores))
        # The training rows as the model saw them (StructuralFeatures recognises its training matrix).
        record["train_g_mean"] = g_mean(y[train], model.predict(X[train]))
        if isinstance(model[-1], OTHRClassifier):
            record["threshold"] = float(model[-1].threshold_)
            record["candidates"] = len(model[-1].candidates_["theta"])
    return record


def run(args):
    from dimbsvm.distributed import cluster_client
    from dimbsvm.parallel import map_tasks

    table = PAPER_METHODS if args.part == "paper" else IMBALANCED_METHODS
    methods = args.methods or list(table)
    unknown = sorted(set(methods) - set(table))
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; accepted: {', '.join(table)}")
    datasets = args.datasets or (PAPER_DATASETS if args.part == "paper" else KEEL_PUBLIC)
    seeds = list(range(args.repeats))
    records = []
    tic = time.perf_counter()
    started = _utc_now()
    with cluster_client(n_workers=args.workers) as client:
        for name in datasets:
            X, y = load_dataset(name)
            calls = [dict(part=args.part, method=m, seed=s, fold=f, n_splits=args.folds)
                     for m in methods for s in seeds for f in range(args.folds)]
            start = time.perf_counter()
            results = map_tasks(evaluate, calls, client=client, shared=dict(X=X, y=y), progress=False,
                                label=f"{name} folds")
            for record in results:
                record.update(dataset=name, n_samples=len(y), n_features=X.shape[1],
                              n_minority=int(np.min(np.unique(y, return_counts=True)[1])))
            records.extend(results)
            logger.info("%s (%d x %d): %d tasks in %.0f s", name, *X.shape, len(calls), time.perf_counter() - start)
    frame = pd.DataFrame(records)
    out = Path(args.out or f"benchmarks/results/structural-{args.part}")
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "folds.csv", index=False)
    wall = time.perf_counter() - tic
    report = _report(frame, args, wall)
    (out / "report.md").write_text(report)
    from dimbsvm.environment import machine_info, package_versions

    summary = summarize(frame, part=args.part, command="python -m benchmarks.structural_quality "
                        + shlex.join(args.argv), date=started, wall_seconds=round(wall, 1), machine=machine_info(),
                        packages=package_versions(),
                        protocol={"n_splits": args.folds, "seeds": seeds, "workers": args.workers})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    logger.info("\n%s", report)


def _report(frame, args, seconds):
    metrics = [m for m in ("accuracy", "a_mean", "g_mean", "f_measure", "auc", "train_g_mean", "fit_time")
               if m in frame]
    lines = [f"# structural features: {args.part}", "",
             f"Command: `python -m benchmarks.structural_quality {' '.join(args.argv)}`", "",
             (f"{args.folds}-fold stratified CV x {args.repeats} repeat(s); {seconds:.0f} s wall; "
              f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores."), "",
             "## Mean over datasets (percent; fit_time in s)", ""]
    per_dataset = frame.groupby(["dataset", "method"], sort=False)[metrics].mean()
    overall = per_dataset.groupby("method", sort=False).mean()
    lines.append(_markdown((overall * [100 if m != "fit_time" else 1 for m in metrics]).round(1)))
    lines += ["", "## Per dataset (mean +- std over folds, percent)", ""]
    for metric in [m for m in ("accuracy", "a_mean", "g_mean", "f_measure", "train_g_mean") if m in frame]:
        grouped = frame.groupby(["dataset", "method"], sort=False)[metric]
        cell = (100 * grouped.mean()).round(1).astype(str) + " +- " + (100 * grouped.std()).round(1).astype(str)
        lines += [f"### {metric}", "", _markdown(cell.unstack("method")), ""]
    if "not_converged" in frame and frame["not_converged"].sum():
        lines.append(f"LinearSVC convergence warnings: {int(frame['not_converged'].sum())} fits "
                     f"({', '.join(sorted(frame.loc[frame['not_converged'] > 0, 'method'].unique()))}).")
    return "\n".join(lines) + "\n"


METRICS = ("accuracy", "a_mean", "g_mean", "f_measure", "auc", "train_g_mean", "fit_time")
LABELS = {"accuracy": "accuracy", "a_mean": "a-mean", "g_mean": "G-mean", "f_measure": "F-measure", "auc": "ROC-AUC",
          "train_g_mean": "training G-mean", "fit_time": "fit (s)"}


def _utc_now():
    from dimbsvm.environment import utc_now

    return utc_now()


def summarize(frame, *, part, **header) -> dict:
    """The ``summary.json`` (kind ``"structural_quality"``) of a run from its per-fold table.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (dataset, method, seed, fold), as ``folds.csv``.
    part : {"paper", "imbalanced"}
    **header
        ``command``, ``date``, ``wall_seconds``, ``machine``, ``packages``,
        ``protocol``: stored as given.

    Returns
    -------
    dict
        ``per_dataset[dataset][method][metric]`` with the mean and standard
        deviation over folds (``ddof=1``), ``over_datasets[method][metric]``
        with the mean and standard deviation across datasets of the
        per-dataset means, ``dataset_info`` (rows, features, smallest class)
        and the LinearSVC convergence warnings per method.
    """
    metrics = [m for m in METRICS if m in frame]
    datasets = list(dict.fromkeys(frame["dataset"]))
    methods = list(dict.fromkeys(frame["method"]))
    grouped = frame.groupby(["dataset", "method"], sort=False)[metrics]
    means, stds, counts = grouped.mean(), grouped.std(ddof=1), grouped.size()
    per_dataset = {d: {m: {**{k: {"mean": float(means.loc[(d, m), k]), "std": float(stds.loc[(d, m), k])}
                              for k in metrics}, "n_folds": int(counts.loc[(d, m)])}
                       for m in methods if (d, m) in means.index} for d in datasets}
    over = means.groupby("method", sort=False).agg(["mean", "std"])
    over_datasets = {m: {k: {"mean": float(over.loc[m, (k, "mean")]), "std": float(over.loc[m, (k, "std")])}
                         for k in metrics} for m in methods}
    info = frame.groupby("dataset", sort=False)[["n_samples", "n_features", "n_minority"]].first()
    not_converged = frame.groupby("method", sort=False)["not_converged"].sum() if "not_converged" in frame else {}
    return {"kind": "structural_quality", "title": f"Structural-similarity features: {part}",
            "description": __doc__.split("\n\n")[1].replace("\n", " "), "part": part, **header,
            "datasets": datasets, "methods": methods, "metrics": metrics,
            "dataset_info": {d: {k: int(v) for k, v in row.items()} for d, row in info.iterrows()},
            "per_dataset": per_dataset, "over_datasets": over_datasets,
            "not_converged": {m: int(not_converged[m]) for m in methods} if len(not_converged) else {}}


def render_markdown(summary: dict) -> list[str]:
    """The tables of a ``"structural_quality"`` summary (markdown lines), as RESULTS.md shows them."""
    metrics, methods, datasets = summary["metrics"], summary["methods"], summary["datasets"]
    over, per = summary["over_datasets"], summary["per_dataset"]

    def cell(stats, metric):
        if metric == "fit_time":
            return f"{stats['mean']:.2f}"
        return f"{100 * stats['mean']:.1f}" + (f" ± {100 * stats['std']:.1f}" if stats["std"] == stats["std"] else "")

    lines = [f"Mean over {len(datasets)} dataset(s) (± standard deviation across datasets), in percent:", "",
             "| method | " + " | ".join(LABELS[m] for m in metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
    lines += [f"| {m} | " + " | ".join(cell(over[m][k], k) for k in metrics) + " |" for m in methods]
    for metric in [m for m in ("accuracy", "g_mean", "f_measure") if m in metrics]:
        lines += ["", f"{LABELS[metric]} per dataset (mean ± standard deviation over folds, %):", "",
                  "| dataset | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
        lines += [f"| {d} | " + " | ".join(cell(per[d][m][metric], metric) if m in per[d] else "–" for m in methods)
                  + " |" for d in datasets]
    if any(summary.get("not_converged", {}).values()):
        lines += ["", "LinearSVC convergence warnings (fits): " + ", ".join(
            f"{m} {n}" for m, n in summary["not_converged"].items() if n) + "."]
    return lines


def _markdown(frame):
    frame = frame.reset_index() if frame.index.name or frame.index.names[0] else frame
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["paper", "imbalanced"])
    parser.add_argument("--datasets", nargs="+")
    parser.add_argument("--methods", nargs="+")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("distributed", "tornado", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    run(args)


if __name__ == "__main__":
    main()
