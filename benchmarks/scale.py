"""Cost at scale: time and memory per stage on synthetic stores, against one-machine peers.

Usage (from the repository root)::

    python -m benchmarks.scale --sizes 100000 1000000 --workers 1 2 --out benchmarks/results/scale
    python -m benchmarks.results benchmarks/results/keel-public benchmarks/results/scale

For every size n (``make_imbalanced``: 32 features, 1 % minority) and every
embedded cluster (1 or 2 single-threaded worker processes) the script runs
the stages of a dimbsvm job over a Zarr store and records wall time and the
cluster's peak process memory (``distributed.diagnostics.MemorySampler``,
summed over workers) of each:

- ``ingest``: generate chunk by chunk and write the store;
- ``knn``: the stored kNN graph (k = 10, partitioned build) when
  ``dimbsvm.model_selection.graph_build.knn_graph`` exists;
- ``features``: similarity features, distance blocks to 64 references written to the store;
- ``ensemble_fit``: 10 OTHR members, one task each; a member reads only its
  bag (all training minority rows plus as many majority rows) from the store
  and fits ``LinearSVC`` on it;
- ``predict``: the mean shifted member margin over the test rows, chunk by chunk.

Quality is measured on the last 20 % of rows (the generator's rows are i.i.d.).
In the same process, the peers a user would try on one machine where they fit
(``LinearSVC(class_weight="balanced")`` and imbalanced-learn's
``BalancedBaggingClassifier(LinearSVC)``) are trained on the same training rows
in memory, so the table holds ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn.svm import LinearSVC

from dimbsvm.datasets import make_imbalanced
from dimbsvm.parallel import map_tasks
from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.store import StoreRows, ingest
from dimbsvm.svm.ensemble import fit_member

from dimbsvm.environment import machine_info, package_versions, peak_rss_bytes, utc_now

logger = logging.getLogger("benchmarks.scale")

N_FEATURES = 32
MINORITY = 0.01
N_MEMBERS = 10
TEST_FRACTION = 0.2


def balanced_member(X, y, seed, *, train_rows, pos_label):
    """Task body: one OTHR member on a balanced subsample of the training rows.

    Only the subsample's rows are read from the store, so the task holds one
    bag, not the training set.
    """
    rng = np.random.default_rng(seed)
    labels = y[train_rows]
    minority = train_rows[labels == pos_label]
    majority = train_rows[labels != pos_label]
    chosen = np.sort(np.concatenate([minority, rng.choice(majority, size=minority.size, replace=False)]))
    X_bag = X[chosen]
    return fit_member(X_bag, y[chosen], int(seed), pos_label=pos_label,
                      estimator=LinearSVC(C=1.0, dual=False), bootstrap="plain", perturbation=0.0)


def ensemble_block(block, members):
    """Mean shifted member margin of one chunk of rows (positive = minority)."""
    X = np.asarray(block, dtype=np.float64)
    return np.mean([m.shifted_margin(X) for m in members], axis=0)


def run_size(n, n_workers, workdir: Path, *, knn: bool) -> dict:
    """All stages for one (n, workers) configuration on a fresh embedded cluster."""
    from distributed import Client, LocalCluster
    from distributed.diagnostics import MemorySampler

    sampler = MemorySampler()
    timings = {}
    chunk_rows = min(250_000, n)
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=None,
                      memory_limit="8GiB") as cluster, Client(cluster) as client:

        def stage(name, func):
            start = time.perf_counter()
            with sampler.sample(name, client=client, interval=0.2):
                result = func()
            timings[name] = time.perf_counter() - start
            logger.info("n=%d workers=%d %s: %.1f s", n, n_workers, name, timings[name])
            return result

        store = workdir / f"syn-{n}.zarr"
        shutil.rmtree(store, ignore_errors=True)
        X, y = make_imbalanced(n, n_features=N_FEATURES, minority_fraction=MINORITY, chunks=chunk_rows,
                               random_state=0)
        stored = stage("ingest", lambda: ingest((X, y), store, chunk_rows=chunk_rows))
        y_all = np.asarray(stored.y.compute())
        n_train = int(n * (1 - TEST_FRACTION))
        train_rows = np.arange(n_train)

        if knn:
            try:
                from dimbsvm.model_selection.graph_build import knn_graph
            except ImportError:
                knn_graph = None
            if knn_graph is not None:
                stage("knn", lambda: knn_graph(stored.X, n_neighbors=10, random_state=0, store=store))

        from dimbsvm.features import write_distance_blocks

        rng = np.random.default_rng(0)
        references = stored.X[np.sort(rng.choice(n_train, 64, replace=False))].compute().astype(np.float64)
        stage("features", lambda: write_distance_blocks(store, references, "euclidean", store=store,
                                                        name="scale", dtype="float32", fingerprint=f"scale-{n}"))

        rows = StoreRows(store, stored.X.shape)
        members = stage("ensemble_fit", lambda: map_tasks(
            balanced_member, [{"seed": s} for s in range(N_MEMBERS)], client=client,
            shared={"X": rows, "y": y_all, "train_rows": train_rows, "pos_label": 1},
            progress=False, label="members"))

        test_X = stored.X[n_train:]
        scores = da.map_blocks(ensemble_block, test_X, members, drop_axis=1, dtype=np.float64)
        decision = stage("predict", lambda: scores.compute())
        y_test = y_all[n_train:]
        y_pred = (decision > 0).astype(int)
        peak = {name: float(df.max().max()) for name, df in
                ((name, sampler.to_pandas(align=False)[name].dropna().to_frame()) for name in timings)}
        worker_peaks = client.run(peak_rss_bytes)
    shutil.rmtree(store, ignore_errors=True)
    return {
        "n": n, "workers": n_workers, "seconds": timings, "peak_cluster_memory_bytes": peak,
        "peak_worker_rss_bytes": max(worker_peaks.values()),
        "quality": {"g_mean": g_mean(y_test, y_pred), "f_measure": f_measure(y_test, y_pred)},
    }


def run_peers(n) -> list[dict]:
    """One-machine peers on the same rows, in memory, in this process."""
    X, y = make_imbalanced(n, n_features=N_FEATURES, minority_fraction=MINORITY, chunks=min(250_000, n),
                           random_state=0)
    X, y = np.asarray(X.compute(), dtype=np.float64), np.asarray(y.compute())
    n_train = int(n * (1 - TEST_FRACTION))
    out = []
    peers = {"LinearSVC(class_weight='balanced')": lambda: LinearSVC(C=1.0, dual=False, class_weight="balanced")}
    try:
        from imblearn.ensemble import BalancedBaggingClassifier

        peers["BalancedBaggingClassifier(LinearSVC, 10)"] = lambda: BalancedBaggingClassifier(
            estimator=LinearSVC(C=1.0, dual=False), n_estimators=N_MEMBERS, random_state=0)
    except ImportError:
        logger.warning("imbalanced-learn not installed: BalancedBagging peer skipped")
    for name, make in peers.items():
        start = time.perf_counter()
        model = make().fit(X[:n_train], y[:n_train])
        fit = time.perf_counter() - start
        start = time.perf_counter()
        y_pred = model.predict(X[n_train:])
        predict = time.perf_counter() - start
        out.append({"n": n, "peer": name, "seconds": {"fit": fit, "predict": predict},
                    "quality": {"g_mean": g_mean(y[n_train:], y_pred), "f_measure": f_measure(y[n_train:], y_pred)}})
        logger.info("n=%d peer %s: fit %.1f s", n, name, fit)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--peers-max-n", type=int, default=1_000_000, help="skip peers above this n")
    parser.add_argument("--no-knn", action="store_true", help="skip the kNN stage")
    parser.add_argument("--out", default="benchmarks/results/scale")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="dimbsvm-scale-"))
    runs, peers = [], []
    try:
        for n in args.sizes:
            for workers in args.workers:
                runs.append(run_size(n, workers, workdir, knn=not args.no_knn))
            if n <= args.peers_max_n:
                peers.extend(run_peers(n))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {"kind": "scale", "command": "python -m benchmarks.scale " + " ".join(sys.argv[1:] if argv is None
                                                                                    else argv),
               "date": utc_now(), "machine": machine_info(), "packages": package_versions(), "runs": runs, "peers": peers}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(render_markdown(summary))
    return 0


def render_markdown(summary: dict) -> str:
    """The scale tables, as RESULTS.md shows them."""
    lines = ["| n | workers | ingest s | knn s | features s | ensemble fit s | predict s | peak cluster GiB "
             "| G-mean | F-measure |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary["runs"]:
        s, gib = r["seconds"], max(r["peak_cluster_memory_bytes"].values()) / 2**30
        lines.append(f"| {r['n']:,} | {r['workers']} | {s['ingest']:.1f} | {s.get('knn', float('nan')):.1f} | "
                     f"{s['features']:.1f} | {s['ensemble_fit']:.1f} | {s['predict']:.1f} | {gib:.2f} | "
                     f"{100 * r['quality']['g_mean']:.1f} | {100 * r['quality']['f_measure']:.1f} |")
    lines += ["", "| n | peer (one process, in memory) | fit s | predict s | G-mean | F-measure |",
              "|---|---|---|---|---|---|"]
    for p in summary["peers"]:
        lines.append(f"| {p['n']:,} | {p['peer']} | {p['seconds']['fit']:.1f} | {p['seconds']['predict']:.2f} | "
                     f"{100 * p['quality']['g_mean']:.1f} | {100 * p['quality']['f_measure']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
