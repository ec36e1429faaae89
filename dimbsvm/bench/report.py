"""The results directory of a quality run.

Files written (into a hidden ``.partial`` directory first, renamed into place
when complete, so an interrupted run never leaves a directory that looks done):

``folds.csv``
    The raw per-fold table: dataset, method, seed, fold, n_train, n_test,
    every metric (fit_time and predict_time in seconds).
``report.md``
    Header (command, date, machine, versions, protocol), the mean over
    datasets with average ranks, Friedman and Holm-Wilcoxon tests against the
    best peer, per-dataset tables, the figures.
``summary.json``
    Everything in ``report.md`` in machine-readable form (read by
    :mod:`benchmarks.results`).
``cd_<metric>.png``, ``<metric>_by_dataset.png``
    Critical-difference diagrams and per-dataset bars.

Quality metrics are shown in percent, as the literature's tables are.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import pandas as pd

from . import stats
from ..environment import machine_info, package_versions, utc_now
from .plots import LABELS, critical_difference_plot, dataset_bars
from ..model_selection.scoring import TIME_METRICS
from .suite import SUITE_METRICS

__all__ = ["write_results", "analyse", "render_report", "header_lines", "mean_table", "table_notes",
           "significance_lines", "summary_lines", "rewrite_results", "method_description", "methods_legend"]

logger = logging.getLogger(__name__)

#: Metrics the report ranks and tests (Friedman, Wilcoxon against the best peer).
TESTED = ("g_mean", "f_measure", "auc")
#: Metrics with rank columns in the tables, critical-difference diagrams and per-dataset bars:
#: the two columns of the literature's tables.
RANKED = ("g_mean", "f_measure")


def write_results(out, suite: dict, records: list, run: dict) -> dict:
    """Write the results directory ``out`` (replacing an earlier one) and return the summary.

    Parameters
    ----------
    out : path-like
    suite : dict
        The validated suite.
    records : list of dict
        Per-fold records from :func:`dimbsvm.bench.quality.run_suite`.
    run : dict
        ``command``, ``started``, ``finished``, ``wall_time_s``, ``cluster``,
        ``datasets`` (name -> source and shape), ``machine`` and ``versions``
        of the run (the last two default to this machine's).
    """
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    try:
        folds, summary = analyse(suite, records, run)
        folds.to_csv(partial / "folds.csv", index=False, float_format="%.10g")
        summary["figures"] = _write_figures(partial, folds, summary)
        (partial / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
        (partial / "report.md").write_text(render_report(summary))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if out.exists():
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        partial.rename(out)
        shutil.rmtree(old)
    else:
        partial.rename(out)
    logger.info("results written to %s", out)
    return summary


def analyse(suite: dict, records: list, run: dict) -> tuple[pd.DataFrame, dict]:
    """The per-fold table and the summary (tables, ranks, tests) of a run."""
    metrics = list(suite["metrics"])
    datasets = list(run["datasets"])
    methods = [m["name"] for m in suite["methods"]]
    folds = stats.fold_table(records, metrics)
    order = {"dataset": datasets, "method": methods}
    for column, values in order.items():
        folds[column] = pd.Categorical(folds[column], categories=values, ordered=True)
    folds = folds.sort_values(["dataset", "method", "seed", "fold"]).reset_index(drop=True)
    folds[["dataset", "method"]] = folds[["dataset", "method"]].astype(str)

    per_dataset = stats.dataset_summary(folds, metrics)
    peers = suite.get("control") or [m["name"] for m in suite["methods"] if m["kind"] == "peer"]
    run = dict(run)
    machine = run.pop("machine", None) or machine_info()
    versions = run.pop("versions", None) or package_versions()
    summary = {
        "kind": "quality",
        "suite": suite,
        "run": {"finished": utc_now(), **run, "n_tasks": len(records)},
        "machine": machine,
        "versions": versions,
        "datasets": run["datasets"],
        "methods": methods,
        "per_dataset": {
            metric: {d: {m: {"mean": per_dataset.loc[(d, m), (metric, "mean")],
                             "std": per_dataset.loc[(d, m), (metric, "std")],
                             "n": int(per_dataset.loc[(d, m), (metric, "n")])} for m in methods}
                     for d in datasets}
            for metric in metrics
        },
        "over_datasets": {}, "average_ranks": {}, "friedman": {}, "control": {}, "vs_control": {},
        "pairwise_pvalues": {},
    }
    failed = folds[folds["error"].notna()]
    summary["failures"] = failed[["dataset", "method", "seed", "fold", "error"]].to_dict(orient="records")
    summary["excluded_datasets"] = {}
    for metric in metrics:
        full = stats.mean_matrix(folds, metric, datasets=datasets, methods=methods)
        # A dataset where some method has no successful fold cannot be ranked
        # or averaged fairly; all methods are compared on the same datasets.
        matrix = full.dropna(axis=0)
        if len(matrix) < len(full):
            summary["excluded_datasets"][metric] = sorted(set(full.index) - set(matrix.index))
        summary["over_datasets"][metric] = stats.over_datasets(matrix).to_dict(orient="index")
        if metric not in TESTED or matrix.empty:
            continue
        summary["average_ranks"][metric] = stats.average_ranks(matrix).to_dict()
        summary["friedman"][metric] = stats.friedman(matrix)
        if len(methods) < 2:
            continue
        control = stats.best_method(matrix, peers or methods)
        summary["control"][metric] = control
        summary["vs_control"][metric] = stats.wilcoxon_vs_control(matrix, control).to_dict(orient="index")
        if metric in RANKED and len(matrix) >= 2:
            summary["pairwise_pvalues"][metric] = stats.pairwise_wilcoxon(matrix).to_dict(orient="index")
    return folds, summary


def _write_figures(directory: Path, folds: pd.DataFrame, summary: dict) -> list[str]:
    written = []
    for metric, pvalues in summary["pairwise_pvalues"].items():
        name = f"cd_{metric}.png"
        n_datasets = len(summary["datasets"]) - len(summary["excluded_datasets"].get(metric, []))
        critical_difference_plot(pd.Series(summary["average_ranks"][metric]), pd.DataFrame(pvalues),
                                 directory / name, metric=metric, n_datasets=n_datasets)
        written.append(name)
    metrics = [m for m in RANKED if m in summary["suite"]["metrics"]]
    per_dataset = stats.dataset_summary(folds, metrics)
    for metric in metrics:
        name = f"{metric}_by_dataset.png"
        dataset_bars(per_dataset, directory / name, metric=metric)
        written.append(name)
    return written


# --------------------------------------------------------------------------- markdown


def _pct(mean, std=None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    text = f"{100 * mean:.1f}"
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        text += f" ± {100 * std:.1f}"
    return text


def _points(delta) -> str:
    """A signed difference in points, without a "-0.0" for differences that round to zero."""
    rounded = round(delta, 1)
    return "0.0" if rounded == 0 else f"{rounded:+.1f}"


def _seconds(mean) -> str:
    return f"{mean:.3f}"


def _p(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2g}" if value >= 1e-3 else f"{value:.1e}"


def _table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def mean_table(summary: dict, *, with_reference: bool = True) -> str:
    """The mean-over-datasets table (markdown): mean ± std across datasets, average ranks, times.

    With ``with_reference`` and reference values in the suite, each ranked
    metric gets a reference column and the difference in points.
    """
    metrics = summary["suite"]["metrics"]
    quality = [m for m in metrics if m in SUITE_METRICS]
    ranked = [m for m in RANKED if m in summary["average_ranks"]]
    times = [m for m in metrics if m in TIME_METRICS]
    references = {m["name"]: m.get("reference", {}) for m in summary["suite"]["methods"]}
    show_ref = with_reference and any(references.values())
    header = ["method"] + [LABELS[m] for m in quality] + [f"rank {LABELS[m]}" for m in ranked]
    if show_ref:
        for m in ranked:
            header += [f"reference {LABELS[m]}", "Δ"]
    header += [f"{m.replace('_', ' ')} (s)" for m in times]
    rows = []
    for method in summary["methods"]:
        over = {m: summary["over_datasets"][m][method] for m in metrics}
        row = [method] + [_pct(over[m]["mean"], over[m]["std"]) for m in quality]
        row += [f"{summary['average_ranks'][m][method]:.2f}" for m in ranked]
        if show_ref:
            for m in ranked:
                ref = references[method].get(m)
                row += ["–", "–"] if ref is None else [f"{ref:.1f}", _points(100 * over[m]["mean"] - ref)]
        row += [_seconds(over[m]["mean"]) for m in times]
        rows.append(row)
    return _table(header, rows)


def header_lines(summary: dict) -> list[str]:
    """Command, date, machine, packages and protocol of a run, as markdown bullets."""
    suite, run, machine = summary["suite"], summary["run"], summary["machine"]
    protocol = suite["protocol"]
    seeds = list(range(protocol["random_state"], protocol["random_state"] + protocol["n_repeats"]))
    cluster = run["cluster"]
    where = "an embedded LocalCluster" if cluster.get("embedded") else f"scheduler {cluster.get('scheduler')}"
    return [
        f"- command: `{run['command']}`",
        f"- date: {run['started']} to {run['finished']} (UTC); wall time {run['wall_time_s']} s for "
        f"{run['n_tasks']} fold tasks on {cluster.get('n_workers')} worker(s) of {where}",
        f"- machine: {machine['platform']}; {machine['processor']}; {machine['cpu_count']} logical CPUs; "
        f"{machine['memory_gb']} GiB memory; Python {machine['python']}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in summary["versions"].items()),
        f"- protocol: stratified {protocol['n_splits']}-fold CV with shuffling, repeated with seeds "
        f"{seeds}; {protocol['scaler']} scaling (imputation: {protocol['impute']}) fitted on each "
        "training fold; every method on identical folds. Quality metrics in percent; ± is the "
        "standard deviation over folds (per dataset) or across datasets (means over datasets).",
    ]


def render_report(summary: dict) -> str:
    """``report.md`` as text."""
    suite = summary["suite"]
    n_datasets = len(summary["datasets"])
    parts = [f"# Quality benchmark: {suite['name']}", ""]
    if suite.get("description"):
        parts += [suite["description"].strip(), ""]
    parts += [
        *header_lines(summary),
        "",
        "## Methods",
        "",
        _table(["method", "what it is", "kind", "estimator", "params"],
               [[m["name"], method_description(m), m["kind"], m["estimator"],
                 f"`{json.dumps(m['params'])}`" if m["params"] else ""] for m in suite["methods"]]),
        "",
        f"## Mean over {n_datasets} datasets",
        "",
        mean_table(summary),
        "",
        *table_notes(summary),
        "",
        "## Tests",
        "",
        *significance_lines(summary),
    ]
    for metric in [m for m in ("g_mean", "f_measure", "auc") if m in suite["metrics"]]:
        parts += ["", f"## {LABELS[metric]} per dataset", "", _dataset_table(summary, metric)]
    if summary.get("failures"):
        parts += ["", "## Failed folds", "",
                  _table(["dataset", "method", "seed", "fold", "error"],
                         [[f["dataset"], f["method"], f["seed"], f["fold"], f["error"][:200].replace("|", "/")]
                          for f in summary["failures"]])]
    if summary.get("figures"):
        parts += ["", "## Figures", ""]
        parts += [f"![{name}]({name})" for name in summary["figures"]]
    parts += ["", "Raw per-fold values: `folds.csv`; everything above in `summary.json`.", ""]
    return "\n".join(parts)


def method_description(method: dict) -> str:
    """What a suite's method is, in words: a peer's description or the registered estimator's."""
    from ..estimators import describe_estimators
    from .peers import PEERS

    if method["kind"] == "peer" and method["estimator"] in PEERS:
        return PEERS[method["estimator"]].description
    return describe_estimators().get(method["estimator"], "")


def methods_legend(summary: dict) -> list[str]:
    """One line per method of the suite: its name and what it is (for tables that show names only)."""
    return [f"- `{m['name']}`: {method_description(m)}" for m in summary["suite"]["methods"]]


def table_notes(summary: dict) -> list[str]:
    """How to read :func:`mean_table`."""
    suite = summary["suite"]
    lines = ["Average rank: each method ranked per dataset on its mean over folds (1 = best, ties share "
             "the average rank), then averaged over datasets."]
    if summary.get("failures"):
        counts = pd.Series([f["method"] for f in summary["failures"]]).value_counts()
        lines += ["", f"**{len(summary['failures'])} fold(s) failed** ("
                  + ", ".join(f"{m}: {n}" for m, n in counts.items())
                  + "); a method's per-dataset mean is over its successful folds (see \"Failed folds\")."]
    for metric, excluded in summary.get("excluded_datasets", {}).items():
        lines += ["", f"{LABELS.get(metric, metric)}: {len(excluded)} dataset(s) left out of the means, ranks "
                  f"and tests because some method has no successful fold there: {', '.join(excluded)}."]
    if suite.get("reference_source") and any(m.get("reference") for m in suite["methods"]):
        lines += ["", f"Reference values: {suite['reference_source']}. Δ = measured − reference, in points."]
    return lines


def significance_lines(summary: dict) -> list[str]:
    """Friedman tests and Wilcoxon tests against the best peer, as markdown."""
    lines = []
    for metric, result in summary["friedman"].items():
        label = LABELS[metric]
        if result is None:
            lines.append(f"- Friedman ({label}): not applicable (needs at least 3 methods and 2 datasets)")
        else:
            lines.append(f"- Friedman ({label}): chi2 = {result['statistic']:.2f}, p = {_p(result['pvalue'])} "
                         f"({result['n_datasets']} datasets, {result['n_methods']} methods)")
    for metric, table in summary["vs_control"].items():
        control = summary["control"][metric]
        among = summary["suite"].get("control")
        lines += ["", f"Wilcoxon signed-rank test ({LABELS[metric]}) of each method against the best "
                      + (f"of {', '.join(among)}" if among else "peer")
                      + f", **{control}** (best average rank), over datasets; Holm-corrected over "
                      f"{len(table)} comparison(s). W/T/L: datasets where the method is better/equal/worse.",
                  ""]
        rows = [[method, f"{row['wins']}/{row['ties']}/{row['losses']}", _p(row["pvalue"]), _p(row["pvalue_holm"])]
                for method, row in table.items()]
        lines.append(_table(["method", "W/T/L", "p", "p (Holm)"], rows))
    return lines


def _dataset_table(summary: dict, metric: str) -> str:
    per = summary["per_dataset"][metric]
    methods = summary["methods"]
    protocol = summary["suite"]["protocol"]
    n_folds = protocol["n_splits"] * protocol["n_repeats"]
    rows = []
    for dataset, info in summary["datasets"].items():
        means = {m: per[dataset][m]["mean"] for m in methods}
        valid = [v for v in means.values() if v is not None and not math.isnan(v)]
        best = max(valid) if valid else None
        cells = []
        for m in methods:
            text = _pct(means[m], per[dataset][m]["std"])
            if per[dataset][m]["n"] < n_folds:  # some folds failed
                text += f" ({per[dataset][m]['n']}/{n_folds} folds)"
            cells.append(f"**{text}**" if best is not None and means[m] == best else text)
        rows.append([f"{dataset} ({info['n_samples']}, {info['n_minority']} min.)", *cells])
    return _table(["dataset (rows, minority)", *methods], rows)


def summary_lines(summary: dict) -> list[str]:
    """The mean-over-datasets table and the Friedman tests, as lines for the command line."""
    lines = [f"suite {summary['suite']['name']}: mean over {len(summary['datasets'])} datasets",
             mean_table(summary)]
    for metric in RANKED:
        result = summary["friedman"].get(metric)
        if result is not None:
            lines.append(f"Friedman ({LABELS[metric]}): chi2 = {result['statistic']:.2f}, p = {_p(result['pvalue'])}")
    return lines


def _jsonable(value):
    """Plain JSON types: numpy scalars to Python, NaN to null."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rewrite_results(directory) -> dict:
    """Re-analyse an existing results directory from its ``folds.csv`` and ``summary.json``.

    For a changed report layout or new statistics without rerunning the
    tasks; the run's command, date and machine are kept as recorded.
    """
    directory = Path(directory)
    previous = json.loads((directory / "summary.json").read_text())
    folds = pd.read_csv(directory / "folds.csv")
    # The run's own record of when and where it ran, not this machine's.
    run = {**previous["run"], "machine": previous["machine"], "versions": previous["versions"]}
    summary = write_results(directory, previous["suite"], folds.to_dict(orient="records"), run)
    return summary
