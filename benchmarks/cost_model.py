"""Fit the cost model that ``dimbsvm validate`` and ``dimbsvm run`` quote before a job runs.

Usage (from the repository root)::

    python -m benchmarks.cost_model --out benchmarks/results/cost-model          # measure, fit, write
    python -m benchmarks.cost_model --out DIR --no-write                          # measure and report only

Each calibration job (:data:`CASES`: LIBLINEAR, kernel and feature-stage jobs from 10^3 to 3x10^5 rows
of ``make_imbalanced`` data, 3-fold CV and the final model) runs in this process, as ``dimbsvm run``
runs a small job, and its run time (``metrics.json`` ``duration_s``: plan, folds, final model, model
and report written; after one warm-up job, not recorded) is paired with its row-fits by kind (:func:`dimbsvm.jobs.placement.estimate_work`).
:func:`dimbsvm.jobs.cost.fit_cost_model` fits seconds per row-fit by kind and a fixed cost per job;
the spread is the largest miss on these runs. Then :data:`HELD_OUT` jobs (other sizes and estimators,
not used in the fit) are run and their times compared with the range quoted for them. Unless
``--no-write``, the constants are written to ``dimbsvm/jobs/cost_model.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.cost_model")

N_FEATURES = 16
LINEAR_ENSEMBLE = {"estimator": "linear_svc", "n_estimators": 10, "max_samples": 20_000, "smoothing": None,
                   "random_state": 0}
KERNEL_ENSEMBLE = {"n_estimators": 5, "random_state": 0}
#: Kernel members on small bags of many rows: their scoring of the rows out of their bags is most of the job
#: (the kernel_scoring kind), as in an ensemble of RBF members on a large store.
CAPPED_KERNEL_ENSEMBLE = {"n_estimators": 5, "max_samples": 1_000, "random_state": 0}

#: (name, estimator, params, rows, feature stages) of the runs the constants are fitted on.
CASES = [
    ("linear_svc", "linear_svc", {}, 20_000, []),
    ("linear_svc", "linear_svc", {}, 100_000, []),
    ("linear_svc", "linear_svc", {}, 300_000, []),
    ("ensemble_linear", "ensemble_othr", LINEAR_ENSEMBLE, 40_000, []),
    ("ensemble_linear", "ensemble_othr", LINEAR_ENSEMBLE, 100_000, []),
    ("ensemble_linear", "ensemble_othr", LINEAR_ENSEMBLE, 300_000, []),
    ("svc_balanced", "svc_balanced", {}, 1_000, []),
    ("svc_balanced", "svc_balanced", {}, 3_000, []),
    ("svc_balanced", "svc_balanced", {}, 6_000, []),
    ("ensemble_kernel", "ensemble_othr", KERNEL_ENSEMBLE, 2_000, []),
    ("ensemble_kernel_capped", "ensemble_othr", CAPPED_KERNEL_ENSEMBLE, 30_000, []),
    ("ensemble_kernel_capped", "ensemble_othr", CAPPED_KERNEL_ENSEMBLE, 100_000, []),
    ("othr", "othr", {}, 2_000, []),
    ("similarity_linear", "linear_svc", {}, 3_000, [{"name": "similarity", "params": {"references": 50}}]),
    ("similarity_linear", "linear_svc", {}, 10_000, [{"name": "similarity", "params": {"references": 50}}]),
]
#: Runs not used in the fit: is each inside the range quoted for it?
HELD_OUT = [
    ("linear_svc", "linear_svc", {}, 200_000, []),
    ("ensemble_linear", "ensemble_othr", LINEAR_ENSEMBLE, 200_000, []),
    ("svc_balanced", "svc_balanced", {}, 4_000, []),
    ("othr", "othr", {}, 3_000, []),
    ("ensemble_kernel", "ensemble_othr", KERNEL_ENSEMBLE, 4_000, []),
    ("ensemble_kernel_capped", "ensemble_othr", dict(CAPPED_KERNEL_ENSEMBLE, max_samples=2_000), 60_000, []),
]

#: With ``--large``: held-out kernel ensembles of a million rows (their quotes are minutes to half an hour here).
LARGE_HELD_OUT = [
    ("ensemble_kernel_capped", "ensemble_othr", CAPPED_KERNEL_ENSEMBLE, 1_000_000, []),
    ("ensemble_kernel_capped", "ensemble_othr", dict(CAPPED_KERNEL_ENSEMBLE, n_estimators=3, max_samples=2_000),
     1_000_000, []),
    ("ensemble_kernel_default", "ensemble_othr", {"n_estimators": 2, "random_state": 0}, 1_000_000, []),
]


def _data(directory: Path, n: int) -> Path:
    from dimbsvm.datasets import make_imbalanced

    path = directory / f"rows-{n}.npz"
    if not path.exists():
        X, y = make_imbalanced(n, n_features=N_FEATURES, minority_fraction=0.05, random_state=0)
        np.savez(path, X=np.asarray(X), y=np.asarray(y))
    return path


def run_case(case, directory: Path) -> dict:
    """Run one calibration job in this process; its seconds and row-fits by kind."""
    from dimbsvm.jobs import run_job, validate_job
    from dimbsvm.jobs.data import load_job_data
    from dimbsvm.jobs.placement import estimate_work

    name, estimator, params, n, features = case
    spec = {"name": f"cost-{name}-{n}", "data": {"source": str(_data(directory, n))},
            "preprocessing": {"scaler": "minmax"}, "estimator": {"name": estimator, "params": params},
            "features": features, "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 0},
            "metrics": ["g_mean", "auc"]}
    job = validate_job(spec)
    data = load_job_data(job.data.source)
    work = estimate_work(job, np.asarray(data.y), n_features=int(np.prod(data.X.shape[1:])))
    out = Path(tempfile.mkdtemp(prefix="cost-", dir=directory))
    tic = time.perf_counter()
    result = run_job(job, None, out=out / "run", progress=False)
    wall = time.perf_counter() - tic
    seconds = json.loads((Path(result.run_dir) / "metrics.json").read_text())["duration_s"]
    shutil.rmtree(out, ignore_errors=True)
    logger.info("%s n=%d: %.2f s (wall %.2f s), %s", name, n, seconds, wall, work.describe())
    return {"name": name, "estimator": estimator, "rows": n, "seconds": seconds, "n_fits": work.n_fits,
            "row_fits": work.kind_row_fits()}


DESCRIPTION = ("Each job runs in one process (as dimbsvm run runs a small job), 3-fold CV and the final model "
               "on make_imbalanced data (16 features, 5 % minority), after one warm-up job; measured: the run's "
               "duration_s. The constants are fitted on the 'fitted' rows; 'held out' rows were not used. The "
               "quoted range is the point estimate divided and multiplied by the spread.")


def render_markdown(summary: dict) -> list[str]:
    """The constants and the table of runs (``report.md`` and the RESULTS.md section)."""
    constants = summary["constants"]
    per_kind = ", ".join(f"{kind} {value:.3g} s" for kind, value in constants["seconds_per_row_fit"].items())
    lines = [f"Constants (seconds per row-fit on one core): {per_kind}; {constants['overhead_seconds']:.2f} s per "
             f"job; spread x{constants['spread']:.2f}.", "",
             "| set | job | rows | fits | measured s | predicted s | quoted range s | inside |",
             "|---|---|---|---|---|---|---|---|"]
    for label, runs in (("fitted", summary["fitted_on"]), ("held out", summary["held_out"])):
        for run in runs:
            lines.append(f"| {label} | {run['name']} | {run['rows']:,} | {run['n_fits']} | {run['seconds']:.2f} | "
                         f"{run['predicted']:.2f} | {run['low']:.2f}-{run['high']:.2f} | "
                         f"{'yes' if run['inside'] else 'no'} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--no-write", action="store_true", help="do not write dimbsvm/jobs/cost_model.json")
    parser.add_argument("--note", default="")
    parser.add_argument("--large", action="store_true", help="also the million-row held-out jobs (LARGE_HELD_OUT)")
    parser.add_argument("--held-out-only", action="store_true",
                        help="run only the held-out jobs, quoted by the shipped dimbsvm/jobs/cost_model.json (no fit)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from dimbsvm.jobs.cost import COST_MODEL_FILE, fit_cost_model, load_cost_model
    from dimbsvm.jobs.placement import WorkEstimate

    started, tic = utc_now(), time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="cost-model-"))
    held_out_cases = (HELD_OUT if not args.held_out_only else []) + (LARGE_HELD_OUT if args.large else [])
    try:
        run_case(("warm-up", "svc_balanced", {}, 1_000, [{"name": "similarity", "params": {"references": 50}}]),
                 scratch)  # imports and first calls paid once, as in a process that runs many jobs
        if args.held_out_only:
            fitted_on, model = [], load_cost_model()
        else:
            fitted_on = [run_case(case, scratch) for case in CASES]
            model = fit_cost_model([(run["row_fits"], run["seconds"]) for run in fitted_on])
        held_out = [run_case(case, scratch) for case in held_out_cases]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for run in fitted_on + held_out:
        work = WorkEstimate(run["n_fits"], sum(run["row_fits"].values()), tuple(run["row_fits"].items()))
        quoted = model.estimate(work)
        run.update(predicted=model.seconds(work), low=quoted.low, high=quoted.high,
                   inside=quoted.low <= run["seconds"] <= quoted.high)
    constants = ({"seconds_per_row_fit": model.seconds_per_row_fit, "overhead_seconds": model.overhead_seconds,
                  "spread": model.spread, "fitted": started, "command": "python -m benchmarks.cost_model",
                  "runs": len(fitted_on)}
                 if not args.held_out_only else json.loads(COST_MODEL_FILE.read_text()))
    if not args.no_write and not args.held_out_only:
        COST_MODEL_FILE.write_text(json.dumps(constants, indent=2) + "\n")
    summary = {"kind": "cost_model", "title": "Cost model: the time range validate and run quote before a job",
               "description": DESCRIPTION + (" " + args.note if args.note else ""),
               "command": "python -m benchmarks.cost_model " + shlex.join(argv if argv is not None else sys.argv[1:]),
               "date": started, "wall_seconds": time.perf_counter() - tic, "machine": machine_info(),
               "packages": package_versions(), "constants": constants, "fitted_on": fitted_on,
               "held_out": held_out}
    report = "\n".join(render_markdown(summary))
    write_summary(args.out, summary, report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
