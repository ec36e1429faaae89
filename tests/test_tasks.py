"""The task layer: map_tasks and plans run the same in-process and on a cluster; errors and threads."""

import time

import numpy as np
import pytest

from dimbsvm.parallel import TaskPlan, map_tasks, run_plan
from dimbsvm.exceptions import DataError


def _square(*, x, offset=0):
    return x * x + offset


def _total(*, parts):
    return sum(parts)


def _length(*, values):
    return len(values)


def test_map_tasks_same_results_in_order(scheduler):
    seen = []
    out = map_tasks(_square, [{"x": i} for i in range(7)], client=scheduler, shared={"offset": 100},
                    on_result=lambda i, r: seen.append((i, r)))
    assert out == [i * i + 100 for i in range(7)]
    assert sorted(seen) == list(enumerate(out))


def test_plan_with_dependencies(scheduler):
    plan = TaskPlan()
    data = plan.share(np.arange(5.0))
    parts = [plan.add(_square, {"x": i}) for i in range(4)]
    total = plan.add(_total, {"parts": parts}, watch=True)
    length = plan.add(_length, {"values": data}, watch=True)
    results = run_plan(plan, client=scheduler)
    assert results == {total.id: 0 + 1 + 4 + 9, length.id: 5}


class _CountingClient:
    """A real client whose submissions are counted: how many were unfinished at each submit."""

    def __init__(self, client):
        self._client, self.submitted, self.most_unfinished = client, [], 0

    def submit(self, *args, **kwargs):
        self.most_unfinished = max(self.most_unfinished, sum(not f.done() for f in self.submitted))
        future = self._client.submit(*args, **kwargs)
        self.submitted.append(future)
        return future

    def __getattr__(self, name):
        return getattr(self._client, name)


def _slow_square(*, x, offset=0):
    time.sleep(0.01)
    return x * x + offset


def _windowed_plan():
    """Shared data read first and last, chains across the window, a watched result read later."""
    plan = TaskPlan()
    data = plan.share(np.arange(6.0))
    first = plan.add(_length, {"values": data}, watch=True)
    chain = [plan.add(_slow_square, {"x": i}) for i in range(30)]
    totals = [plan.add(_total, {"parts": chain[i:i + 5]}, watch=True) for i in range(0, 30, 5)]
    last = plan.add(_total, {"parts": [*totals, first]}, watch=True)
    tail = plan.add(_length, {"values": data}, watch=True)
    return plan, [first, *totals, last, tail]


def test_plan_submitted_in_a_window_gives_the_same_results(client):
    # a plan larger than the window: submitted in order, the client waiting for the oldest
    # tasks; results equal the in-process run, and no more than the window is ever unfinished
    plan, watched = _windowed_plan()
    expected = run_plan(plan)
    counting = _CountingClient(client)
    seen = []
    results = run_plan(plan, client=counting, max_in_flight=6, on_result=lambda ref, r: seen.append(ref.id))
    assert results == expected and len(results) == len(watched)
    assert sorted(seen) == sorted(ref.id for ref in watched)
    assert 1 <= counting.most_unfinished <= 6 + 1  # the shared value's task is not counted in the window
    with pytest.raises(ValueError, match="max_in_flight"):
        run_plan(plan, client=client, max_in_flight=1)


def _count_then_fail(*, log, error):
    with open(log, "a") as handle:
        handle.write("x")
    raise error


@pytest.mark.parametrize("error, attempts", [
    (DataError("row 3 is bad"), 1),       # deterministic: raised at once, as itself
    (ValueError("C must be positive"), 1),
    (FileNotFoundError("no such file"), 1),
    (ConnectionResetError("network blip"), 3),  # transient I/O: retried (retries=2)
])
def test_deterministic_errors_are_not_retried(client, tmp_path, error, attempts):
    log = tmp_path / "attempts"
    with pytest.raises(type(error), match=str(error)):
        map_tasks(_count_then_fail, [{"log": str(log), "error": error}], client=client, retries=2)
    assert len(log.read_text()) == attempts


def test_failure_upstream_reaches_the_caller_as_itself(client, tmp_path):
    plan = TaskPlan()
    bad = plan.add(_count_then_fail, {"log": str(tmp_path / "a"), "error": DataError("upstream broke")})
    plan.add(_total, {"parts": [bad]}, watch=True)
    with pytest.raises(DataError, match="upstream broke"):
        run_plan(plan, client=client)


def _shared_sum(*, data, k):
    return float(data.sum()) * k


def _writeable(*, data, k):
    return bool(data.flags.writeable)


def test_plan_on_processes_gives_the_in_order_results():
    data = np.arange(300_000, dtype=float)  # above joblib's size for mapping arrays, below it the same path

    def plan_of():
        plan = TaskPlan()
        shared = plan.share(data)
        parts = [plan.add(_shared_sum, {"data": shared, "k": k}) for k in range(6)]
        plan.add(_total, {"parts": parts[:3]}, watch=True)
        plan.add(_total, {"parts": [parts[5], parts[0]]}, watch=True)
        plan.add(_square, {"x": parts[4], "offset": 1}, watch=True)
        return plan

    seen = []
    expected = run_plan(plan_of())
    assert expected == {7: data.sum() * 3, 8: data.sum() * 5, 9: (data.sum() * 4) ** 2 + 1}
    assert run_plan(plan_of(), n_jobs=2, on_result=lambda ref, r: seen.append((ref.id, r))) == expected
    assert dict(seen) == expected
    # each process maps the one file written for the plan, read-only, instead of a copy per task
    assert map_tasks(_writeable, [{"k": k} for k in range(4)], shared={"data": data}, n_jobs=2) == [False] * 4


def _pid_and(value=None, values=None):
    import os

    return os.getpid(), value if values is None else [v for _, v in values]


def test_a_gathering_task_runs_in_this_process_on_processes_with_its_inputs_as_they_are():
    import os

    data = np.arange(5.0)
    plan = TaskPlan()
    shared = plan.share(data)
    parts = [plan.add(_pid_and, {"value": k}) for k in range(3)]
    joined = plan.add(_pid_and, {"values": parts}, watch=True, gathers=True)
    reads = plan.add(_is_the_array, {"data": shared, "after": joined}, watch=True, gathers=True)
    results = run_plan(plan, n_jobs=2)
    pid, values = results[joined.id]
    assert pid == os.getpid() and values == [0, 1, 2]  # in this process, the parts' results gathered
    assert results[reads.id] is True  # the shared value itself, not a file mapped from it
    assert run_plan(plan)[joined.id] == (os.getpid(), [0, 1, 2])  # (in order, here: the same result)
    parts_pids = {p for p, _ in [run_plan(_one(k), n_jobs=2)[0] for k in range(2)]}
    assert os.getpid() not in parts_pids  # a task that does not gather runs in a process


def _is_the_array(data, after):
    return type(data) is np.ndarray and data.flags.writeable


def _one(k):
    plan = TaskPlan()
    plan.add(_pid_and, {"value": k}, watch=True)
    return plan


def test_a_misspelled_argument_fails_when_the_task_is_added():
    plan = TaskPlan()
    with pytest.raises(TypeError, match=r"task '_square': got an unexpected keyword argument 'offest'"):
        plan.add(_square, {"x": 2, "offest": 1})
    with pytest.raises(TypeError, match=r"task 'total': missing a required argument: 'parts'"):
        plan.add(_total, {}, name="total")
    assert plan.tasks == []  # nothing of either was added
    plan.add(max, {"key": abs})  # a builtin without a signature is checked by its call
    with pytest.raises(TypeError, match=r"task 'sum': 'iterable' parameter is positional only"):
        plan.add(sum, {"iterable": [1]})


def test_errors_on_processes_reach_the_caller_as_themselves(tmp_path):
    plan = TaskPlan()
    bad = plan.add(_count_then_fail, {"log": str(tmp_path / "a"), "error": DataError("upstream broke")})
    plan.add(_total, {"parts": [bad]}, watch=True)
    good = plan.add(_square, {"x": 3}, watch=True)
    with pytest.raises(DataError, match="upstream broke"):
        run_plan(plan, n_jobs=2)
    results = run_plan(plan, n_jobs=2, errors="return")
    assert isinstance(results[1].error, DataError) and results[good.id] == 9
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
        map_tasks(_square, [{"x": 1}], n_jobs=0)


def _threads_seen():
    import numba
    from threadpoolctl import threadpool_info

    return {"numba": numba.get_num_threads(),
            "pools": sorted({info["num_threads"] for info in threadpool_info()})}


def test_tasks_use_the_worker_thread_count(client):
    # an in-process cluster shares this process: numba (a per-thread setting) is limited, the
    # process-wide BLAS pools are left alone (limiting them would race between workers' threads)
    from threadpoolctl import threadpool_info

    before = sorted({info["num_threads"] for info in threadpool_info()})
    [seen] = map_tasks(_threads_seen, [{}], client=client)
    assert seen["numba"] == 1
    assert sorted({info["num_threads"] for info in threadpool_info()}) == before


def _knn_build_cpu(*, n, seed):
    from dimbsvm.graph.knn import KNNIndex

    X = np.random.default_rng(seed).normal(size=(n, 16)).astype(np.float32)
    KNNIndex(10, method="pynndescent", random_state=seed).fit(X)  # warm: compile outside the measurement
    import numba

    wall, cpu = time.perf_counter(), time.process_time()
    KNNIndex(10, method="pynndescent", random_state=seed + 1).fit(X).neighbor_graph(10)
    return {"threads": numba.get_num_threads(), "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu, **_threads_seen()}


@pytest.mark.slow
def test_knn_build_in_a_one_thread_worker_process_uses_one_core():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        [seen] = map_tasks(_knn_build_cpu, [{"n": 20_000, "seed": 0}], client=client)
    assert seen["threads"] == 1 and seen["pools"] in ([], [1])  # numba and BLAS/OpenMP: one thread each
    # one thread: process CPU time is about the wall time (with numba's default pool on 2+ cores it
    # is up to cores x wall)
    assert seen["cpu"] <= 1.3 * seen["wall"] + 0.05, seen


def _working_memory():
    import sklearn

    return sklearn.get_config()["working_memory"]


def test_tasks_bound_scikit_learns_working_memory_by_the_worker_limit():
    """A 512 MiB worker gives scikit-learn's chunked computations blocks of 32 MiB, not its default 1024."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      memory_limit="512MiB") as cluster, Client(cluster) as client:
        assert map_tasks(_working_memory, [{}], client=client) == [32]
    assert map_tasks(_working_memory, [{}], client=None) == [_working_memory()]  # in-process: untouched


def _peak_rss():
    from dimbsvm.environment import peak_rss_bytes

    return peak_rss_bytes()


def test_worker_peak_memory_is_its_own_not_its_parents():
    """A worker spawned by a process holding 400 MB reports its own peak (ru_maxrss would report 400 MB+)."""
    from distributed import Client, LocalCluster

    held = np.ones(50_000_000)  # 400 MB in this process, the workers' parent
    held[::4096] = 2.0  # touched: resident
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        [worker_peak] = client.run(_peak_rss).values()
    assert _peak_rss() > 400e6 > worker_peak > 0
    del held


def _blas_pools():
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_in_order_threads_limit_blas_to_one_thread_and_restore_the_pools():
    # a job run in this process (runner.execute_run without a client) runs as on a one-thread worker
    from threadpoolctl import threadpool_limits

    from dimbsvm.parallel.policy import in_order_threads

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_pools()
        with in_order_threads():
            assert _blas_pools() == [1] * len(before)
        assert _blas_pools() == before


def test_task_costs_are_every_task_but_the_shared_values_the_missing_ones_at_the_median():
    plan = TaskPlan()
    data = plan.share(np.arange(3.0))
    costs = [4.0, None, 1.0, 10.0, None]
    refs = [plan.add(_length, {"values": data}, cost=cost) for cost in costs]
    assert plan.task_costs() == {ref.id: 4.0 if cost is None else cost for ref, cost in zip(refs, costs)}
    plain = TaskPlan()
    ref = plain.add(_square, {"x": 2})
    assert plain.task_costs() == {ref.id: 1.0}  # no costs at all: every task counts as one


def test_progress_counts_every_task_at_its_cost_as_it_finishes(scheduler, monkeypatch):
    # watched or not: the advances are one per task (shared values apart), each with the task's cost, and the
    # unwatched tasks a watched one reads are counted before it
    from dimbsvm.parallel import progress

    advances = []
    real = progress.Progress.advance

    def recorded(self, n=1, work=None, longest_left=0.0):
        advances.append((n, work))
        real(self, n, work, longest_left)

    monkeypatch.setattr(progress.Progress, "advance", recorded)
    plan = TaskPlan()
    data = plan.share(np.arange(4.0))
    parts = [plan.add(_square, {"x": i}, cost=1.0 + i) for i in range(4)]
    total = plan.add(_total, {"parts": parts}, watch=True, cost=20.0)
    length = plan.add(_length, {"values": data}, watch=True)
    results = run_plan(plan, client=scheduler, progress=True)
    assert results == {total.id: 0 + 1 + 4 + 9, length.id: 4}
    assert len(advances) == 6 and all(n == 1 for n, _ in advances)
    assert sorted(work for _, work in advances) == sorted([1.0, 2.0, 3.0, 4.0, 20.0, 3.0])  # the uncosted one: the median
    works = [work for _, work in advances]
    assert works.index(20.0) > max(works.index(c)
                                   for c in (1.0, 2.0, 4.0))  # its inputs first (3.0 is two tasks)


def _where(*, pause=0.0):
    from distributed import get_worker

    time.sleep(pause)
    return get_worker().address


def test_tasks_of_one_affinity_run_on_one_worker_and_the_rest_go_anywhere(client):
    """Affinity k is sent to the (k mod n)-th worker by address (where its chunk is cached); in-process it is
    ignored. Equal loads on both workers: nothing to steal, so every task runs where it was sent."""
    workers = sorted(client.scheduler_info()["workers"])
    plan = TaskPlan()
    placed = {plan.add(_where, {"pause": 0.05}, watch=True, affinity=k).id: k for k in (0, 1, 2, 3, 5, 7)}
    free = plan.add(_where, {}, watch=True)
    ran = run_plan(plan, client=client)
    assert {i: ran[i] for i in placed} == {i: workers[k % 2] for i, k in placed.items()}
    assert ran[free.id] in workers
    here = TaskPlan()
    squares = [here.add(_square, {"x": k}, watch=True, affinity=k) for k in range(3)]
    assert run_plan(here) == {ref.id: k * k for k, ref in enumerate(squares)}


def _nap(*, seconds):
    time.sleep(seconds)
    return seconds


def test_a_plan_whose_client_is_closed_under_it_raises_instead_of_hanging():
    """What a first-worker watch does when no worker joins in time (scale from zero): it closes the client
    from another thread while the plan waits. The plan must end with an error, not wait forever in the
    cancellation of its remaining tasks."""
    import threading

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        client = Client(cluster)
        plan = TaskPlan()
        for _ in range(40):
            plan.add(_nap, {"seconds": 0.2}, watch=True)
        outcome = {}

        def run():
            try:
                run_plan(plan, client=client)
                outcome["result"] = "finished"
            except BaseException as exc:  # noqa: BLE001 - any error is the expected end
                outcome["result"] = type(exc).__name__

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        time.sleep(1.0)
        client.close()
        runner.join(120)
        assert not runner.is_alive(), "run_plan still waiting two minutes after its client was closed"
        assert outcome["result"] != "finished"
