"""Similarity (Fisher) kernel features + LinearSVC against 1-NN DTW on UCR/UEA data (issue 5).

For each dataset the given train/test split is used. SimKer: DTW distances to
every training series (``references=1.0``, the paper's UCR setting),
normalised by eq. (10), then ``LinearSVC``. Baseline: 1-NN with the same DTW
distances (unconstrained window), the paper's baseline. BasicMotions (six
channels) is run with six per-channel DTW modalities, with one dependent
multivariate DTW, and with both; its 1-NN baselines are dependent DTW (DTW_D)
and the sum of per-channel DTWs (DTW_I).

DTW runs once per (test or training series, reference) pair: the 1-NN
baseline reads the raw distances back from the features
(``dist = mu - phi * sigma``), so its accuracy costs no second DTW pass.

Two SVM settings are reported: ``C = 1`` (no tuning), and ``C`` chosen by
5-fold stratified cross-validation on the training features (a mild shortcut:
the references and moments of those features come from all training series,
including each validation fold; the test split is never used).

Usage (from the repository root)::

    python -m benchmarks.similarity_ucr
    python -m benchmarks.similarity_ucr --datasets GunPoint BasicMotions
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import LinearSVC

from dimbsvm.environment import machine_info
from dimbsvm.datasets import load_ts, shared_datasets_dir
from dimbsvm.features import SimilarityFeatures

UNIVARIATE = ("GunPoint", "ItalyPowerDemand", "ArrowHead", "ACSF1")
C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)


def _ucr_dir():
    base = shared_datasets_dir()
    if base is None:
        raise SystemExit("shared datasets not found: set DIMBSVM_SHARED_DATASETS or pass --data-dir")
    return Path(base) / "ucr"


def _svm_accuracies(F_train, y_train, F_test, y_test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LinearSVC convergence chatter on tiny sets
        fixed = LinearSVC(C=1.0, max_iter=20000).fit(F_train, y_train)
        folds = StratifiedKFold(n_splits=min(5, np.bincount(y_train).min()), shuffle=True,
                                random_state=0)
        search = GridSearchCV(LinearSVC(max_iter=20000), {"C": C_GRID}, cv=folds).fit(F_train, y_train)
    return (fixed.score(F_test, y_test), search.score(F_test, y_test), search.best_params_["C"])


def _raw_distances(sim, phi):
    """``dist = mu - phi * sigma`` per column (inverse of eq. (10))."""
    return np.ravel(sim.mu_) - phi * np.ravel(sim.sigma_)


def _one_nn(D_test, y_train, y_test):
    return float(np.mean(y_train[np.argmin(D_test, axis=1)] == y_test))


def _run(name, X_train, y_train, X_test, y_test, distances):
    sim = SimilarityFeatures(references=1.0, distances=distances)
    start = time.perf_counter()
    F_train = sim.fit_transform(X_train)
    F_test = sim.transform(X_test)
    seconds = time.perf_counter() - start
    acc_fixed, acc_cv, best_c = _svm_accuracies(F_train, y_train, F_test, y_test)
    pairs = (len(X_train) + len(X_test)) * len(X_train) * len(sim.modalities_)
    return sim, F_test, dict(dataset=name, n_train=len(X_train), n_test=len(X_test),
                             shape="x".join(map(str, X_train.shape[1:])),
                             modalities=len(sim.modalities_), acc_fixed=acc_fixed, acc_cv=acc_cv,
                             best_c=best_c, seconds=seconds, pairs=pairs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*UNIVARIATE, "BasicMotions"])
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir) if args.data_dir else _ucr_dir()

    rows = []
    for name in args.datasets:
        train = load_ts(data_dir / f"{name}_TRAIN.ts")
        test = load_ts(data_dir / f"{name}_TEST.ts")
        if name != "BasicMotions":
            X_tr, X_te = train.X[:, 0, :], test.X[:, 0, :]  # univariate: (n, length)
            sim, F_test, row = _run(name, X_tr, train.y, X_te, test.y, "dtw")
            row["variant"] = "DTW"
            row["one_nn"] = _one_nn(_raw_distances(sim, F_test), train.y, test.y)
            row["one_nn_label"] = "1-NN DTW"
            rows.append(row)
            print(_line(row), flush=True)
            continue
        channels = train.X.shape[1]
        per_channel = [{"metric": "dtw", "channel": c} for c in range(channels)]
        variants = [(f"{channels} x per-channel DTW", per_channel),
                    ("1 x multivariate DTW_D", "dtw"),
                    (f"{channels} per-channel + multivariate", [*per_channel, "dtw"])]
        for label, spec in variants:
            sim, F_test, row = _run(name, train.X, train.y, test.X, test.y, spec)
            row["variant"] = label
            D = _raw_distances(sim, F_test)
            m = sim.references_.shape[0]
            if spec == "dtw":
                row["one_nn"], row["one_nn_label"] = _one_nn(D, train.y, test.y), "1-NN DTW_D"
            else:
                D_indep = D[:, :channels * m].reshape(len(D), channels, m).sum(axis=1)
                row["one_nn"], row["one_nn_label"] = _one_nn(D_indep, train.y, test.y), "1-NN DTW_I"
            rows.append(row)
            print(_line(row), flush=True)

    info = machine_info()
    print(f"\n# SimKer (DTW, references = all training series) + LinearSVC vs 1-NN DTW\n\n"
          f"{info['processor']}, {info['cpu_count']} logical CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end; test accuracy on the given splits.\n")
    print("| dataset | n train / test | series | modalities | SimKer C=1 | SimKer C by CV (C) "
          "| 1-NN baseline | DTW pairs | features s |")
    print("|---|---|---|---|---:|---:|---|---:|---:|")
    for r in rows:
        print(f"| {r['dataset']} | {r['n_train']} / {r['n_test']} | {r['shape']} | {r['variant']} "
              f"| {r['acc_fixed']:.3f} | {r['acc_cv']:.3f} ({r['best_c']:g}) "
              f"| {r['one_nn_label']}: {r['one_nn']:.3f} | {r['pairs']:,} | {r['seconds']:.1f} |")


def _line(r):
    return (f"{r['dataset']:<16} {r['variant']:<34} SimKer C=1 {r['acc_fixed']:.3f}  CV {r['acc_cv']:.3f}  "
            f"{r['one_nn_label']} {r['one_nn']:.3f}  ({r['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
