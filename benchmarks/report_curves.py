"""The run report's ROC and precision-recall panels on many out-of-fold scores.

Usage (from the repository root)::

    python -m benchmarks.report_curves --n 10000000 --repeats 2

``PrecisionRecallDisplay.from_predictions`` (scikit-learn computes the curve,
then the average precision from the curve again) against
:func:`dimbsvm.report.figures.precision_recall_and_average` and the display
drawn from its arrays, alternating in one process; then both panels drawn
from the scores as given against :func:`dimbsvm.report.figures.roc_pr_figure`
(which sorts the rows by score once, so scikit-learn's own stable sorts pass
over presorted scores); prints the medians.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv=None) -> int:
    from matplotlib.figure import Figure
    from sklearn.metrics import PrecisionRecallDisplay, RocCurveDisplay

    from dimbsvm.report.figures import precision_recall_and_average, roc_pr_figure

    parser = argparse.ArgumentParser(prog="python -m benchmarks.report_curves", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="out-of-fold scores (1 %% positive)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    positive = rng.rand(args.n) < 0.01
    score = rng.normal(size=args.n) + positive
    twice, once = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        PrecisionRecallDisplay.from_predictions(positive, score, ax=Figure().add_subplot())
        twice.append(time.perf_counter() - start)
        start = time.perf_counter()
        precision, recall, average = precision_recall_and_average(positive, score)
        PrecisionRecallDisplay(precision=precision, recall=recall, average_precision=average).plot(
            ax=Figure().add_subplot())
        once.append(time.perf_counter() - start)
    print(f"precision-recall panel, {args.n:,} scores, medians of {args.repeats}: "
          f"from_predictions {np.median(twice):.2f} s, one curve {np.median(once):.2f} s "
          f"({np.median(twice) / np.median(once):.2f}x)")
    unsorted, presorted = [], []
    repeat = np.zeros(args.n, dtype=np.int64)
    for _ in range(args.repeats):
        start = time.perf_counter()
        RocCurveDisplay.from_predictions(positive, score, ax=Figure().add_subplot(), name="repeat 0")
        precision, recall, average = precision_recall_and_average(positive, score)
        PrecisionRecallDisplay(precision=precision, recall=recall, average_precision=average).plot(
            ax=Figure().add_subplot())
        unsorted.append(time.perf_counter() - start)
        start = time.perf_counter()
        roc_pr_figure(positive, score, repeat)
        presorted.append(time.perf_counter() - start)
    print(f"ROC and precision-recall panels, {args.n:,} scores, medians of {args.repeats}: "
          f"scores as given {np.median(unsorted):.2f} s, sorted once {np.median(presorted):.2f} s "
          f"({np.median(unsorted) / np.median(presorted):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
