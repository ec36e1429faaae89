"""What a stored structural stage costs in neighbours: the filtered graph against each fold's own.

Usage (from the repository root)::

    python -m benchmarks.stored_stage_recall page-blocks0 abalone19 --k 10 --k-store 10 20 30 50

For every dataset and ``k_store``: the stored graph is every row's ``k_store``
nearest rows (exact, rows min-max scaled over all rows, as a job's stored
stage builds it); each fold of a stratified 5-fold split keeps, of every
row's stored neighbours, the first ``k`` that are training rows
(:func:`dimbsvm.features.structural.neighbors_among`). Reported per
``k_store``, averaged over folds and rows:

- ``recall_same_scaling``: the share of each row's exact k nearest training
  rows (same global scaling) that the filter keeps - the cost of a finite
  ``k_store`` alone (1.0 when ``k_store`` is every other row);
- ``recall_fold_scaling``: the same against the neighbours a per-fold stage
  finds (rows scaled with the fold's training rows only) - the whole
  difference between a stored stage and refitting it per fold;
- ``short_rows``: the share of rows that kept fewer than ``k`` neighbours.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import MinMaxScaler

from dimbsvm.datasets import load
from dimbsvm.features.structural import neighbors_among
from dimbsvm.model_selection.splits import repeat_splits

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, utc_now


def _recall(found, exact):
    hits = [np.intersect1d(f[f >= 0], e).size for f, e in zip(found, exact)]
    return float(np.sum(hits) / exact.size)


def measure(name: str, k: int, k_stores, n_splits: int = 5, seed: int = 0) -> list[dict]:
    data = load(name)
    X, y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y)
    global_scaled = MinMaxScaler().fit_transform(X)
    widest = min(max(k_stores), len(X) - 1)
    stored_all = NearestNeighbors(n_neighbors=widest + 1).fit(global_scaled).kneighbors(
        global_scaled, return_distance=False)[:, 1:]
    rows = []
    for k_store in k_stores:
        stored = stored_all[:, :min(k_store, widest)]
        same, fold_scaled, short = [], [], []
        for train, test in repeat_splits(y, n_splits=n_splits, seed=seed):
            positions, found = neighbors_among(stored, train, k)
            kept = np.where(positions >= 0, train[np.maximum(positions, 0)], -1)
            index = NearestNeighbors(n_neighbors=k + 1).fit(global_scaled[train])
            exact_train = train[index.kneighbors(global_scaled[train], return_distance=False)[:, 1:]]
            exact_test = train[index.kneighbors(global_scaled[test], n_neighbors=k, return_distance=False)]
            exact = np.empty((len(X), k), dtype=np.int64)
            exact[train], exact[test] = exact_train, exact_test
            same.append(_recall(kept, exact))
            scaler = MinMaxScaler().fit(X[train])
            fold_index = NearestNeighbors(n_neighbors=k + 1).fit(scaler.transform(X[train]))
            fold_train = train[fold_index.kneighbors(scaler.transform(X[train]), return_distance=False)[:, 1:]]
            fold_test = train[fold_index.kneighbors(scaler.transform(X[test]), n_neighbors=k,
                                                    return_distance=False)]
            fold = np.empty((len(X), k), dtype=np.int64)
            fold[train], fold[test] = fold_train, fold_test
            fold_scaled.append(_recall(kept, fold))
            short.append(float(np.mean(found < k)))
        rows.append({"dataset": data.name, "n": int(len(X)), "k": k, "k_store": int(k_store),
                     "recall_same_scaling": float(np.mean(same)), "recall_fold_scaling": float(np.mean(fold_scaled)),
                     "short_rows": float(np.mean(short))})
    return rows


def render_markdown(summary: dict) -> str:
    lines = ["| dataset | n | k | k_store | recall (same scaling) | recall vs per-fold stage | rows short of k |",
             "|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        lines.append(f"| {r['dataset']} | {r['n']:,} | {r['k']} | {r['k_store']} | {r['recall_same_scaling']:.4f} | "
                     f"{r['recall_fold_scaling']:.4f} | {100 * r['short_rows']:.2f} % |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stored_stage_recall", description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", help="bundled or shared dataset names, or files")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--k-store", type=int, nargs="+", default=[10, 20, 30, 50])
    parser.add_argument("--out", help="results directory to write summary.json into")
    args = parser.parse_args(argv)
    summary = {"kind": "stored_stage_recall",
               "title": "Stored structural stage: each fold's neighbours from one stored graph",
               "description": "A job's stored structural stage keeps every row's `k_store` nearest rows once, in the "
                              "store; each fold keeps the first `k` that are its training rows. Recall of those "
                              "against the fold's exact kNN graph with the same (all-rows) scaling, against the "
                              "graph a per-fold stage builds (fold scaling), and the rows left with fewer than "
                              "`k` (stratified 5-fold, seed 0). The default `k_store` is 3k.",
               "command": "python -m benchmarks.stored_stage_recall " + " ".join(
        sys.argv[1:] if argv is None else argv), "date": utc_now(), "machine": machine_info(), "rows": []}
    for name in args.datasets:
        summary["rows"].extend(measure(name, args.k, args.k_store))
    if args.out:
        write_summary(args.out, summary)
    print(render_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
