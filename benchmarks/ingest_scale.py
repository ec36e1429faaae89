"""Ingest of Parquet and CSV on two workers: rows per second and peak memory, against plain Dask.

Usage (from the repository root)::

    python -m benchmarks.ingest_scale --sizes 1000000 --formats parquet csv --where local s3 --repeats 2 \
        --cache CACHE_DIR --out benchmarks/results/ingest-1e6
    python -m benchmarks.ingest_scale --sizes 10000000 --formats parquet --where local --repeats 1 \
        --cache CACHE_DIR --out benchmarks/results/ingest-1e7

The data (generated once per size into ``--cache``): a string label column first (1 % ``pos``), 32
float32-valued feature columns, a string id column and a categorical column of 5 values; Parquet in
row groups of 10^5 rows (one file per 10^6 rows), CSV one file per 10^6 rows. ``--where s3`` uploads
the files to a real S3 API server (moto's server mode, started on 127.0.0.1 by this script).

Each measurement runs in a fresh process with a fresh embedded cluster of two single-threaded
worker processes (cluster start not timed):

- ``dimbsvm``: ``dimbsvm.store.ingest(SOURCE, STORE, target="label", id="id", nominal=["cat"])``:
  label coded, id kept, category one-hot encoded, rows checksummed in a Zarr store;
- ``dask``: the baseline the issue names, the numeric columns only:
  ``dd.read_parquet(...)`` (or ``read_csv``) ``.to_dask_array().compute_chunk_sizes().to_zarr(STORE)``
  (``to_dask_array(lengths=True)``, the same pass, mis-counts Dask's fused Parquet partitions at 10 files).

Recorded: wall seconds, rows per second, and the peak resident memory of the client process and of
each worker process (sampled every 50 ms with psutil; the client's is also ``VmHWM``), with the
client's resident memory just before the ingest, so that growth with rows is visible.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.ingest_scale")

N_FEATURES = 32
FILE_ROWS = 1_000_000
CATEGORIES = np.array(["a", "b", "c", "d", "e"])


# -- data ---------------------------------------------------------------------------------------------------


def _table(start: int, n: int):
    import pyarrow as pa

    rng = np.random.default_rng(start)
    columns = {"label": pa.array(np.where(rng.random(n) < 0.01, "pos", "neg"))}
    X = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    for j in range(N_FEATURES):
        columns[f"x{j}"] = pa.array(X[:, j].astype(np.float64))
    columns["id"] = pa.array([f"row-{i}" for i in range(start, start + n)])
    columns["cat"] = pa.array(CATEGORIES[rng.integers(0, len(CATEGORIES), n)])
    return pa.table(columns)


def make_data(cache: Path, n: int, fmt: str) -> Path:
    """The dataset of ``n`` rows in ``fmt`` under ``cache`` (a directory of files), made once."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    directory = cache / f"{fmt}-{n}"
    done = directory / ".complete"
    if done.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for part, start in enumerate(range(0, n, FILE_ROWS)):
        table = _table(start, min(FILE_ROWS, n - start))
        if fmt == "parquet":
            pq.write_table(table, directory / f"part-{part:04d}.parquet", row_group_size=100_000)
        else:
            pacsv.write_csv(table, directory / f"part-{part:04d}.csv")
    done.write_text("")
    return directory


def source_of(directory: Path, fmt: str, where: str, bucket_root: str | None) -> str:
    pattern = "*.parquet" if fmt == "parquet" else "*.csv"
    if where == "local":
        return str(directory / pattern)
    return f"{bucket_root}/{directory.name}/{pattern}"


# -- the S3 server ---------------------------------------------------------------------------------------------


def start_s3() -> tuple[subprocess.Popen, dict]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    return server, env


def upload(directory: Path, bucket: str, env: dict) -> None:
    import s3fs

    os.environ.update(env)
    fs = s3fs.S3FileSystem()
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    if not fs.exists(f"{bucket}/{directory.name}"):
        fs.put(str(directory), f"{bucket}/{directory.name}", recursive=True)


# -- one measurement (in its own process) ------------------------------------------------------------------


class PeakSampler:
    """Peak resident memory of some processes, sampled in a thread."""

    def __init__(self, pids, interval=0.05):
        import psutil

        self.processes = {pid: psutil.Process(pid) for pid in pids}
        self.peaks = dict.fromkeys(pids, 0)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for pid, process in self.processes.items():
                try:
                    self.peaks[pid] = max(self.peaks[pid], process.memory_info().rss)
                except Exception:  # noqa: BLE001 - a process that ended
                    pass
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(spec: dict) -> dict:
    """Ingest once on a fresh two-worker cluster; wall time and peak memories."""
    import psutil
    from distributed import Client, LocalCluster

    numeric = [f"x{j}" for j in range(N_FEATURES)]
    out = Path(tempfile.mkdtemp(prefix="ingest-bench-", dir=spec["scratch"]))
    store = out / "s.zarr"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.run(os.getpid).values())
        client_pid = os.getpid()
        before = psutil.Process(client_pid).memory_info().rss
        with PeakSampler([client_pid, *workers]) as sampler:
            start = time.perf_counter()
            if spec["method"] == "dimbsvm":
                from dimbsvm.store import ingest

                stored = ingest(spec["source"], store, target="label", id="id", nominal=["cat"])
                shape = list(stored.X.shape)
            else:
                import dask.dataframe as dd

                if spec["format"] == "parquet":
                    frame = dd.read_parquet(spec["source"], columns=numeric)
                else:
                    frame = dd.read_csv(spec["source"], usecols=numeric, blocksize="32MiB")
                # to_dask_array(lengths=True), the baseline, counts the partitions of the optimised
                # (fused) frame and builds the array from the unfused one (10^7 rows of Parquet: 5 != 10);
                # computing the chunk sizes on the array is the same pass without the mismatch
                array = frame.to_dask_array().compute_chunk_sizes()
                array.to_zarr(str(store))
                shape = list(array.shape)
            wall = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return {**{k: spec[k] for k in ("n", "format", "where", "method")}, "wall_s": wall, "shape": shape,
            "rows_per_s": spec["n"] / wall, "client_rss_before": before, "client_peak": sampler.peaks[client_pid],
            "client_vm_hwm": _vm_hwm(), "worker_peaks": [sampler.peaks[pid] for pid in workers]}


# -- the whole benchmark ---------------------------------------------------------------------------------------


def _run_one(spec: dict, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.ingest_scale", "--one", json.dumps(spec)],
                          capture_output=True, text=True, env={**os.environ, **env}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measurement {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--formats", nargs="+", choices=("parquet", "csv"), default=["parquet", "csv"])
    parser.add_argument("--where", nargs="+", choices=("local", "s3"), default=["local"])
    parser.add_argument("--methods", nargs="+", choices=("dimbsvm", "dask"), default=["dimbsvm", "dask"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cache", default=None, help="where the generated files are kept between runs")
    parser.add_argument("--out", required=False, help="results directory (summary.json, report.md)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = Path(args.cache or tempfile.mkdtemp(prefix="ingest-cache-"))
    scratch = tempfile.mkdtemp(prefix="ingest-scratch-")
    server, env = (start_s3() if "s3" in args.where else (None, {}))
    started, wall = utc_now(), time.perf_counter()
    rows = []
    try:
        for n in args.sizes:
            for fmt in args.formats:
                directory = make_data(cache, n, fmt)
                if server is not None:
                    upload(directory, "bench", env)
                for where in args.where:
                    source = source_of(directory, fmt, where, "s3://bench")
                    for repeat in range(args.repeats):
                        for method in args.methods:  # alternated, so drift hits both alike
                            spec = {"n": n, "format": fmt, "where": where, "method": method, "source": source,
                                    "scratch": scratch}
                            row = _run_one(spec, env if where == "s3" else {})
                            row["repeat"] = repeat
                            rows.append(row)
                            logger.info("%s %s %s %s: %.1f s, client peak %.0f MB", n, fmt, where, method,
                                        row["wall_s"], row["client_peak"] / 1e6)
    finally:
        if server is not None:
            server.terminate()
        shutil.rmtree(scratch, ignore_errors=True)
    sizes = " and ".join(f"{n:,}" for n in args.sizes)
    summary = {"kind": "ingest_scale", "title": f"Ingest of {sizes} rows on two workers, against plain Dask",
               "command": "python -m benchmarks.ingest_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
               "date": started, "wall_seconds": time.perf_counter() - wall, "machine": machine_info(),
               "packages": package_versions(), "rows": rows,
               "description": "Each row: the median of the repeats, each a fresh process and a fresh embedded "
                              "cluster of two single-threaded worker processes (start not timed). dimbsvm "
                              "encodes every column (label, id kept, category one-hot); the Dask baseline "
                              "writes the 32 numeric columns only (read_parquet/read_csv(...).to_dask_array()"
                              ".compute_chunk_sizes().to_zarr). Memory: peak resident set sampled every "
                              "50 ms; the client's growth is its peak less its size before the ingest."}
    text = render_markdown(summary)
    if args.out:
        write_summary(args.out, summary, text)
    print(text)
    return 0


def render_markdown(summary: dict) -> str:
    """The table: per size, format and place, both methods side by side (medians of the repeats)."""
    groups: dict = {}
    for row in summary["rows"]:
        groups.setdefault((row["n"], row["format"], row["where"]), {}).setdefault(row["method"], []).append(row)
    lines = ["| rows | format | where | dimbsvm s | Dask s | dimbsvm rows/s | Dask rows/s | throughput ratio "
             "| client peak (growth) MB, dimbsvm | client peak (growth) MB, Dask | worker peak MB, dimbsvm "
             "| worker peak MB, Dask |", "|" + "---|" * 12]

    def med(rows, key):
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    def memory(rows):
        if not rows:
            return "-"
        peak, before = med(rows, "client_peak"), med(rows, "client_rss_before")
        return f"{peak / 1e6:.0f} ({(peak - before) / 1e6:+.0f})"

    def worker(rows):
        return f"{statistics.median(max(r['worker_peaks']) for r in rows) / 1e6:.0f}" if rows else "-"

    for (n, fmt, where), methods in sorted(groups.items()):
        ours, base = methods.get("dimbsvm", []), methods.get("dask", [])
        ratio = med(ours, "rows_per_s") / med(base, "rows_per_s") if ours and base else float("nan")
        lines.append(f"| {n:,} | {fmt} | {where} | {med(ours, 'wall_s'):.1f} | {med(base, 'wall_s'):.1f} "
                     f"| {med(ours, 'rows_per_s'):,.0f} | {med(base, 'rows_per_s'):,.0f} | {ratio:.2f} "
                     f"| {memory(ours)} | {memory(base)} | {worker(ours)} | {worker(base)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
