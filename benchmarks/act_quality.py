"""ACT replication: ACT_F, ACT_I, CT_I against plain, class-weighted and C-tuned SVC.

Usage (from the repository root)::

    python -m benchmarks.act_quality [--datasets glass6 yeast5 ...] [--methods act svc ...]
        [--n-splits 5] [--seeds 0 1] [--workers 2] [--out DIR]
    python -m benchmarks.act_quality --summarize-only DIR   # summary.json again from DIR/folds.csv

Protocol (the OTHR issue's): stratified 5-fold CV with shuffling, repeated
with seeds 0 and 1; min-max scaling fitted on each training fold; base
``SVC(kernel="rbf", C=1, gamma="scale")``. Every (dataset, method, seed,
fold) is one Dask task on an embedded ``LocalCluster`` (or ``--scheduler``);
all methods see identical folds (:func:`dimbsvm.model_selection.splits.fold_indices`).
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

Writes ``folds.csv`` (one row per task), ``summary.json`` (kind
``"act_quality"``: command, date, machine, packages, per-dataset means and
standard deviations over folds, means over datasets; :func:`summarize`) and
``report.md`` (the RESULTS.md section, :func:`render_markdown`) to ``--out``,
and logs the table. ``python -m benchmarks.results DIR`` puts the section in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from dimbsvm.datasets import load_keel
from dimbsvm.distributed import cluster_client
from dimbsvm.parallel import map_tasks
from dimbsvm.model_selection.pipeline import build_pipeline
from dimbsvm.model_selection.splits import fold_indices, minority_class
from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier
from dimbsvm.svm.act import ACTClassifier

from dimbsvm.environment import machine_info, package_versions, utc_now
from .results import module_section

__all__ = ["C_GRID", "DATASETS", "METHODS", "build_method", "evaluate", "main", "read_folds", "render_markdown",
           "resummarize", "summarize"]

logger = logging.getLogger(__name__)

#: The issue's four datasets (paper's g7, car3, yeast5, ab19) first, then the OTHR issue's public suite.
DATASETS = ["glass6", "car-good", "yeast5", "abalone19", "ecoli1", "pima", "page-blocks0", "segment0",
            "yeast4", "glass2", "vowel0", "ecoli3", "haberman", "vehicle0", "winequality-red-4",
            "shuttle-c2-vs-c4", "abalone9-18", "yeast6", "wisconsin", "new_thyroid1"]
#: C values of the nested-CV control.
C_GRID = [0.1, 1.0, 10.0, 100.0, 1000.0]
METHODS = ["svc", "svc_balanced", "svc_tuned_c", "svc_balanced_tuned_c", "act", "act_tuned_c", "act_trace",
           "act_mean", "act_feature", "act_input", "ct", "act_othr", "ensemble_act"]
#: The methods the ACT issue asks for: ACT_F, ACT_I, CT_I, plain, class-weighted and C-tuned SVC,
#: scale-neutral ACT (trace and mean) and ACT under the OTHR threshold.
DEFAULT_METHODS = ["svc", "svc_balanced", "svc_tuned_c", "act", "act_trace", "act_mean", "act_input", "ct",
                   "act_othr"]


TITLE = "ACT on {n} KEEL datasets: ACT_F, ACT_I, CT_I against plain, class-weighted and C-tuned SVC"
#: Types of the fold records' fields, to read ``folds.csv`` back (:func:`read_folds`).
FIELD_TYPES = {"seed": int, "fold": int, "g_mean": float, "f_measure": float, "fit_time": float, "best_round": int,
               "n_rounds": int, "kernel_scale": float, "C": float, "all_converged": lambda v: v == "True"}
DESCRIPTION = ("ACT_F as published (`act`), its scale-neutral variants (`act_trace`: the kernel keeps its "
               "trace; `act_mean`: D / |SV|), ACT_I (`act_input`), CT_I (`ct`) and ACT under the OTHR "
               "threshold (`act_othr`), against SVC, class-weighted SVC and SVC with C chosen by nested CV "
               "(`*_tuned_c`). ACT stops on a validation split of the training fold, never on the test fold.")


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
    pos_label = minority_class(y)
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


def _stats(values) -> dict:
    """Mean and sample standard deviation (``ddof=1``; NaN for one value) of a list of numbers."""
    values = np.asarray(values, dtype=float)
    std = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
    return {"mean": float(np.mean(values)), "std": std}


def summarize(records, *, datasets, methods, dataset_info=None, **header) -> dict:
    """The ``summary.json`` of a run (kind ``"act_quality"``) from its fold records.

    Parameters
    ----------
    records : list of dict
        One :func:`evaluate` result per (dataset, method, seed, fold).
    datasets, methods : list of str
        Row and column order of the tables.
    dataset_info : dict, optional
        ``{dataset: {"n_samples", "n_features", "n_minority"}}``.
    **header
        ``command``, ``date``, ``finished``, ``wall_seconds``, ``machine``,
        ``packages``, ``protocol``: stored as given.

    Returns
    -------
    dict
        ``results[dataset][method]`` holds ``n_folds`` and mean/std over folds
        of ``g_mean``, ``f_measure`` and ``fit_time``; for ACT methods also the
        kept and run rounds (mean/std), the kernel growth at the kept round
        (median, min, max), the folds where LIBSVM hit its bound
        (``not_converged``) and the stop reasons (counts); for C-tuned methods
        the chosen C (counts). ``over_datasets[method]`` holds the mean and
        the standard deviation across datasets of the per-dataset means.
    """
    results = {}
    for d in datasets:
        for m in methods:
            rows = [r for r in records if r["dataset"] == d and r["method"] == m]
            if not rows:
                continue
            entry = {"n_folds": len(rows)}
            entry.update({k: _stats([r[k] for r in rows]) for k in ("g_mean", "f_measure", "fit_time")})
            act = [r for r in rows if "best_round" in r]
            if act:
                scale = [r["kernel_scale"] for r in act]
                entry.update(best_round=_stats([r["best_round"] for r in act]),
                             n_rounds=_stats([r["n_rounds"] for r in act]),
                             kernel_scale={"median": float(np.median(scale)), "min": float(np.min(scale)),
                                           "max": float(np.max(scale))},
                             not_converged=sum(not r["all_converged"] for r in act),
                             stop=dict(Counter(str(r["stop"]) for r in act)))
            if any("C" in r for r in rows):
                entry["C"] = dict(Counter(repr(float(r["C"])) for r in rows if "C" in r))
            results.setdefault(d, {})[m] = entry
    over = {}
    for m in methods:
        present = [results[d][m] for d in results if m in results[d]]
        if present:
            over[m] = {k: _stats([e[k]["mean"] for e in present]) for k in ("g_mean", "f_measure", "fit_time")}
            over[m]["n_datasets"] = len(present)
    shown = [d for d in datasets if d in results]
    return {"kind": "act_quality", "title": TITLE.format(n=len(shown)), "description": DESCRIPTION, **header,
            "datasets": shown, "methods": list(methods),
            "dataset_info": dataset_info or {}, "results": results, "over_datasets": over}


def read_folds(path) -> list[dict]:
    """The fold records of a ``folds.csv`` written by :func:`main`, with their types restored."""
    with open(path, newline="") as handle:
        return [{k: FIELD_TYPES.get(k, str)(v) for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]


def resummarize(directory) -> dict:
    """Rewrite ``summary.json`` and ``report.md`` of a results directory from its ``folds.csv``.

    The run's header (command, dates, machine, packages, protocol, dataset
    sizes, dataset and method order) is taken from the existing
    ``summary.json``; every number is recomputed from ``folds.csv``.
    """
    directory = Path(directory)
    old = json.loads((directory / "summary.json").read_text())
    header = {k: old[k] for k in ("command", "date", "finished", "wall_seconds", "machine", "packages", "protocol")
              if k in old}
    summary = summarize(read_folds(directory / "folds.csv"), datasets=old["datasets"], methods=old["methods"],
                        dataset_info=old.get("dataset_info"), **header)
    _write(directory, summary)
    return summary


def _write(directory: Path, summary: dict) -> str:
    (directory / "summary.json").write_text(json.dumps(summary, indent=1))
    report = "\n".join(module_section(summary, render_markdown)) + "\n"
    (directory / "report.md").write_text(report)
    return report


def _pct(stats) -> str:
    if stats["std"] != stats["std"]:  # NaN: a single fold or dataset
        return f"{100 * stats['mean']:.1f}"
    return f"{100 * stats['mean']:.1f} ± {100 * stats['std']:.1f}"


def render_markdown(summary: dict) -> list[str]:
    """The tables of an ``"act_quality"`` summary (markdown lines), as RESULTS.md and report.md show them.

    G-mean and F-measure per dataset (mean ± standard deviation over folds, in
    percent) and their mean over datasets (± standard deviation across
    datasets); ACT diagnostics; the C chosen by the nested-CV controls; fit
    times.
    """
    datasets, methods, results = summary["datasets"], summary["methods"], summary["results"]
    protocol = summary.get("protocol", {})
    info = summary.get("dataset_info", {})
    caption = (f"Stratified {protocol.get('n_splits', '?')}-fold CV with shuffling, seeds "
               f"{protocol.get('seeds', '?')} ({protocol.get('scaler', 'minmax')} scaling fitted per training fold; "
               f"base {protocol.get('base', 'SVC')}). Per dataset: mean ± standard deviation over folds, in percent; "
               "the last row is the mean over datasets ± the standard deviation across datasets.")
    lines = [caption, ""]
    header = "| dataset | " + " | ".join(methods) + " |"
    rule = "|---" * (len(methods) + 1) + "|"

    def label(d):
        i = info.get(d)
        return f"{d} ({i['n_minority']}/{i['n_samples']})" if i else d

    for metric, name in (("g_mean", "G-mean"), ("f_measure", "F-measure")):
        lines += [f"{name}:", "", header, rule]
        for d in datasets:
            cells = [_pct(results[d][m][metric]) if m in results[d] else "–" for m in methods]
            lines.append(f"| {label(d)} | " + " | ".join(cells) + " |")
        over = summary["over_datasets"]
        cells = [f"**{_pct(over[m][metric])}**" if m in over else "–" for m in methods]
        lines += [f"| mean over {len(datasets)} | " + " | ".join(cells) + " |", ""]
    if info:
        lines += ["Datasets are labelled (minority / all rows).", ""]
    act_methods = [m for m in methods if any("best_round" in results[d].get(m, {}) for d in datasets)]
    if act_methods:
        caption = ("ACT diagnostics per dataset: mean kept round / mean rounds run; median kernel growth "
                   "(mean diag K~ / mean diag K) at the kept round; folds where LIBSVM hit its iteration bound.")
        lines += [caption, "", "| dataset | " + " | ".join(act_methods) + " |", "|---" * (len(act_methods) + 1) + "|"]
        for d in datasets:
            cells = []
            for m in act_methods:
                e = results[d].get(m, {})
                cells.append(f"{e['best_round']['mean']:.1f} / {e['n_rounds']['mean']:.1f}, "
                             f"x{e['kernel_scale']['median']:.3g}, {e['not_converged']}" if "best_round" in e else "–")
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
        lines.append("")
    tuned = [m for m in methods if any("C" in results[d].get(m, {}) for d in datasets)]
    if tuned:
        lines += ["C chosen by the inner 3-fold CV on G-mean (value: folds):", "",
                  "| dataset | " + " | ".join(tuned) + " |", "|---" * (len(tuned) + 1) + "|"]
        for d in datasets:
            cells = [", ".join(f"{c}: {n}" for c, n in sorted(results[d][m]["C"].items(), key=lambda x: float(x[0])))
                     if "C" in results[d].get(m, {}) else "–" for m in tuned]
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
        lines.append("")
    over = summary["over_datasets"]
    lines.append("Mean fit time per fold (s), averaged over datasets: "
                 + ", ".join(f"{m} {over[m]['fit_time']['mean']:.2f}" for m in methods if m in over) + ".")
    return lines


def main(argv=None):
    """Run the benchmark; see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.act_quality", description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS[:4])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=METHODS)
    parser.add_argument("--n-splits", type=int, default=5)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--out", type=Path, default=Path("act-quality"))
    parser.add_argument("--summarize-only", type=Path, metavar="DIR",
                        help="only rewrite DIR/summary.json and DIR/report.md from DIR/folds.csv and the run "
                             "header in DIR/summary.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.summarize_only:
        resummarize(args.summarize_only)
        print(f"wrote {args.summarize_only / 'summary.json'}")
        return 0
    logging.getLogger("dimbsvm.svm.act").setLevel(logging.ERROR)  # per-fold warnings are in folds.csv
    data, info = {}, {}
    for name in args.datasets:
        ds = load_keel(name)
        X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
        data[name] = (X, y)
        info[name] = {"n_samples": len(y), "n_features": int(X.shape[1]),
                      "n_minority": int(np.sum(y == minority_class(y)))}
    calls = [{"dataset": d, "method": m, "seed": s, "fold": f, "n_splits": args.n_splits}
             for d in args.datasets for m in args.methods for s in args.seeds for f in range(args.n_splits)]
    calls.sort(key=lambda c: -len(data[c["dataset"]][1]))  # big tasks first
    start, started = time.perf_counter(), utc_now()
    with cluster_client(args.scheduler, n_workers=args.workers) as client:
        records = map_tasks(evaluate, calls, client=client, shared={"data": data}, progress=True, label="ACT folds")
    wall = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in records for k in r))
    with open(args.out / "folds.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(records)
    protocol = {"n_splits": args.n_splits, "seeds": list(args.seeds), "scaler": "minmax",
                "base": 'SVC(kernel="rbf", C=1, gamma="scale")', "c_grid": C_GRID,
                "workers": args.workers, "scheduler": args.scheduler or "embedded LocalCluster"}
    summary = summarize(records, datasets=args.datasets, methods=args.methods, dataset_info=info,
                        command="python -m benchmarks.act_quality " + shlex.join(argv), date=started,
                        finished=utc_now(), wall_seconds=round(wall, 1), machine=machine_info(),
                        packages=package_versions(), protocol=protocol)
    logger.info("%s", _write(args.out, summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
