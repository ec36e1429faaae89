"""Fit the cost model that ``dimbsvm validate`` and ``dimbsvm run`` quote before a job runs.

Usage (from the repository root)::

    python -m benchmarks.cost_model --out benchmarks/results/cost-model          # measure, fit, write
    python -m benchmarks.cost_model --out DIR --no-write                          # measure and report only

Each calibration job (:data:`CASES`: LIBLINEAR, kernel and feature-stage jobs from 10^3 to 3x10^5 rows
of ``make_imbalanced`` data, 3-fold CV and the final model) runs in this process, as ``dimbsvm run``
runs a small job, and its run time (``metrics.json`` ``duration_s``: plan, folds, final model, model
and report written; after one warm-up job, not recorded) is paired with the price of the plan it submits
(:func:`dimbsvm.jobs.plan_price.price_job`: its tasks' costs summed). :func:`dimbsvm.jobs.cost.fit_cost_model`
fits the measured seconds per priced second and a fixed cost per job; the spread is the largest miss on these runs. Then :data:`HELD_OUT` jobs (other sizes and estimators,
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

#: Columns of the calibration data: the plan_price.FEATURE_UNIT a task cost stands for (wider rows cost more).
N_FEATURES = 32
LINEAR_ENSEMBLE = {"estimator": "linear_svc", "n_estimators": 10, "max_samples": 20_000, "smoothing": None,
                   "random_state": 0}
KERNEL_ENSEMBLE = {"estimator": "svc", "n_estimators": 5, "random_state": 0}
#: Kernel members on small bags of many rows: their scoring of the rows out of their bags is most of the job,
#: as in an ensemble of RBF members on a large store (named: the default members above 20,000 rows are linear).
CAPPED_KERNEL_ENSEMBLE = {"estimator": "svc", "n_estimators": 5, "max_samples": 1_000, "random_state": 0}

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
    ("ensemble_kernel_default", "ensemble_othr", {"estimator": "svc", "n_estimators": 2, "random_state": 0},
     1_000_000, []),
]


def _data(directory: Path, n: int) -> Path:
    from dimbsvm.datasets import make_imbalanced

    path = directory / f"rows-{n}.npz"
    if not path.exists():
        X, y = make_imbalanced(n, n_features=N_FEATURES, minority_fraction=0.05, random_state=0)
        np.savez(path, X=np.asarray(X), y=np.asarray(y))
    return path


def run_case(case, directory: Path) -> dict:
    """Run one calibration job in this process; its seconds and the price of its plan."""
    from dimbsvm.jobs import run_job
    from dimbsvm.jobs.data import load_job_data
    from dimbsvm.jobs.plan_price import price_job

    name, _, _, n, _ = case
    job = _job_of(case, directory)
    data = load_job_data(job.data.source)
    price = price_job(job, data)
    fixed, terms = price_terms(job, data)
    out = Path(tempfile.mkdtemp(prefix="cost-", dir=directory))
    tic = time.perf_counter()
    result = run_job(job, None, out=out / "run", progress=False)
    wall = time.perf_counter() - tic
    seconds = json.loads((Path(result.run_dir) / "metrics.json").read_text())["duration_s"]
    shutil.rmtree(out, ignore_errors=True)
    logger.info("%s n=%d: %.2f s (wall %.2f s), priced %.2f s in %d tasks", name, n, seconds, wall, price.work,
                price.n_tasks)
    return {"name": name, "estimator": case[1], "rows": n, "seconds": seconds, "n_tasks": price.n_tasks,
            "priced_work": price.work, "priced_span": price.span, "fixed": fixed, "terms": terms}


#: The task-cost constants (dimbsvm.svm.task_costs) the calibration runs identify; the others stay as set.
TASK_CONSTANTS = ("LINEAR_FIT_SECONDS", "KERNEL_FIT_SECONDS", "KERNEL_SCORE_SECONDS", "PREPARE_ROW_SECONDS",
                  "ASSEMBLE_ROW_SECONDS")


def _job_of(case, directory: Path):
    from dimbsvm.jobs import validate_job

    name, estimator, params, n, features = case
    return validate_job({"name": f"cost-{name}-{n}", "data": {"source": str(_data(directory, n))},
                         "preprocessing": {"scaler": "minmax"}, "estimator": {"name": estimator, "params": params},
                         "features": features, "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 0},
                         "metrics": ["g_mean", "auc"]})


def price_terms(job, data) -> tuple[float, list[float]]:
    """A plan's price as ``fixed + sum(c_k * term_k)`` over :data:`TASK_CONSTANTS` ``c_k``: every task's cost is
    linear in them, so each term is the price with that constant 1 and the others 0, less the fixed part."""
    import dimbsvm.svm.task_costs as task_costs
    from dimbsvm.jobs.plan_price import price_job

    kept = {name: getattr(task_costs, name) for name in TASK_CONSTANTS}

    def priced(values):
        for name in TASK_CONSTANTS:
            setattr(task_costs, name, values.get(name, 0.0))
        return price_job(job, data).work

    try:
        fixed = priced({})
        return fixed, [priced({name: 1.0}) - fixed for name in TASK_CONSTANTS]
    finally:
        for name, value in kept.items():
            setattr(task_costs, name, value)


def fit_task_constants(runs) -> dict:
    """The :data:`TASK_CONSTANTS` (and a fixed cost per job) that best price ``runs``' measured seconds:
    non-negative least squares on relative errors; the largest miss with them."""
    from scipy.optimize import nnls

    A = np.array([[1.0, *run["terms"]] for run in runs])
    t = np.array([run["seconds"] for run in runs])
    rest = t - np.array([run["fixed"] for run in runs])
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(A / scale / t[:, None], rest / t)
    coef = coef / scale
    predicted = A @ coef + (t - rest)
    return {"overhead_seconds": float(coef[0]), **{name: float(c) for name, c in zip(TASK_CONSTANTS, coef[1:])},
            "largest_miss": float(np.maximum(predicted / t, t / predicted).max())}


DESCRIPTION = ("Each job runs in one process (as dimbsvm run runs a small job), 3-fold CV and the final model "
               f"on make_imbalanced data ({N_FEATURES} features, 5 % minority), after one warm-up job; measured: the "
               "run's duration_s; priced: the sum of the task costs of the plan it submits (dimbsvm.jobs.plan_price). "
               "The constants are fitted on the 'fitted' rows; 'held out' rows were not used. The quoted range is "
               "the point estimate divided and multiplied by the spread.")


def render_markdown(summary: dict) -> list[str]:
    """The constants and the table of runs (``report.md`` and the RESULTS.md section)."""
    constants = summary["constants"]
    lines = [f"Constants: {constants['scale']:.3g} measured seconds per priced second of a plan, "
             f"{constants['overhead_seconds']:.2f} s per job; spread x{constants['spread']:.2f}.", ""]
    fitted = summary.get("task_constants")
    if fitted:
        kept = ", ".join(f"{name} {fitted[name]:.3g}" for name in TASK_CONSTANTS)
        lines += [f"The task costs these runs identify (dimbsvm/svm/task_costs.py, fitted on the same runs): {kept}; "
                  f"{fitted['overhead_seconds']:.2f} s per job; largest miss x{fitted['largest_miss']:.2f}.", ""]
    lines += ["| set | job | rows | tasks | priced s | measured s | predicted s | quoted range s | inside |",
              "|---|---|---|---|---|---|---|---|---|"]
    for label, runs in (("fitted", summary["fitted_on"]), ("held out", summary["held_out"])):
        for run in runs:
            lines.append(f"| {label} | {run['name']} | {run['rows']:,} | {run['n_tasks']} | {run['priced_work']:.2f} | "
                         f"{run['seconds']:.2f} | {run['predicted']:.2f} | {run['low']:.2f}-{run['high']:.2f} | "
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
    from dimbsvm.jobs.plan_price import PlanPrice

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
            model = fit_cost_model([(run["priced_work"], run["seconds"]) for run in fitted_on])
        held_out = [run_case(case, scratch) for case in held_out_cases]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for run in fitted_on + held_out:
        price = PlanPrice(run["n_tasks"], run["priced_work"], run["priced_span"])
        quoted = model.estimate(price)
        run.update(predicted=model.seconds(price), low=quoted.low, high=quoted.high,
                   inside=quoted.low <= run["seconds"] <= quoted.high)
    constants = ({"scale": model.scale, "overhead_seconds": model.overhead_seconds,
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
               "held_out": held_out, "task_constants": fit_task_constants(fitted_on) if fitted_on else None}
    report = "\n".join(render_markdown(summary))
    write_summary(args.out, summary, report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
