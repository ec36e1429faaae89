"""Figures of a quality run, drawn with matplotlib's file-only Agg backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["critical_difference_plot", "dataset_bars"]

LABELS = {"g_mean": "G-mean", "f_measure": "F-measure", "auc": "ROC-AUC", "a_mean": "a-mean"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on cluster nodes or CI
    import matplotlib.pyplot as plt

    return plt


def critical_difference_plot(ranks: pd.Series, pvalues: pd.DataFrame, path, *, metric: str,
                             n_datasets: int, alpha: float = 0.05) -> Path:
    """Average ranks on an axis, methods joined by a bar where no pair differs significantly.

    Parameters
    ----------
    ranks : Series
        Average rank per method (1 = best).
    pvalues : DataFrame
        Pairwise p-values (Holm-corrected Wilcoxon), methods as index and columns.
    path : path-like
        PNG file to write.
    metric : str
        Name for the title.
    n_datasets : int
        For the title.
    alpha : float, default=0.05
        Significance level of the bars.
    """
    import scikit_posthocs as sp

    plt = _pyplot()
    height = 1.2 + 0.3 * len(ranks)
    fig, ax = plt.subplots(figsize=(8, height))
    try:
        sp.critical_difference_diagram(ranks, pvalues, alpha=alpha, ax=ax)
        ax.set_title(f"Average rank on {LABELS.get(metric, metric)} over {n_datasets} datasets "
                     f"(bars: no significant difference, Holm-Wilcoxon, α={alpha})", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return Path(path)


def dataset_bars(summary: pd.DataFrame, path, *, metric: str = "g_mean") -> Path:
    """Grouped bars: one group per dataset, one bar per method, error bars one std over folds.

    Parameters
    ----------
    summary : DataFrame
        :func:`dimbsvm.bench.stats.dataset_summary` output.
    path : path-like
        PNG file to write.
    metric : str, default="g_mean"
    """
    plt = _pyplot()
    means = summary[(metric, "mean")].unstack("method")
    stds = summary[(metric, "std")].unstack("method")
    datasets = list(pd.unique(summary.index.get_level_values("dataset")))
    methods = list(pd.unique(summary.index.get_level_values("method")))
    means, stds = means.loc[datasets, methods], stds.loc[datasets, methods].fillna(0.0)
    width = 0.8 / len(methods)
    x = np.arange(len(datasets))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(datasets) * max(1, len(methods) / 3)), 4.5))
    try:
        cmap = plt.get_cmap("tab10")
        for i, method in enumerate(methods):
            ax.bar(x + (i - (len(methods) - 1) / 2) * width, means[method], width, yerr=stds[method],
                   label=method, color=cmap(i % 10), error_kw={"elinewidth": 0.6, "capsize": 1})
        ax.set_xticks(x, datasets, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(LABELS.get(metric, metric))
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncols=min(len(methods), 5), loc="lower center", bbox_to_anchor=(0.5, 1.0),
                  frameon=False)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return Path(path)
