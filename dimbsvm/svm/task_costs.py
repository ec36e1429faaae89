"""What each task of a fold costs before it runs, in seconds of one core, from sizes alone.

The fold engine gives these to its task plan, and progress counts finished
work by them (:meth:`dimbsvm.parallel.tasks.TaskPlan.task_costs`): an
ensemble's members are many and short and finish first, while each fold's
finish (every member scoring the test rows, the shared threshold searched)
comes last; counted as equal tasks they made the time left far too short
near the end. A job is also priced by them before it runs (the sum over
the plan it would submit, :mod:`dimbsvm.jobs.plan_price`), and the cost
model's one factor (:mod:`dimbsvm.jobs.cost`) turns that price into this
machine's seconds, so here too the ratios between tasks matter more than
the level. The constants are rough: measured on one machine with 20 to 64
features, and compared with the tasks' compute time in
benchmarks/RESULTS.md ("Progress: ... every task counted at its estimated
cost"; the cost-model section reports the values its calibration runs
would fit). Tasks without a cost (the threshold's value-range tasks and
small bookkeeping) count as the plan's median task in progress, and as
:data:`TASK_SECONDS` in a price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .bagging import bag_rows
from .fit_cost import fit_row_cost, margin_fits, uses_linear_solver
from .scaled_defaults import with_scaled_defaults
from .threshold import smoothed_count_evaluations

__all__ = ["ASSEMBLE_ROW_SECONDS", "BAG_ROW_SECONDS", "FEATURE_STAGE_SHARE", "KERNEL_FIT_SECONDS", "KERNEL_SCORE_SECONDS",
           "LINEAR_FIT_SECONDS", "LINEAR_SCORE_SECONDS", "PREPARE_ROW_SECONDS", "READ_ROW_SECONDS", "SMOOTHING_SECONDS",
           "TASK_SECONDS", "FoldCosts", "prepare_seconds", "read_seconds", "stored_stage_seconds"]

#: Seconds per row-fit (:mod:`dimbsvm.svm.fit_cost`) of a LIBLINEAR fit.
LINEAR_FIT_SECONDS = 3e-6
#: Seconds per row-fit of a kernel fit (row-fits already weight its rows about quadratically).
KERNEL_FIT_SECONDS = 7e-7
#: Seconds of scoring one row with a linear model.
LINEAR_SCORE_SECONDS = 7e-8
#: Seconds of scoring one row with a kernel model, per row the model was fitted on (its support vectors
#: grow with them).
KERNEL_SCORE_SECONDS = 5e-9
#: Seconds of reading one stored row (a chunk's read task: its scaler statistics, its members' bags).
READ_ROW_SECONDS = 1e-6
#: Seconds of preparing one training row in a prepare task: taken out of the data, the scaler fitted, the row
#: scaled and kept scaled for the members (about two reads).
PREPARE_ROW_SECONDS = 2e-6
#: Seconds per training row of drawing a member's bag from the fold's labels (a store's member_bags task draws a fold's).
BAG_ROW_SECONDS = 5e-8
#: Seconds per training row of assembling an ensemble: pooling its members' out-of-bag margins, sorting them.
ASSEMBLE_ROW_SECONDS = 1.2e-6
#: Seconds per kernel evaluation of a smoothed threshold search (:func:`~dimbsvm.svm.threshold.smoothed_count_evaluations`).
SMOOTHING_SECONDS = 7e-9
#: Seconds every task costs whatever it does (sent, run, its result kept): about what a task that computes
#: nothing takes from submission to its result on a local cluster.
TASK_SECONDS = 2e-3
#: A feature stage's fit (kNN graph, distances to references) as a share of a kernel fit on the same rows: the
#: ratio of the two kinds' seconds per row-fit in the cost model that preceded the plan's price, rounded.
FEATURE_STAGE_SHARE = 0.07


@dataclass(frozen=True)
class FoldCosts:
    """The costs of one fold's tasks, in seconds of one core.

    Attributes
    ----------
    n_train, n_test : int
        The fold's training and test rows.
    n_parts : int
        Parts fitted (an ensemble's members, or 1).
    part_fit : float
        Fitting one part.
    part_score_row : float
        Scoring one row with one part.
    part_oob_rows : float
        Rows each member scores out of its bag in its own task (0 where the
        margins are pooled elsewhere or not needed).
    assembly : float
        Assembling the model from its parts (an ensemble's shared threshold; 0 for one part).
    n_feature_stages : int
        Feature stages fitted in the prepare task.
    """

    n_train: int
    n_test: int
    n_parts: int
    part_fit: float
    part_score_row: float
    part_oob_rows: float = 0.0
    assembly: float = 0.0
    n_feature_stages: int = 0

    @classmethod
    def of(cls, estimator, parts, *, n_train: int, n_test: int, n_minority: int, n_feature_stages: int = 0):
        """The costs of a fold of ``estimator`` fitted in ``parts`` (:func:`~dimbsvm.svm.parts.parts_of`).

        Examples
        --------
        >>> from sklearn.svm import SVC
        >>> from dimbsvm.svm.parts import Part
        >>> costs = FoldCosts.of(SVC(), [Part(0)], n_train=800, n_test=200, n_minority=40)
        >>> round(costs.part(), 6), round(costs.finish(), 6)
        (0.00648, 0.0028)
        """
        members = [part.member for part in parts if part.member is not None]
        if not members:
            configured = with_scaled_defaults(estimator, n_train, n_minority)
            return cls(n_train, n_test, 1, _fit_seconds(n_train, configured, margins_of=configured),
                       _score_seconds(n_train, configured), n_feature_stages=n_feature_stages)
        spec = members[0]
        bag = bag_rows(n_train, n_minority, bootstrap=spec.bootstrap, max_samples=spec.max_samples)
        # rows never drawn into a bag of this many draws with replacement, expected
        oob = n_train * math.exp(-bag / max(n_train, 1)) if spec.keep_oob is True or spec.margins == "oob" else 0.0
        assembly = ASSEMBLE_ROW_SECONDS * n_train
        if getattr(estimator, "smoothing", None) is not None:  # the shared threshold's smoothed search: two counts
            assembly += 2 * SMOOTHING_SECONDS * smoothed_count_evaluations(n_train)
        return cls(n_train, n_test, len(parts), _fit_seconds(bag, spec.estimator, margins_of=estimator),
                   _score_seconds(bag, spec.estimator),
                   part_oob_rows=oob, assembly=assembly, n_feature_stages=n_feature_stages)

    def prepare(self) -> float:
        """The prepare task: the training rows read and scaled, feature stages fitted."""
        return prepare_seconds(self.n_train, self.n_feature_stages)

    def part(self) -> float:
        """One part's task: its fit, and a member's scoring of its out-of-bag rows."""
        return TASK_SECONDS + self.part_fit + self.part_oob_rows * self.part_score_row

    def assemble(self) -> float:
        """Assembling the model from its parts."""
        return TASK_SECONDS + self.assembly

    def scored(self, rows: float) -> float:
        """Every part scoring ``rows`` rows (test rows, or a chunk's out-of-bag margins)."""
        return TASK_SECONDS + rows * self.n_parts * self.part_score_row

    def finish(self) -> float:
        """The in-memory finish task: the model assembled and the test rows scored."""
        return self.assemble() + self.scored(self.n_test) - TASK_SECONDS

    def bag(self) -> float:
        """Drawing one member's bag from the fold's labels."""
        return TASK_SECONDS + BAG_ROW_SECONDS * self.n_train

    @staticmethod
    def read(rows: float) -> float:
        """Reading ``rows`` stored rows (a chunk's scaler statistics, its members' bags)."""
        return read_seconds(rows)


def prepare_seconds(n_train: int, n_feature_stages: int = 0) -> float:
    """A fold's prepare task: its ``n_train`` training rows read and scaled, its feature stages fitted."""
    return TASK_SECONDS + PREPARE_ROW_SECONDS * n_train + n_feature_stages * stored_stage_seconds(n_train)


def stored_stage_seconds(n_rows: int) -> float:
    """A stored feature stage's build (a kNN graph or distances to references over every row), before the folds."""
    return FEATURE_STAGE_SHARE * KERNEL_FIT_SECONDS * fit_row_cost(n_rows, None)


def read_seconds(rows: float) -> float:
    """Reading ``rows`` stored rows (a chunk's scaler statistics, its members' bags)."""
    return TASK_SECONDS + READ_ROW_SECONDS * rows


def _fit_seconds(rows: float, estimator, *, margins_of) -> float:
    """One fit of ``estimator`` on ``rows`` rows, with the inner fits that give ``margins_of``'s threshold rule
    its out-of-fold margins (:func:`~dimbsvm.svm.fit_cost.margin_fits`)."""
    seconds = LINEAR_FIT_SECONDS if uses_linear_solver(estimator) else KERNEL_FIT_SECONDS
    return sum(fits * seconds * fit_row_cost(fit_rows, estimator) for fits, fit_rows in margin_fits(margins_of, rows))


def _score_seconds(model_rows: float, estimator) -> float:
    return LINEAR_SCORE_SECONDS if uses_linear_solver(estimator) else KERNEL_SCORE_SECONDS * model_rows

