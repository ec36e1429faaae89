"""Linear HPC-SVM at scale: the kNN graph once, then HPC fits against LinearSVC.

Data: ``make_imbalanced(n, 32, minority_fraction=0.01, chunks=100_000, random_state=0)``.
Every measured run is its own Python process, so its peak resident memory
(``VmHWM``, :func:`dimbsvm.environment.peak_rss_bytes`) is its own; within one repeat the methods run one after the
other, so load from other users of the machine falls on all of them alike.

``knn`` (once per ``n``, cached in ``--cache`` and reused by every fit)
    The rows in memory, ``nearest_neighbors(X, X, k + 1)`` (pynndescent above
    20,000 rows), self removed; recall against exact neighbours on 500
    sampled rows. With ``--graph random`` instead: ``k`` distinct random
    other rows per row, a stand-in when NN-descent on the full data would
    take too long. On this data (rows in random order) true neighbours are
    spread over all chunks just as random ones are, so the HPC pass does the
    same work for either; but the model is then regularised by noise, so its
    G-mean is only a smoke check.
``hpc_memory``
    ``HPCClassifier(solver="liblinear").fit(X, y, neighbors=...)`` on NumPy
    rows: the same input as LinearSVC, the fair time comparison.
``hpc_dask_liblinear`` / ``hpc_dask_sgd``
    The same fit with the lazy generator as Dask input (chunks are generated
    when a task needs them, never persisted; threaded scheduler).
    ``liblinear`` gathers the ``n x 33`` transformed rows into the process;
    ``sgd`` streams them one chunk at a time (5 epochs). ``generator_one_pass``
    is the generator's own time for one pass; the fit makes 3 passes
    (liblinear) or 3 + 5 (sgd).
``hpc_cluster_sgd_exchange``
    The chunk-bounded path: ``solver="sgd"`` with ``exchange_dir`` (the
    hyperedges' rows through scratch files on disk), the neighbour array read
    from a Zarr copy of the cached graph a chunk at a time, on a
    ``LocalCluster`` of 2 worker processes (1 thread each) whose memory limit
    (``--worker-memory``, default 1 GiB) is below the data's size at 10^7. The
    rows are generated inside the tasks. Reports the calling process's peak
    memory, each worker's (``VmHWM``), whether a worker was restarted, and
    CPU seconds of the caller and workers together.
``linear_svc``
    The rows in memory, ``LinearSVC(loss="hinge")``: HPC's solver on the
    untransformed rows (the problem HPC with ``c1=0`` solves); and
    ``LinearSVC()`` with its default squared hinge (``dual="auto"`` picks the
    primal solver here), what a user would run. The hinge loss's dual solver
    does not converge on this data and stops at its 1,000 iterations (29 s at
    10^5, so about 50 CPU minutes at 10^7): leave it out of runs at 10^7.

All use ``C=1`` and ``class_weight="balanced"`` (at 1 % minority an unweighted
SVM predicts the majority everywhere, G-mean 0). Runs use
``OPENBLAS_NUM_THREADS=1``: on a shared machine multi-threaded BLAS inside
Dask's threads oversubscribes the cores and its timings swing tenfold.
``cpu_seconds`` (user + system time of the process) is reported beside the
wall time, as it is less sensitive to other load; so is the 1-minute load
average when each run started.

Usage (from the repository root)::

    python -m benchmarks.hpc_scale --n 100000 1000000 --repeats 3
    python -m benchmarks.hpc_scale --n 10000000 --graph random --repeats 1 \\
        --methods hpc_dask_sgd hpc_dask_liblinear linear_svc    # merged into the same summary
    python -m benchmarks.hpc_scale --n 10000000 --graph random --repeats 1 \\
        --methods hpc_cluster_sgd_exchange --worker-memory 1GiB
    python -m benchmarks.hpc_scale --stage hpc_dask_sgd --n 100000   # one run, JSON on stdout

The results directory (``--out``, default ``benchmarks/results/hpc-scale``)
gets ``summary.json`` (``"kind": "hpc_scale"``), which
:func:`render_markdown` turns into the tables of ``RESULTS.md``. Runs of a
new invocation replace those of the same ``(n, graph, method)`` and keep the
others; ``command`` lists every invocation that contributed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import dask
import numpy as np

from dimbsvm.datasets import make_imbalanced
from dimbsvm.graph.hypergraph import neighbors_excluding_self
from dimbsvm.graph.knn import nearest_neighbors
from dimbsvm.metrics import g_mean

from dimbsvm.environment import machine_info, package_versions, peak_rss_bytes, utc_now

__all__ = ["main", "render_markdown"]

logger = logging.getLogger(__name__)

K = 5
CHUNKS = 100_000
N_FEATURES = 32
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "hpc-scale"
#: The reference the HPC times are divided by: what a user would run.
BASELINE = "linear_svc_squared_hinge"


#: Section heading in RESULTS.md.
TITLE = "HPC-SVM at scale: linear HPC against LinearSVC, 10^5 to 10^7 rows (make_imbalanced, 32 features)"

def _data(n):
    return make_imbalanced(n, N_FEATURES, minority_fraction=0.01, chunks=CHUNKS, random_state=0)


def _peak_gib():
    return peak_rss_bytes() / 2**30


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _random_graph(n, seed=0):
    rng = np.random.default_rng(seed)
    neighbors = rng.integers(0, n - 1, size=(n, K))
    neighbors += neighbors >= np.arange(n)[:, None]  # skip the row itself
    while True:
        ordered = np.sort(neighbors, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if not bad.size:
            return neighbors
        redo = rng.integers(0, n - 1, size=(bad.size, K))
        neighbors[bad] = redo + (redo >= bad[:, None])


def _graph_path(cache, graph, n):
    return cache / f"neighbors_{graph}_{n}.npy"


def stage_knn(n, cache, graph):
    """Build the neighbour array once; its timing is stored beside it for reuse."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    if graph == "random":
        neighbors = _random_graph(n)
        result = {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu}
    else:
        X, _ = _data(n)
        X = X.compute()
        start, cpu = time.perf_counter(), _cpu_seconds()
        found, _ = nearest_neighbors(X, X, K + 1, random_state=0)
        result = {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu}
        neighbors = neighbors_excluding_self(found)
        rows = np.random.default_rng(0).choice(n, size=min(500, n), replace=False)
        exact = neighbors_excluding_self(
            nearest_neighbors(X, X[rows], K + 1, method="exact")[0], rows)
        result["recall_at_5"] = float(np.mean([len(set(a) & set(b)) / K
                                               for a, b in zip(neighbors[rows], exact)]))
    np.save(_graph_path(cache, graph, n), neighbors)
    return {**result, "graph": graph}


def _fit_hpc(n, cache, graph, *, dask_input, solver):
    from dimbsvm.svm.hpc import HPCClassifier

    neighbors = np.load(_graph_path(cache, graph, n))
    X, y = _data(n)
    result = {}
    with dask.config.set(scheduler="threads"):
        if dask_input:
            start = time.perf_counter()
            X.sum().compute()
            result["generator_one_pass"] = time.perf_counter() - start
        else:
            X, y = dask.compute(X, y)
        clf = HPCClassifier(C=1.0, class_weight="balanced", solver=solver, random_state=0)
        start, cpu = time.perf_counter(), _cpu_seconds()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(X, y, neighbors=neighbors)
        result.update(seconds=time.perf_counter() - start, cpu_seconds=_cpu_seconds() - cpu)
        peak = _peak_gib()  # before predict, which computes the labels again
        y_true = y.compute() if dask_input else y
        score = g_mean(y_true, clf.predict(X))
    return {**result, "peak_rss_gib": peak, "stages": clf.timings_, "n_iter": clf.n_iter_,
            "objective": clf.objective_, "warnings": len(caught), "train_g_mean": float(score)}


def _neighbors_zarr(cache, graph, n):
    """A Zarr copy of the cached graph, chunked like the rows, written once."""
    import zarr

    path = _graph_path(cache, graph, n).with_suffix(".zarr")
    if not path.exists():
        neighbors = np.load(_graph_path(cache, graph, n), mmap_mode="r")
        array = zarr.create_array(str(path) + ".tmp", shape=neighbors.shape, dtype=np.int32,
                                  chunks=(CHUNKS, K))
        for start in range(0, n, CHUNKS):
            array[start:start + CHUNKS] = neighbors[start:start + CHUNKS]
        os.rename(str(path) + ".tmp", path)
    return path


def _worker_usage():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"peak_gib": peak_rss_bytes() / 2**30, "cpu": usage.ru_utime + usage.ru_stime,
            "pid": os.getpid()}


def _fit_hpc_cluster(n, cache, graph, worker_memory):
    """HPC, sgd + exchange through files, on 2 worker processes with a memory limit."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from dimbsvm.svm.hpc import HPCClassifier

    neighbors = da.from_zarr(str(_neighbors_zarr(cache, graph, n)))
    X, y = _data(n)
    scratch = cache / "exchange"
    scratch.mkdir(exist_ok=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=worker_memory, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        before = client.run(_worker_usage)
        clf = HPCClassifier(C=1.0, class_weight="balanced", solver="sgd", exchange_dir=scratch,
                            random_state=0)
        start, cpu = time.perf_counter(), _cpu_seconds()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(X, y, neighbors=neighbors)
        seconds, caller_cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        after = client.run(_worker_usage)
        peak = _peak_gib()
        score = g_mean(y.compute(), clf.predict(X))
    restarted = sorted(w["pid"] for w in before.values()) != sorted(w["pid"] for w in after.values())
    workers_cpu = sum(a["cpu"] for a in after.values()) - sum(b["cpu"] for b in before.values())
    data_gib = n * N_FEATURES * X.dtype.itemsize / 2**30
    return {"seconds": seconds, "cpu_seconds": caller_cpu + workers_cpu,
            "caller_cpu_seconds": caller_cpu, "peak_rss_gib": peak,
            "worker_peak_gib": max(w["peak_gib"] for w in after.values()),
            "worker_memory_limit": worker_memory, "worker_restarted": restarted,
            "data_gib": data_gib, "exchange_gb": n * (K + 1) * (N_FEATURES + 1) * X.dtype.itemsize / 1e9,
            "stages": clf.timings_, "n_iter": clf.n_iter_, "objective": clf.objective_,
            "warnings": len(caught), "train_g_mean": float(score)}


def _fit_linear_svc(n, loss):
    """LinearSVC on the rows in memory (the graph is not used)."""
    from sklearn.svm import LinearSVC

    X, y = dask.compute(*_data(n))
    start, cpu = time.perf_counter(), _cpu_seconds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svm = LinearSVC(loss=loss, C=1.0, class_weight="balanced", random_state=0).fit(X, y)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu,
            "peak_rss_gib": _peak_gib(), "n_iter": int(svm.n_iter_), "warnings": len(caught),
            "train_g_mean": float(g_mean(y, svm.predict(X)))}


#: Measured methods: each ``(n, cache, graph) -> result`` runs in its own process.
METHODS = {
    "hpc_memory_liblinear": lambda n, c, g: _fit_hpc(n, c, g, dask_input=False, solver="liblinear"),
    "hpc_dask_liblinear": lambda n, c, g: _fit_hpc(n, c, g, dask_input=True, solver="liblinear"),
    "hpc_dask_sgd": lambda n, c, g: _fit_hpc(n, c, g, dask_input=True, solver="sgd"),
    "hpc_cluster_sgd_exchange": lambda n, c, g: _fit_hpc_cluster(
        n, c, g, os.environ.get("HPC_SCALE_WORKER_MEMORY", "1GiB")),
    "linear_svc_hinge": lambda n, c, g: _fit_linear_svc(n, "hinge"),
    "linear_svc_squared_hinge": lambda n, c, g: _fit_linear_svc(n, "squared_hinge"),
}
STAGES = {"knn": stage_knn, **METHODS}


def _run_stage(stage, n, cache, graph, worker_memory="1GiB"):
    """One stage in a fresh Python process; its JSON result and the load when it started."""
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, "-m", "benchmarks.hpc_scale", "--stage", stage,
                          "--n", str(n), "--cache", str(cache), "--graph", graph],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "1",
                              "HPC_SCALE_WORKER_MEMORY": worker_memory}).stdout
    return {**json.loads(out.strip().splitlines()[-1]), "load_1min": load}


def _median_run(repeats):
    """Medians of the numeric fields over repeats (stage times per stage), plus the raw repeats."""
    first = repeats[0]
    summary = {}
    for key, value in first.items():
        if key == "stages":
            summary[key] = {s: statistics.median(r[key][s] for r in repeats) for s in value}
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            summary[key] = statistics.median(r[key] for r in repeats)
    summary["repeats"] = repeats
    return summary


def _load_summary(out):
    path = out / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--stage", choices=sorted(STAGES), default=None,
                        help="run one stage in this process and print its JSON (no summary)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpc-scale"),
                        help="where the kNN graphs are kept between runs")
    parser.add_argument("--graph", choices=["knn", "random"], default="knn")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker-memory", default="1GiB",
                        help="memory limit of each worker of hpc_cluster_sgd_exchange")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.stage:
        for n in args.n:
            result = STAGES[args.stage](n, args.cache, args.graph)
            result.setdefault("peak_rss_gib", _peak_gib())
            print(json.dumps({**result, "stage": args.stage, "n": n}))
        return 0
    command = "python -m benchmarks.hpc_scale " + shlex.join(argv)
    previous = _load_summary(args.out)
    summary = previous or {"kind": "hpc_scale", "commands": [], "graphs": [], "runs": []}
    summary.update(kind="hpc_scale", title=TITLE, date=utc_now(), machine=machine_info(),
                   packages=package_versions(),
                   data={"generator": "make_imbalanced", "n_features": N_FEATURES,
                         "minority_fraction": 0.01, "chunks": CHUNKS, "random_state": 0},
                   settings={"n_neighbors": K, "C": 1.0, "class_weight": "balanced",
                             "sgd_epochs": 5, "OPENBLAS_NUM_THREADS": 1, "baseline": BASELINE})
    summary["commands"] = [*summary.get("commands", []), command]
    summary["command"] = " && ".join(summary["commands"])
    for n in args.n:
        graph_file = _graph_path(args.cache, args.graph, n)
        meta_file = graph_file.with_suffix(".json")
        if graph_file.exists() and meta_file.exists():
            logger.info("reusing the %s graph of n=%d in %s", args.graph, n, args.cache)
            graph_info = json.loads(meta_file.read_text())
        else:
            graph_info = _run_stage("knn", n, args.cache, args.graph)
            meta_file.write_text(json.dumps(graph_info))
        summary["graphs"] = [g for g in summary["graphs"]
                             if (g["n"], g["graph"]) != (n, args.graph)] + [graph_info]
        if "hpc_cluster_sgd_exchange" in args.methods:
            _neighbors_zarr(args.cache, args.graph, n)  # here, not in the measured process
        runs = {}
        for repeat in range(args.repeats):
            for method in args.methods:
                result = _run_stage(method, n, args.cache, args.graph, args.worker_memory)
                runs.setdefault(method, []).append(result)
                logger.info("n=%d repeat %d %s: %.1f s (cpu %.1f s), peak %.2f GiB", n, repeat,
                            method, result["seconds"], result["cpu_seconds"],
                            result["peak_rss_gib"])
        for method, repeats in runs.items():
            summary["runs"] = [r for r in summary["runs"]
                               if (r["n"], r["graph"], r["method"]) != (n, args.graph, method)]
            summary["runs"].append({"n": n, "graph": args.graph, "method": method,
                                    **_median_run(repeats)})
        summary["runs"].sort(key=lambda r: (r["graph"], r["n"], r["method"]))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(render_markdown(summary))
    return 0


# -- rendering --------------------------------------------------------------------------------

_HPC_STAGES = ("moments", "jlj", "factor", "transform", "solve", "objective")
_LABELS = {"hpc_memory_liblinear": "HPC, NumPy input, liblinear",
           "hpc_dask_liblinear": "HPC, Dask input, liblinear",
           "hpc_dask_sgd": "HPC, Dask input, sgd (5 epochs)",
           "hpc_cluster_sgd_exchange": "HPC, 2 worker processes, sgd + disk exchange",
           "linear_svc_hinge": "LinearSVC(loss='hinge')",
           "linear_svc_squared_hinge": "LinearSVC() (squared hinge)"}


def _fmt(value, spec=".1f"):
    return "–" if value is None else format(value, spec)


def render_markdown(summary: dict) -> str:
    """The ``hpc_scale`` summary as markdown tables (for ``benchmarks/results.py``).

    Parameters
    ----------
    summary : dict
        The content of ``summary.json`` written by :func:`main`.

    Returns
    -------
    markdown : str
        The graphs; per ``n`` and method the median fit seconds, CPU seconds,
        peak memory, HPC stage seconds, the ratio to ``LinearSVC(loss="hinge")``
        and the objective; and the growth of each method's time per 10x rows.

    Examples
    --------
    >>> run = {"n": 10, "graph": "knn", "method": "linear_svc_squared_hinge", "seconds": 2.0,
    ...        "cpu_seconds": 1.0, "peak_rss_gib": 0.1, "n_iter": 6, "train_g_mean": 0.8,
    ...        "repeats": [{}]}
    >>> print(render_markdown({"graphs": [], "runs": [run]}).splitlines()[-1])
    | 10 | knn | LinearSVC() (squared hinge) | 1 | 2.0 | 1.0 | 1.00 (1.00) | 0.10 | – | – | – | – | 6 | 80.0 |
    """
    lines = ["| n | graph | build s | CPU s | recall@5 | peak GiB |", "|---|---|---|---|---|---|"]
    for g in sorted(summary.get("graphs", []), key=lambda g: (g["graph"], g["n"])):
        lines.append(f"| {g['n']:,} | {g['graph']} | {g['seconds']:.1f} | "
                     f"{_fmt(g.get('cpu_seconds'))} | {_fmt(g.get('recall_at_5'), '.3f')} | "
                     f"{_fmt(g.get('peak_rss_gib'), '.2f')} |")
    runs = summary.get("runs", [])
    base = {(r["n"], r["graph"]): r for r in runs if r["method"] == BASELINE}
    caption = (f"Fit after the graph, medians over the repeats (`reps`); `× base` is the wall "
               f"(CPU) time over `{_LABELS[BASELINE]}`'s on the same rows; HPC stages are the "
               f"wall seconds of {' / '.join(_HPC_STAGES)} (moments only for Dask input); the "
               "objective is the HPC primal (eq. 33), `gap` its difference relative to the "
               "NumPy-input liblinear fit's. Dask input is generated lazily in every pass "
               "(`gen s` is one pass alone; liblinear makes 3 passes, sgd 8), and its times "
               "include that.")
    lines += ["", caption, "",
              ("| n | graph | method | reps | fit s | CPU s | × base | peak GiB | HPC stages s "
               "| gen s | objective | gap | iterations | train G-mean |"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    exact = {(r["n"], r["graph"]): r["objective"] for r in runs
             if r["method"] == "hpc_memory_liblinear" and "objective" in r}
    for r in runs:
        key = (r["n"], r["graph"])
        ratio = (f"{r['seconds'] / base[key]['seconds']:.2f} "
                 f"({r['cpu_seconds'] / base[key]['cpu_seconds']:.2f})") if key in base else None
        stages = r.get("stages")
        stage_text = " / ".join(f"{stages[s]:.1f}" if s in stages else "–" for s in _HPC_STAGES) \
            if stages else "–"
        gap = None
        if "objective" in r and key in exact:
            gap = (r["objective"] - exact[key]) / abs(exact[key])
        lines.append(
            f"| {r['n']:,} | {r['graph']} | {_LABELS.get(r['method'], r['method'])} | "
            f"{len(r['repeats'])} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
            f"{ratio or '–'} | {r['peak_rss_gib']:.2f} | {stage_text} | "
            f"{_fmt(r.get('generator_one_pass'))} | "
            f"{_fmt(r.get('objective'), '.6g')} | {_fmt(gap, '.1e')} | "
            f"{_iterations(r)} | {100 * r['train_g_mean']:.1f} |")
    cluster = [r for r in runs if "worker_peak_gib" in r]
    if cluster:
        lines += ["", ("The chunk-bounded path (`" + _LABELS["hpc_cluster_sgd_exchange"] + "`): "
                       "peak resident memory of the calling process and of the largest worker "
                       "against each worker's limit and the data's size; CPU s above is the "
                       "caller's and the workers' together. Chunks are 100,000 rows (12.2 MiB "
                       "as float32)."), "",
                  "| n | graph | fit s | caller peak GiB | worker peak GiB | worker limit | "
                  "data GiB | exchange GB | worker restarted |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['n']:,} | {r['graph']} | {r['seconds']:.1f} | {r['peak_rss_gib']:.2f} | "
                  f"{r['worker_peak_gib']:.2f} | {r['repeats'][0]['worker_memory_limit']} | "
                  f"{r['data_gib']:.2f} | {r['exchange_gb']:.1f} | "
                  f"{'yes' if any(x['worker_restarted'] for x in r['repeats']) else 'no'} |"
                  for r in cluster]
    growth = _growth(runs)
    if growth:
        lines += ["", "Growth of the median fit time per 10x rows (linear scaling is 10x):", "",
                  "| graph | method | from n | to n | wall ratio | CPU ratio |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {g} | {_LABELS.get(m, m)} | {a:,} | {b:,} | {wall:.1f} | {cpu:.1f} |"
                  for g, m, a, b, wall, cpu in growth]
    return "\n".join(lines)


def _iterations(run):
    if run["method"].endswith("sgd"):
        return f"{run['n_iter']:g} epochs"
    text = f"{run['n_iter']:g}"
    if any(rep.get("warnings") for rep in run["repeats"]):
        text += " (not converged)" if run["method"].startswith("linear_svc") else " (warned)"
    return text


def _growth(runs):
    by = {}
    for r in runs:
        by.setdefault((r["graph"], r["method"]), {})[r["n"]] = r
    rows = []
    for (graph, method), sizes in sorted(by.items()):
        for a in sorted(sizes):
            if 10 * a in sizes:
                b = sizes[10 * a]
                rows.append((graph, method, a, 10 * a, b["seconds"] / sizes[a]["seconds"],
                             b["cpu_seconds"] / sizes[a]["cpu_seconds"]))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
