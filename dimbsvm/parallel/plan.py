"""A plan of tasks: calls with dependencies, in the order they were added, and what runners need of it.

:class:`TaskPlan` is built by the fold engine and by estimators that fan out;
the runners of :mod:`~dimbsvm.parallel.tasks` (here, on a cluster) and of
:mod:`~dimbsvm.parallel.processes` (on this machine's cores) run it. Nothing
here runs a task.
"""

from __future__ import annotations

import functools
import heapq
import inspect
import statistics
from dataclasses import dataclass, field

__all__ = ["TaskPlan", "TaskRef", "Unfinished", "last_readers", "resolve_refs", "task_inputs"]


@dataclass(frozen=True)
class TaskRef:
    """A handle on the result of a task of a :class:`TaskPlan`; pass it as an argument of later tasks."""

    id: int
    name: str


@dataclass
class _Task:
    func: object
    kwargs: dict
    watch: bool
    name: str
    shared: bool = False
    priority: int = 0
    cost: float | None = None
    affinity: int | None = None
    gathers: bool = False


@dataclass
class TaskPlan:
    """Calls with dependencies, in the order they were added (each after its inputs).

    A keyword argument may be a :class:`TaskRef` or a list of them; the task
    receives the referenced results. Only *watched* tasks' results are
    returned by :func:`run_plan`; the others are intermediate.

    Examples
    --------
    >>> plan = TaskPlan()
    >>> a = plan.add(pow, {"base": 2, "exp": 3})
    >>> b = plan.add(round, {"number": a, "ndigits": 1}, watch=True)
    >>> from dimbsvm.parallel import run_plan
    >>> run_plan(plan)
    {1: 8}
    """

    tasks: list = field(default_factory=list)

    def add(self, func, kwargs: dict, *, watch: bool = False, name: str | None = None, priority: int = 0,
            cost: float | None = None, affinity: int | None = None, gathers: bool = False) -> TaskRef:
        """Add ``func(**kwargs)``; return a reference to its result.

        ``priority``: on a cluster, runnable tasks of higher priority start
        first (a short task that many others wait for, ahead of a long queue).
        ``cost``: the task's expected work, in any unit common to the plan
        (the fold engine's: seconds of one core); progress counts work done
        by it (:meth:`task_costs`). ``None``: the median of the plan's costs.
        The arguments are bound to ``func``'s signature here: a misspelled
        or missing keyword raises ``TypeError`` before anything is submitted.
        ``affinity``: on a cluster, tasks of equal affinity are sent to the
        same worker, which may keep what they read (a stored chunk, decoded,
        in its :mod:`~dimbsvm.store.chunk_cache`); loosely: a busy worker's
        tasks are still stolen by idle ones, and a worker that left is
        replaced by any other.
        ``gathers``: the task joins the results of many others (an
        assembly): on this machine's processes (``n_jobs``) it runs in this
        process, where those results already are, instead of being sent to
        a process and its result back; on a cluster it is a task like any other.
        """
        ref = TaskRef(len(self.tasks), name or getattr(func, "__name__", "task"))
        _check_arguments(func, kwargs, ref.name)
        self.tasks.append(_Task(func, dict(kwargs), watch, ref.name, priority=int(priority),
                                cost=None if cost is None else float(cost),
                                affinity=None if affinity is None else int(affinity), gathers=bool(gathers)))
        return ref

    def share(self, value) -> TaskRef:
        """Add a value that many tasks read (the data, the labels); sent to the cluster once."""
        ref = TaskRef(len(self.tasks), f"shared-{type(value).__name__}")
        self.tasks.append(_Task(None, {"value": value}, False, ref.name, shared=True))
        return ref

    @property
    def n_watched(self) -> int:
        return sum(task.watch for task in self.tasks)

    def work_and_span(self, default: float, *, scale=None) -> tuple[float, float]:
        """``(work, span)``: the plan's costs summed, and those of its longest chain of dependent tasks.

        ``default``: the cost of a task added without one. ``scale``:
        ``scale(cost)`` applied to every task's cost first. On ``p`` workers
        the plan takes at least ``max(span, work / p)`` (and at most
        ``span + work / p`` scheduled greedily, Brent's bound), tasks' own
        times being their costs.

        Examples
        --------
        >>> plan = TaskPlan()
        >>> a = plan.add(round, {"number": 1.5}, cost=2.0)
        >>> b = plan.add(round, {"number": 2.5}, cost=3.0)
        >>> c = plan.add(max, {}, cost=1.0)
        >>> d = plan.add(round, {"number": a, "ndigits": b})
        >>> plan.work_and_span(0.5)
        (6.5, 3.5)
        """
        scale = (lambda cost: cost) if scale is None else scale
        done, work = {}, 0.0
        for i, task in enumerate(self.tasks):
            if task.shared:
                done[i] = 0.0
                continue
            cost = scale(default if task.cost is None else task.cost)
            work += cost
            done[i] = cost + max((done[ref.id] for ref in task_inputs(task)), default=0.0)
        return work, max(done.values(), default=0.0)

    def task_costs(self) -> dict:
        """``{task: cost}`` of every task but the shared values: what progress counts as each one finishes.

        Tasks are unlike: an ensemble's members are many and short and finish
        first, each fold's scoring of its test rows by every member comes
        last; counted as equal, they made the time left far too short near
        the end. A task added without a cost counts as the median of the
        plan's costs (as one, where no task has a cost).

        Examples
        --------
        >>> plan = TaskPlan()
        >>> data = plan.share(2.5)
        >>> a = plan.add(round, {"number": data}, cost=2.0)
        >>> b = plan.add(pow, {"base": a, "exp": 2}, watch=True, cost=10.0)
        >>> c = plan.add(round, {"number": b}, watch=True)
        >>> plan.task_costs()
        {1: 2.0, 2: 10.0, 3: 6.0}
        """
        costs = [task.cost for task in self.tasks if not task.shared and task.cost is not None]
        default = float(statistics.median(costs)) if costs else 1.0
        return {i: default if task.cost is None else task.cost for i, task in enumerate(self.tasks) if not task.shared}


@functools.lru_cache(maxsize=1024)
def _signature(func):
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):  # a builtin without one: its call says what is wrong
        return None


def _check_arguments(func, kwargs, name) -> None:
    """Raise ``TypeError`` naming the task when ``func(**kwargs)`` could not be called."""
    try:
        signature = _signature(func)
    except TypeError:  # an unhashable callable
        signature = None
    if signature is None:
        return
    try:
        signature.bind(**kwargs)
    except TypeError as error:
        raise TypeError(f"task {name!r}: {error}") from None


def resolve_refs(value, results):
    if isinstance(value, TaskRef):
        return results[value.id]
    if isinstance(value, list) and any(isinstance(v, TaskRef) for v in value):
        return [resolve_refs(v, results) for v in value]
    return value


class Unfinished:
    """The tasks not yet finished, and the largest cost among them (for the progress line's tail).

    Examples
    --------
    >>> left = Unfinished({0: 1.0, 1: 5.0, 2: 2.0})
    >>> left.finish(1), left.finish(0), left.finish(2)
    (2.0, 2.0, 0.0)
    """

    def __init__(self, costs: dict):
        self._heap = [(-cost, i) for i, cost in costs.items()]
        heapq.heapify(self._heap)
        self._finished: set = set()

    def finish(self, i) -> float:
        """Task ``i`` finished; the largest cost of a task left (0 when none is)."""
        self._finished.add(i)
        while self._heap and self._heap[0][1] in self._finished:
            heapq.heappop(self._heap)
        return -self._heap[0][0] if self._heap else 0.0


def task_inputs(task):
    """The :class:`TaskRef` arguments of a task (a keyword argument is a reference or a list that may hold some)."""
    for value in task.kwargs.values():
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, TaskRef):
                yield ref


def last_readers(plan):
    """``{i: [j, ...]}``: the tasks whose result is read for the last time by task i."""
    last = {}
    for i, task in enumerate(plan.tasks):
        for ref in task_inputs(task):
            last[ref.id] = i
    by_reader = {}
    for j, i in last.items():
        by_reader.setdefault(i, []).append(j)
    return by_reader
