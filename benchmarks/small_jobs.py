"""Small jobs as a user runs them: ``dimbsvm run`` against the same work in plain scikit-learn, whole processes.

Usage (from the repository root)::

    python -m benchmarks.small_jobs --repeats 5 --cluster --out benchmarks/results/small-jobs

Two cases, each a fresh process per measurement (imports, data loading, interpreter exit included;
wall time of ``subprocess.run``), dimbsvm and scikit-learn alternated so that drift hits both alike:

- ``quickstart``: ``dimbsvm run jobs/quickstart.yaml --out TMP`` (class-weighted RBF SVC on the bundled
  yeast5, min-max scaling fitted per training fold, stratified 5-fold CV repeated twice with seeds 0
  and 1, ten metrics, the final model on every row, its model and report written) against
  :data:`QUICKSTART_SKLEARN`: the same folds (dimbsvm's StratifiedBlockKFold, seeds 0 and 1), the same
  pipeline and metrics, and the final model's fit, in one scikit-learn process (no files written);
- ``ensemble``: a job on 2x10^5 x 20 rows (``make_imbalanced``, 5 % minority, saved as ``.npz``):
  EnsembleOTHRClassifier with 10 LinearSVC members on bags of 20,000 rows (stratified bags, a
  threshold shared by the members from their pooled out-of-bag margins, searched without smoothing;
  its other parameters its defaults), stratified 3-fold CV and the final model, against
  :data:`ENSEMBLE_SKLEARN`: the same folds, a min-max scaler, 10 LinearSVC members each fitted on a
  stratified bag of 20,000 rows, a majority vote, and the final fit. The scikit-learn side has no
  threshold search (its G-mean is lower on this data);
- ``large`` (only when asked for, ``--cases large``): the ``ensemble`` case on 10^7 x 20 rows, which
  ``dimbsvm run`` reads from a Zarr store (ingested once, not timed) and runs on the embedded cluster
  its size calls for (one worker per core), against the same scikit-learn script reading the rows
  from ``.npz`` into one process's memory (1.6 GB).

Without ``--scheduler`` or ``--workers``, ``dimbsvm run`` decides where a job runs from its size
(:mod:`dimbsvm.jobs.placement`); both cases are small enough to run in its own process. ``--cluster``
also times ``dimbsvm run --workers N`` (N: the cores), what ``dimbsvm run`` did before. Recorded per
process: wall seconds and the G-mean (mean over folds) each side computed; for dimbsvm also the
seconds inside the run (``metrics.json`` ``duration_s``: plan, folds, final model, model and report
written) and of its fitting and scoring (``resources.json`` phases); the rest of the wall time is
interpreter start, imports, the checks and exit. Ratios are of medians.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.small_jobs")

ROOT = Path(__file__).resolve().parent.parent

#: The RESULTS.md section's title unless ``--title`` gives another.
TITLE = "Small jobs, whole processes: dimbsvm run against plain scikit-learn"

#: The issue's targets: dimbsvm's wall time over scikit-learn's (``large``: faster).
TARGETS = {"quickstart": 1.5, "ensemble": 1.3, "large": 1.0}
#: The cases run without ``--cases``: ``large`` writes 1.6 GB twice and takes minutes.
DEFAULT_CASES = ("quickstart", "ensemble")
LARGE_ROWS = 10_000_000

ENSEMBLE_ROWS, ENSEMBLE_FEATURES, ENSEMBLE_BAG, ENSEMBLE_MEMBERS = 200_000, 20, 20_000, 10

ENSEMBLE_JOB = f"""\
name: ensemble-2e5
data: {{source: DATA}}
preprocessing: {{scaler: minmax}}
estimator:
  name: ensemble_othr
  params: {{estimator: linear_svc, n_estimators: {ENSEMBLE_MEMBERS}, max_samples: {ENSEMBLE_BAG}, smoothing: null,
           random_state: 0}}
cv: {{n_splits: 3, n_repeats: 1, random_state: 0}}
metrics: [g_mean, auc, fit_time]
"""

#: The quickstart's cross-validation in plain scikit-learn (jobs/quickstart.yaml).
QUICKSTART_SKLEARN = """\
import sys
import numpy as np
from sklearn.metrics import (average_precision_score, f1_score, matthews_corrcoef, precision_score,
                             recall_score, roc_auc_score)
from dimbsvm.model_selection import StratifiedBlockKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

data = np.load(sys.argv[1])
X, y = data["X"], data["y"]  # y: 1 is the minority (positive) class

def pipeline():
    return make_pipeline(MinMaxScaler(), SVC(kernel="rbf", C=1.0, gamma="scale", class_weight="balanced"))

g_means = []
for seed in (0, 1):
    for train, test in StratifiedBlockKFold(5, random_state=seed).split(X, y):
        model = pipeline().fit(X[train], y[train])
        pred, score = model.predict(X[test]), model.decision_function(X[test])
        tpr = recall_score(y[test], pred)
        tnr = recall_score(y[test], pred, pos_label=0)
        g_means.append(np.sqrt(tpr * tnr))
        record = (f1_score(y[test], pred), roc_auc_score(y[test], score), (tpr + tnr) / 2,
                  precision_score(y[test], pred, zero_division=0), tpr, tnr,
                  average_precision_score(y[test], score), matthews_corrcoef(y[test], pred))
pipeline().fit(X, y)  # the final model on every row, as the job fits it
print(float(np.mean(g_means)))
"""

#: The ensemble job's cross-validation in plain scikit-learn: LinearSVC members on stratified bags, a vote.
#: (BaggingClassifier is not used: it hands LinearSVC every training row with bootstrap counts as sample
#: weights, 4x slower here than fitting each member on its bag.)
ENSEMBLE_SKLEARN = f"""\
import sys
import numpy as np
from sklearn.metrics import recall_score, roc_auc_score
from dimbsvm.model_selection import StratifiedBlockKFold
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import LinearSVC

data = np.load(sys.argv[1])
X, y = data["X"], data["y"]

def fit(X, y, seed):
    scaler = MinMaxScaler().fit(X)
    X = scaler.transform(X)
    rng = np.random.RandomState(seed)
    minority, majority = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    n_min = round({ENSEMBLE_BAG} * minority.size / y.size)
    members = []
    for _ in range({ENSEMBLE_MEMBERS}):  # stratified bags: each class drawn with replacement in its share
        bag = np.concatenate([rng.choice(minority, n_min), rng.choice(majority, {ENSEMBLE_BAG} - n_min)])
        members.append(LinearSVC().fit(X[bag], y[bag]))
    return scaler, members

def predict(model, X):
    scaler, members = model
    X = scaler.transform(X)
    margins = np.stack([m.decision_function(X) for m in members])
    return (2 * (margins > 0).sum(axis=0) > len(members)).astype(int), margins.mean(axis=0)

g_means = []
for train, test in StratifiedBlockKFold(3, random_state=0).split(X, y):
    pred, score = predict(fit(X[train], y[train], 0), X[test])
    g_means.append(np.sqrt(recall_score(y[test], pred) * recall_score(y[test], pred, pos_label=0)))
    roc_auc_score(y[test], score)
fit(X, y, 0)  # the final model on every row, as the job fits it
print(float(np.mean(g_means)))
"""


def make_data(directory: Path, cases=DEFAULT_CASES) -> dict:
    """The cases' data as ``.npz`` (X, y with 1 the minority; ``large`` also as a store), written into ``directory``."""
    import numpy as np

    from dimbsvm.datasets import load, make_imbalanced

    yeast5 = load("yeast5")
    np.savez(directory / "yeast5.npz", X=np.asarray(yeast5.X), y=np.asarray(yeast5.y))
    X, y = make_imbalanced(ENSEMBLE_ROWS, n_features=ENSEMBLE_FEATURES, minority_fraction=0.05, random_state=0)
    np.savez(directory / "ensemble.npz", X=np.asarray(X), y=np.asarray(y))
    (directory / "ensemble.yaml").write_text(ENSEMBLE_JOB.replace("DATA", str(directory / "ensemble.npz")))
    (directory / "quickstart_sklearn.py").write_text(QUICKSTART_SKLEARN)
    (directory / "ensemble_sklearn.py").write_text(ENSEMBLE_SKLEARN)
    made = {"quickstart": (ROOT / "jobs" / "quickstart.yaml", directory / "yeast5.npz"),
            "ensemble": (directory / "ensemble.yaml", directory / "ensemble.npz")}
    if "large" in cases:
        from dimbsvm.store import ingest

        X, y = make_imbalanced(LARGE_ROWS, n_features=ENSEMBLE_FEATURES, minority_fraction=0.05,
                               chunks=LARGE_ROWS // 64, random_state=0)
        store = ingest((X, y), directory / "large.zarr", dtype="float64")
        np.savez(directory / "large.npz", X=np.asarray(store.X), y=np.asarray(store.y))
        job = ENSEMBLE_JOB.replace("ensemble-2e5", "ensemble-1e7").replace("DATA", str(directory / "large.zarr"))
        (directory / "large.yaml").write_text(job)
        (directory / "large_sklearn.py").write_text(ENSEMBLE_SKLEARN)
        made["large"] = (directory / "large.yaml", directory / "large.npz")
    return made


def _timed(command, env) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, proc


def run_dimbsvm(job: Path, out: Path, env, *flags) -> dict:
    """One ``dimbsvm run``: wall seconds, G-mean, where it ran, and the seconds inside the run (its record)."""
    seconds, proc = _timed([sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--out", str(out),
                            "--no-progress", *flags], env)
    metrics = json.loads((out / "metrics.json").read_text())
    phases = json.loads((out / "resources.json").read_text())["phase_seconds"]
    where = proc.stdout.splitlines()[0]
    shutil.rmtree(out)
    return {"wall_s": seconds, "g_mean": metrics["summary"]["g_mean"]["mean"], "where": where,
            "run_s": metrics["duration_s"], "folds_s": sum(phases.values())}


def run_sklearn(script: Path, data: Path, env) -> dict:
    seconds, proc = _timed([sys.executable, str(script), str(data)], env)
    return {"wall_s": seconds, "g_mean": float(proc.stdout.split()[-1])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=tuple(TARGETS), default=list(DEFAULT_CASES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--cluster", action="store_true",
                        help="also time dimbsvm on an embedded cluster of one worker per core (--workers)")
    parser.add_argument("--note", default="", help="a sentence about the machine's state, kept in the summary")
    parser.add_argument("--title", default=TITLE,
                        help="the RESULTS.md section's title: another one keeps the sections of earlier measurements "
                             "(python -m benchmarks.results --update replaces the section of the same title)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    scratch = Path(tempfile.mkdtemp(prefix="small-jobs-"))
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    started, wall = utc_now(), time.perf_counter()
    rows = []
    try:
        cases = make_data(scratch, args.cases)
        for case in args.cases:
            job, data = cases[case]
            for repeat in range(args.repeats):
                ours = run_dimbsvm(job, scratch / f"run-{case}-{repeat}", env)
                base = run_sklearn(scratch / f"{case}_sklearn.py", data, env)
                measured = [("dimbsvm", ours), ("scikit-learn", base)]
                if args.cluster:  # what `dimbsvm run` did before it chose by size: a cluster of one worker per core
                    workers = str(os.cpu_count() or 1)
                    measured.append(("dimbsvm --workers", run_dimbsvm(job, scratch / f"run-{case}-{repeat}-cluster",
                                                                      env, "--workers", workers)))
                for method, row in measured:
                    rows.append({"case": case, "method": method, "repeat": repeat, **row})
                logger.info("%s %d: %s", case, repeat, ", ".join(f"{m} {r['wall_s']:.2f} s" for m, r in measured))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {"kind": "small_jobs", "title": args.title,
               "command": "python -m benchmarks.small_jobs " + " ".join(argv if argv is not None else sys.argv[1:]),
               "date": started, "wall_seconds": time.perf_counter() - wall, "machine": machine_info(),
               "packages": package_versions(), "rows": rows, "note": args.note,
               "description": "Each measurement a fresh process (imports, data loading and exit included; wall "
                              "time of subprocess.run), dimbsvm and scikit-learn alternated; medians of the "
                              "repeats. quickstart: `dimbsvm run jobs/quickstart.yaml` (model and report "
                              "written) against the same folds, pipeline and metrics and the final fit in plain "
                              "scikit-learn. ensemble: 2x10^5 x 20 rows (make_imbalanced, 5 % minority, .npz), "
                              "EnsembleOTHRClassifier of 10 LinearSVC members on bags of 20,000 (threshold "
                              "search without smoothing included), 3-fold CV and the final model, against 10 "
                              "LinearSVC members each fitted on a stratified bag of 20,000 rows after a min-max "
                              "scaler, a majority vote, on the same folds, and the final fit. Of which: the "
                              "seconds until the run's record is written (plan, folds, final model fitted and "
                              "saved) / of fitting and scoring; the rest is start, imports, checks, report and "
                              "exit. dimbsvm --workers: the same run on an embedded cluster of one worker per "
                              "core, what dimbsvm run did before it chose by size. large (when run): the "
                              "ensemble case on 10^7 x 20 rows, dimbsvm from a Zarr store on the embedded "
                              "cluster its size calls for, scikit-learn from .npz in one process."}
    text = render_markdown(summary)
    if args.out:
        write_summary(args.out, summary, text)
    print(text)
    return 0


def render_markdown(summary: dict) -> str:
    """Per case: both sides' median (min-max) wall seconds, the ratio against the target, the ratio of each
    measured pair, both G-means."""
    groups: dict = {}
    for row in summary["rows"]:
        groups.setdefault(row["case"], {}).setdefault(row["method"], []).append(row)
    lines = []
    if summary.get("note"):
        lines += [summary["note"], ""]
    lines += ["| case | repeats | dimbsvm s, median (min-max) | of which: until metrics.json / fitting and scoring "
              "| scikit-learn s, median (min-max) | ratio | target | ratio of each pair, median (min-max) "
              "| dimbsvm --workers s (ratio) | dimbsvm G-mean | scikit-learn G-mean | where dimbsvm ran |",
              "|" + "---|" * 12]

    def spread(rows):
        walls = [r["wall_s"] for r in rows]
        return statistics.median(walls), f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})"

    for case, methods in groups.items():
        ours, base = methods["dimbsvm"], methods["scikit-learn"]
        (m_ours, s_ours), (m_base, s_base) = spread(ours), spread(base)
        ratio = m_ours / m_base
        target = TARGETS[case]
        where = ours[0]["where"].split(":")[0]
        inside = (f"{statistics.median(r['run_s'] for r in ours):.2f} / "
                  f"{statistics.median(r['folds_s'] for r in ours):.2f}")
        # each dimbsvm run over the scikit-learn run right after it: a slow spell of the machine hits both
        pairs = [a["wall_s"] / b["wall_s"] for a, b in zip(ours, base)]
        paired = f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
        cluster = methods.get("dimbsvm --workers")
        on_cluster = f"{spread(cluster)[1]} ({spread(cluster)[0] / m_base:.2f})" if cluster else "-"
        lines.append(f"| {case} | {len(ours)} | {s_ours} | {inside} | {s_base} | {ratio:.2f} | <= {target} "
                     f"({'met' if ratio <= target else 'not met'}) | {paired} | {on_cluster} | {ours[0]['g_mean']:.4f} "
                     f"| {base[0]['g_mean']:.4f} | {where} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
