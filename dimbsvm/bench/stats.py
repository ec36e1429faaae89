"""Tables and tests of a quality run, from its per-fold records.

The statistics follow Demšar (2006), "Statistical comparisons of classifiers
over multiple data sets": the unit of comparison is a dataset (the mean over
its folds), methods are ranked per dataset, the Friedman test asks whether
any method differs, and Wilcoxon signed-rank tests compare each method with
one control (here the best peer) with Holm's correction. The tests themselves
come from scipy, statsmodels and scikit-posthocs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

__all__ = [
    "fold_table", "dataset_summary", "mean_matrix", "over_datasets", "average_ranks", "friedman",
    "best_method", "wilcoxon_vs_control", "pairwise_wilcoxon",
]

#: How Wilcoxon treats datasets where two methods score the same: the zero
#: differences' ranks are split between both sides (Demšar's recommendation),
#: so identical results count as evidence of no difference instead of being dropped.
ZERO_METHOD = "zsplit"


def fold_table(records, metrics) -> pd.DataFrame:
    """The raw per-fold table: one row per (dataset, method, seed, fold).

    ``error`` holds the message of a fold that failed (its metrics are NaN)
    and is None otherwise.

    Examples
    --------
    >>> fold_table([{"dataset": "d", "method": "m", "seed": 0, "fold": 0, "n_train": 8,
    ...              "n_test": 2, "g_mean": 0.5}], ["g_mean"]).columns.tolist()
    ['dataset', 'method', 'seed', 'fold', 'n_train', 'n_test', 'g_mean', 'error']
    """
    columns = ["dataset", "method", "seed", "fold", "n_train", "n_test", *metrics, "error"]
    table = pd.DataFrame.from_records(records, columns=columns)
    table["error"] = table["error"].astype(object).where(table["error"].notna(), None)
    return table


def dataset_summary(folds: pd.DataFrame, metrics) -> pd.DataFrame:
    """Mean, standard deviation (ddof=1, over folds and repeats) and fold count per (dataset, method).

    Returns
    -------
    DataFrame
        Index (dataset, method) in order of first appearance; columns
        ``(metric, "mean" | "std" | "n")``.
    """
    grouped = folds.groupby(["dataset", "method"], sort=False)[list(metrics)]
    return grouped.agg(["mean", "std", "count"]).rename(columns={"count": "n"}, level=1)


def mean_matrix(folds: pd.DataFrame, metric: str, *, datasets=None, methods=None) -> pd.DataFrame:
    """Per-dataset means of one metric: datasets as rows, methods as columns.

    Failed folds (NaN) are left out of a mean; a (dataset, method) without
    any successful fold is NaN. ``datasets`` and ``methods`` fix the order
    (default: first appearance).
    """
    matrix = folds.groupby(["dataset", "method"], sort=False)[metric].mean().unstack("method")
    datasets = list(datasets) if datasets is not None else list(pd.unique(folds["dataset"]))
    methods = list(methods) if methods is not None else list(pd.unique(folds["method"]))
    return matrix.loc[datasets, methods]


def over_datasets(matrix: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation (ddof=1) across datasets of each method's per-dataset means."""
    return pd.DataFrame({"mean": matrix.mean(axis=0), "std": matrix.std(axis=0, ddof=1)})


def average_ranks(matrix: pd.DataFrame, *, higher_is_better: bool = True) -> pd.Series:
    """Each method's rank averaged over datasets (1 = best; ties share the average rank).

    Examples
    --------
    >>> m = pd.DataFrame({"a": [0.9, 0.8], "b": [0.7, 0.8]}, index=["d1", "d2"])
    >>> average_ranks(m).tolist()
    [1.25, 1.75]
    """
    return matrix.rank(axis=1, ascending=not higher_is_better, method="average").mean(axis=0)


def friedman(matrix: pd.DataFrame) -> dict | None:
    """Friedman test that all methods perform alike over the datasets.

    Returns
    -------
    dict or None
        ``{"statistic", "pvalue", "n_datasets", "n_methods"}``; None with
        fewer than three methods or two datasets (the test is undefined).
    """
    n_datasets, n_methods = matrix.shape
    if n_methods < 3 or n_datasets < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant rows: the statistic is NaN, reported as such
        result = stats.friedmanchisquare(*(matrix[c].to_numpy() for c in matrix.columns))
    return {"statistic": float(result.statistic), "pvalue": float(result.pvalue),
            "n_datasets": int(n_datasets), "n_methods": int(n_methods)}


def best_method(matrix: pd.DataFrame, candidates) -> str:
    """The candidate with the best average rank; ties go to the higher mean.

    Ranks are taken among all methods of ``matrix``, so the choice agrees
    with the report's rank table.
    """
    ranks = average_ranks(matrix)
    means = matrix.mean(axis=0)
    return min(candidates, key=lambda m: (ranks[m], -means[m]))


def wilcoxon_vs_control(matrix: pd.DataFrame, control: str) -> pd.DataFrame:
    """Wilcoxon signed-rank test of every method against ``control``, Holm-corrected.

    Returns
    -------
    DataFrame
        Index: the other methods; columns ``wins``, ``ties``, ``losses`` (per
        dataset, against the control), ``statistic``, ``pvalue`` and
        ``pvalue_holm`` (Holm over the ``k - 1`` comparisons).
    """
    from statsmodels.stats.multitest import multipletests

    others = [m for m in matrix.columns if m != control]
    rows = []
    for method in others:
        diff = matrix[method] - matrix[control]
        row = {"method": method, "wins": int((diff > 0).sum()), "ties": int((diff == 0).sum()),
               "losses": int((diff < 0).sum()), "statistic": np.nan, "pvalue": np.nan}
        if len(diff) >= 2:
            result = stats.wilcoxon(matrix[method], matrix[control], zero_method=ZERO_METHOD)
            row.update(statistic=float(result.statistic), pvalue=float(result.pvalue))
        rows.append(row)
    table = pd.DataFrame(rows, columns=["method", "wins", "ties", "losses", "statistic", "pvalue"]).set_index("method")
    valid = table["pvalue"].notna()
    table["pvalue_holm"] = np.nan
    if valid.any():
        table.loc[valid, "pvalue_holm"] = multipletests(table.loc[valid, "pvalue"], method="holm")[1]
    return table


def pairwise_wilcoxon(matrix: pd.DataFrame) -> pd.DataFrame:
    """Holm-corrected Wilcoxon p-values of all method pairs (the critical-difference diagram's bars).

    Returns
    -------
    DataFrame
        Square, methods as index and columns, ones on the diagonal.
    """
    import scikit_posthocs as sp

    # Long format keeps each method's values in dataset order, which is how
    # posthoc_wilcoxon pairs the observations.
    long = matrix.melt(var_name="method", value_name="score", ignore_index=False)
    table = sp.posthoc_wilcoxon(long, val_col="score", group_col="method", p_adjust="holm",
                                zero_method=ZERO_METHOD)
    return table.loc[list(matrix.columns), list(matrix.columns)]
