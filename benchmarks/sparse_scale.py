"""Sparse text-like data at scale: svmlight ingest and a job on two workers, against scikit-learn in one process.

Usage (from the repository root)::

    python -m benchmarks.sparse_scale --sizes 100000 1000000 --cache CACHE_DIR --out benchmarks/results/sparse-1e6

The data (generated once per size into ``--cache``, one svmlight file per 10^6 rows):
:func:`dimbsvm.datasets.make_text_like` rows, word counts over 10^6 columns with Zipf frequencies,
about 30 words a row, 5 % minority drawing a fifth of its words from 50 topic columns.

Each measurement runs in a fresh process:

- ``ingest``: ``dimbsvm.store.ingest("part-*.svm", STORE)`` on an embedded cluster of two
  single-threaded worker processes (start not timed): the files scanned and parsed block by block on
  the workers into a sparse store;
- ``read``: scikit-learn's ``load_svmlight_files`` of the same files in one process, the baseline;
- ``job``: ``dimbsvm run`` of the OTHR ensemble (10 ``LinearSVC`` members on class-balanced bags,
  ``maxabs``, 3-fold CV and the final model) over the store with ``--workers 2``;
- ``fit``: the same folds (``StratifiedBlockKFold(3, random_state=0)``), ``MaxAbsScaler`` ->
  ``LinearSVC(class_weight="balanced")`` per fold and on all rows, in one process (scikit-learn's
  own read not timed), the baseline the issue names.

Recorded: wall seconds, and the peak resident memory of the driver (the process that ingests, or
``dimbsvm run``) and of every worker process, sampled every 50 ms with psutil.
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

import numpy as np

from benchmarks.ingest_scale import PeakSampler, _vm_hwm
from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.sparse_scale")

N_FEATURES = 1_000_000
FILE_ROWS = 1_000_000
JOB = {"name": "sparse-scale", "preprocessing": {"scaler": "maxabs"},
       "estimator": {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 10,
                                                         "random_state": 0}},
       "cv": {"n_splits": 3, "random_state": 0}, "metrics": ["g_mean", "auc"]}


def make_data(cache: Path, n: int) -> Path:
    """The svmlight files of ``n`` rows under ``cache``, written once."""
    from dimbsvm.datasets.text_like import write_text_like_svmlight

    directory = cache / f"textlike-{n}"
    done = directory / ".complete"
    if done.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for part, start in enumerate(range(0, n, FILE_ROWS)):
        # a file of rows start..: the generator's seed is per file, so the files differ
        write_text_like_svmlight(directory / f"part-{part:04d}.svm", min(FILE_ROWS, n - start), N_FEATURES,
                                 random_state=part)
    done.write_text("")
    return directory


# -- one measurement (in its own process) ------------------------------------------------------------------


def measure(spec: dict) -> dict:
    kind = spec["kind"]
    files = sorted(str(p) for p in Path(spec["data"]).glob("part-*.svm"))
    if kind == "ingest":
        import psutil
        from distributed import Client, LocalCluster

        from dimbsvm.store import ingest

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            workers = sorted(client.run(os.getpid).values())
            before = psutil.Process().memory_info().rss
            with PeakSampler([os.getpid(), *workers]) as sampler:
                start = time.perf_counter()
                stored = ingest(str(Path(spec["data"]) / "part-*.svm"), spec["store"], n_features=N_FEATURES)
                wall = time.perf_counter() - start
        return {"wall_s": wall, "nnz": int(stored.meta["nnz"]), "chunks": len(stored.X.chunks[0]),
                "client_rss_before": before, "client_peak": sampler.peaks[os.getpid()],
                "worker_peaks": [sampler.peaks[pid] for pid in workers], "store_bytes": _bytes(spec["store"])}
    if kind == "read":
        from sklearn.datasets import load_svmlight_files

        start = time.perf_counter()
        parts = load_svmlight_files(files, n_features=N_FEATURES)
        wall = time.perf_counter() - start
        return {"wall_s": wall, "nnz": int(sum(X.nnz for X in parts[::2])), "client_peak": _vm_hwm()}
    if kind == "fit":
        import scipy.sparse as sp
        from sklearn.datasets import load_svmlight_files
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import MaxAbsScaler
        from sklearn.svm import LinearSVC

        from dimbsvm.metrics import g_mean
        from dimbsvm.model_selection import StratifiedBlockKFold

        parts = load_svmlight_files(files, n_features=N_FEATURES)
        X, y = sp.vstack(parts[::2], format="csr"), np.concatenate(parts[1::2])
        del parts
        start = time.perf_counter()
        scores = []
        for train, test in StratifiedBlockKFold(3, random_state=0).split(X, y):
            model = make_pipeline(MaxAbsScaler(), LinearSVC(class_weight="balanced")).fit(X[train], y[train])
            scores.append(g_mean(y[test], model.predict(X[test])))
        make_pipeline(MaxAbsScaler(), LinearSVC(class_weight="balanced")).fit(X, y)
        return {"wall_s": time.perf_counter() - start, "g_mean": float(np.mean(scores)), "client_peak": _vm_hwm()}
    raise ValueError(kind)


def measure_job(spec: dict) -> dict:
    """``dimbsvm run`` over the store on two workers, its process tree sampled from here."""
    import psutil
    import yaml

    job = Path(spec["scratch"]) / "job.yaml"
    job.write_text(yaml.safe_dump(dict(JOB, data={"source": spec["store"]})))
    out = Path(spec["scratch"]) / f"run-{spec['n']}-{time.time_ns()}"
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--workers", "2", "--out",
                             str(out), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    driver, peaks = psutil.Process(proc.pid), {}
    while proc.poll() is None:
        try:
            tree = [driver, *driver.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for process in tree:
            try:
                peaks[process.pid] = max(peaks.get(process.pid, 0), process.memory_info().rss)
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"dimbsvm run failed:\n{stderr[-3000:]}")
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    others = sorted((rss for pid, rss in peaks.items() if pid != proc.pid), reverse=True)
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": wall, "g_mean": summary["g_mean"]["mean"], "auc": summary["auc"]["mean"],
            "client_peak": peaks.get(proc.pid, 0), "worker_peaks": others[:2]}


def _bytes(path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# -- the whole benchmark ---------------------------------------------------------------------------------------


def _run_one(spec: dict) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.sparse_scale", "--one", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measurement {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--fit-max-rows", type=int, default=10_000_000,
                        help="the scikit-learn fit baseline runs up to this many rows")
    parser.add_argument("--cache", default=None, help="where the generated files are kept between runs")
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = Path(args.cache or tempfile.mkdtemp(prefix="sparse-cache-"))
    scratch = Path(tempfile.mkdtemp(prefix="sparse-scratch-"))
    started, wall = utc_now(), time.perf_counter()
    rows = []
    try:
        for n in args.sizes:
            tic = time.perf_counter()
            data = make_data(cache, n)
            logger.info("%d rows generated in %.0f s (%.0f MB)", n, time.perf_counter() - tic, _bytes(data) / 1e6)
            for repeat in range(args.repeats):
                store = scratch / f"store-{n}.zarr"
                shutil.rmtree(store, ignore_errors=True)
                spec = {"n": n, "data": str(data), "store": str(store), "scratch": str(scratch)}
                row = {"n": n, "repeat": repeat, "file_bytes": _bytes(data)}
                row["ingest"] = _run_one(dict(spec, kind="ingest"))
                row["read"] = _run_one(dict(spec, kind="read"))
                row["job"] = measure_job(spec)
                if n <= args.fit_max_rows:
                    row["fit"] = _run_one(dict(spec, kind="fit"))
                rows.append(row)
                logger.info("%d rows: ingest %.1f s, read %.1f s, job %.1f s, fit %s s", n, row["ingest"]["wall_s"],
                            row["read"]["wall_s"], row["job"]["wall_s"],
                            f"{row['fit']['wall_s']:.1f}" if "fit" in row else "-")
                shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sizes = " and ".join(f"{n:,}" for n in args.sizes)
    summary = {"kind": "sparse_scale",
               "title": f"Sparse text-like data, {sizes} rows x 10^6 columns: svmlight ingest and the OTHR ensemble "
                        "job on two workers, against scikit-learn in one process (issue 52, item 5)",
               "command": "python -m benchmarks.sparse_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
               "date": started, "wall_seconds": time.perf_counter() - wall, "machine": machine_info(),
               "packages": package_versions(), "rows": rows,
               "description": "Each measurement a fresh process; medians of the repeats. Data: make_text_like word "
                              "counts (10^6 columns, about 30 words a row, 5 % minority), one svmlight file per 10^6 "
                              "rows. ingest: dimbsvm.store.ingest of the files on an embedded cluster of two "
                              "single-threaded worker processes (two passes over the bytes: scan, then parse and "
                              "write), against scikit-learn's load_svmlight_files in one process. job: dimbsvm run of "
                              "the OTHR ensemble (10 LinearSVC members, maxabs, 3-fold CV and the final model) over "
                              "the sparse store with --workers 2, against MaxAbsScaler -> LinearSVC(class_weight="
                              "'balanced') on the same folds and all rows in one process (its read not timed). "
                              "Memory: peak resident set sampled every 50 ms; driver: the ingesting process or "
                              "dimbsvm run; workers: the two largest other processes of the run."}
    text = render_markdown(summary)
    if args.out:
        write_summary(args.out, summary, text)
    print(text)
    return 0


def render_markdown(summary: dict) -> str:
    """One line per size: ingest against scikit-learn's read, the job against scikit-learn's fit (medians)."""
    lines = ["| rows | file MB | stored values | ingest s (MB/s) | scikit-learn read s (MB/s) | ingest driver peak "
             "(growth) MB | ingest worker peak MB | scikit-learn read peak MB | job s | job driver peak MB | job "
             "worker peak MB | job G-mean / AUC | scikit-learn fit s | scikit-learn fit peak MB | scikit-learn "
             "G-mean |", "|" + "---|" * 15]
    groups: dict = {}
    for row in summary["rows"]:
        groups.setdefault(row["n"], []).append(row)

    def med(rows, part, key, scale=1.0):
        values = [r[part][key] for r in rows if part in r]
        return statistics.median(values) / scale if values else float("nan")

    for n, rows in sorted(groups.items()):
        mb = rows[0]["file_bytes"] / 1e6
        ingest_s, read_s = med(rows, "ingest", "wall_s"), med(rows, "read", "wall_s")
        growth = med(rows, "ingest", "client_peak", 1e6) - med(rows, "ingest", "client_rss_before", 1e6)
        worker = statistics.median(max(r["ingest"]["worker_peaks"]) for r in rows) / 1e6
        job_worker = statistics.median(max(r["job"]["worker_peaks"] or [0]) for r in rows) / 1e6
        fit = "-" if not any("fit" in r for r in rows) else f"{med(rows, 'fit', 'wall_s'):.1f}"
        fit_peak = "-" if fit == "-" else f"{med(rows, 'fit', 'client_peak', 1e6):.0f}"
        fit_g = "-" if fit == "-" else f"{med(rows, 'fit', 'g_mean'):.4f}"
        lines.append(
            f"| {n:,} | {mb:.0f} | {int(med(rows, 'ingest', 'nnz')):,} | {ingest_s:.1f} ({mb / ingest_s:.1f}) "
            f"| {read_s:.1f} ({mb / read_s:.1f}) | {med(rows, 'ingest', 'client_peak', 1e6):.0f} ({growth:+.0f}) "
            f"| {worker:.0f} | {med(rows, 'read', 'client_peak', 1e6):.0f} | {med(rows, 'job', 'wall_s'):.1f} "
            f"| {med(rows, 'job', 'client_peak', 1e6):.0f} | {job_worker:.0f} "
            f"| {med(rows, 'job', 'g_mean'):.4f} / {med(rows, 'job', 'auc'):.4f} | {fit} | {fit_peak} | {fit_g} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
