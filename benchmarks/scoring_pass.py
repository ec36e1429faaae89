"""Scoring a fold's test rows: one pass of the model against asking for predict and decision_function apart.

Usage (from the repository root)::

    python -m benchmarks.scoring_pass --out benchmarks/results/scoring-pass

For each model, fitted once on two thirds of ``make_imbalanced(n, 20
features, 5 % minority)`` inside a min-max scaling pipeline, the other third
is scored both ways, alternately, ``--repeats`` times: ``apart`` is
``model.predict`` then :func:`~dimbsvm.model_selection.scoring.positive_scores`
(what a fold's finish did before), ``one pass`` is
:func:`~dimbsvm.model_selection.scoring.predictions_and_scores` (a
pipeline's steps once, the classifier's ``predict_and_decision``). The table
gives the medians, their ratio and whether both ways gave the same arrays.
Models: the default ``EnsembleOTHRClassifier`` (10 RBF SVC members on bags
as large as the training set), the same with ``LinearSVC`` members on bags of
20,000, and ``OTHRClassifier()`` (RBF SVC).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from benchmarks.results import docstring_text, publish, when_and_where
from dimbsvm.environment import utc_now

logger = logging.getLogger("benchmarks.scoring_pass")

MODELS = ("ensemble-rbf", "ensemble-linear", "othr-rbf")
ROWS = {"ensemble-rbf": 8_000, "ensemble-linear": 200_000, "othr-rbf": 8_000}


def _model(name):
    from sklearn.svm import LinearSVC

    from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier

    if name == "ensemble-rbf":
        return EnsembleOTHRClassifier(random_state=0)
    if name == "ensemble-linear":
        return EnsembleOTHRClassifier(estimator=LinearSVC(), max_samples=20_000, random_state=0)
    return OTHRClassifier()


def measure(name: str, repeats: int) -> dict:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.model_selection.scoring import positive_scores, predictions_and_scores

    X, y = make_imbalanced(ROWS[name], n_features=20, minority_fraction=0.05, random_state=0)
    X, y = np.asarray(X), np.asarray(y)
    n_train = 2 * len(y) // 3
    model = make_pipeline(MinMaxScaler(), _model(name)).fit(X[:n_train], y[:n_train])
    X_test = X[n_train:]
    apart, one_pass, same = [], [], True
    for _ in range(repeats):
        start = time.perf_counter()
        y_pred, scores = model.predict(X_test), positive_scores(model, X_test, 1)
        apart.append(time.perf_counter() - start)
        start = time.perf_counter()
        y_pred_once, scores_once = predictions_and_scores(model, X_test, 1)
        one_pass.append(time.perf_counter() - start)
        same &= bool(np.array_equal(y_pred, y_pred_once) and np.array_equal(scores, scores_once))
    row = {"model": name, "rows": int(len(y)), "test_rows": int(len(X_test)), "apart_s": float(np.median(apart)),
           "one_pass_s": float(np.median(one_pass)), "same_arrays": same, "apart_all": apart, "one_pass_all": one_pass}
    row["ratio"] = row["one_pass_s"] / row["apart_s"]
    logger.info("%s: apart %.3f s, one pass %.3f s, same %s", name, row["apart_s"], row["one_pass_s"], same)
    return row


def render_markdown(summary: dict) -> str:
    lines = ["| model | rows (test) | predict + decision_function apart, s | one pass, s | one pass / apart | "
             "same arrays |", "|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        lines.append(f"| {r['model']} | {r['rows']} ({r['test_rows']}) | {r['apart_s']:.3f} | {r['one_pass_s']:.3f} | "
                     f"{r['ratio']:.2f} | {'yes' if r['same_arrays'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--note", default="", help="a sentence about the machine's state")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started, wall = utc_now(), time.perf_counter()
    rows = [measure(name, args.repeats) for name in args.models]
    summary = {"kind": "scoring_pass", "title": "Scoring a fold's test rows in one pass of the model (issue 33)",
               "command": "python -m benchmarks.scoring_pass" + (f" --repeats {args.repeats}" if args.repeats != 5 else "")
               + (f" --out {args.out}" if args.out else ""),
               "description": docstring_text(__doc__, 3, note=args.note),
               **when_and_where(started, wall), "rows": rows}
    return publish(summary, render_markdown, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
