"""A job's parameter search: its candidates, its inner folds, and the choice among them.

Plain functions, no Dask and no I/O. The fold engine
(:mod:`dimbsvm.model_selection.searched_folds`) turns a :class:`Search` into
tasks: every (outer fold, inner fold, candidate, member) is a task of the same
plan as the outer folds, and each outer fold's model is refitted with the
candidate its own training rows chose (nested cross-validation).

The choice follows :class:`sklearn.model_selection.GridSearchCV` with an
integer ``cv``: inner folds are an unshuffled :class:`StratifiedKFold` of the
outer training rows, a candidate's score is the mean over its inner folds,
and ties go to the first candidate in order; a candidate whose mean is NaN
(a metric undefined on a fold, or a fit that failed with the default
``error_score``) is never preferred to one with a number. A candidate that
raises on an inner fold is recorded with its error and scored
``error_score``, as GridSearchCV does; only when every fit of every candidate
fails does the search stop.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid, ParameterSampler, StratifiedKFold

from ..exceptions import JobSpecError
from .scoring import TIME_METRICS

__all__ = ["DISTRIBUTIONS", "MAX_CANDIDATES", "STAGE_PREFIX", "Search", "candidate_params", "estimator_params",
           "inner_splits", "select_candidate", "stage_params"]

logger = logging.getLogger(__name__)

#: Distributions a random search may draw a parameter from (``{name: [low, high]}`` in a job).
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform")

#: More candidates than this is almost certainly a mistake in the job (a grid multiplies).
MAX_CANDIDATES = 10_000


@dataclass(frozen=True)
class Search:
    """A validated search: the candidates' parameters and how one is chosen.

    Attributes
    ----------
    candidates : list of dict
        Parameters set on the job's estimator, one dict per candidate, in order.
    n_splits : int
        Inner stratified folds of each outer training fold.
    scoring : str
        The quality metric maximised (mean over the inner folds).
    floor : dict
        ``{metric: value}``: a candidate whose mean of any of these metrics is
        below its value is chosen only if no candidate reaches every floor.
    error_score : float or "raise"
        The score of every metric of an inner fold on which a candidate
        raised (its error is recorded); ``"raise"``: the error stops the
        search. NaN (the default, as in GridSearchCV) ranks the candidate
        last.
    """

    candidates: list
    n_splits: int = 3
    scoring: str = "g_mean"
    floor: dict = field(default_factory=dict)
    error_score: float | str = float("nan")

    def __post_init__(self):
        if self.error_score != "raise" and (isinstance(self.error_score, bool)
                                            or not isinstance(self.error_score, (int, float))):
            raise JobSpecError(f"'search.error_score' must be a number or 'raise'; got {self.error_score!r}")

    def estimators(self, template) -> list:
        """Unfitted clones of ``template``, one per candidate, with its estimator parameters set."""
        return [clone(template).set_params(**estimator_params(params)) for params in self.candidates]

    def feature_sets(self, features) -> list | None:
        """Per candidate, unfitted clones of the feature stages with its stage parameters set.

        ``None`` when no candidate sets a stage parameter (every candidate
        uses ``features`` as given).
        """
        if not any(stage_params(params) for params in self.candidates):
            return None
        sets = []
        for params in self.candidates:
            override = stage_params(params)
            sets.append([clone(stage).set_params(**override.get(i, {})) for i, stage in enumerate(features)])
        return sets

    @property
    def metrics(self) -> tuple:
        """The metrics every inner fold records: the objective, the floors, and the times (for the cost)."""
        return tuple(dict.fromkeys((self.scoring, *self.floor, *TIME_METRICS)))


#: A search key ``features.<i>.<parameter>`` sets a parameter of the job's feature stage ``i``.
STAGE_PREFIX = "features."


def estimator_params(params: dict) -> dict:
    """A candidate's estimator parameters (every key that is not a stage's)."""
    return {k: v for k, v in params.items() if not k.startswith(STAGE_PREFIX)}


def stage_params(params: dict) -> dict:
    """A candidate's feature-stage parameters, ``{stage index: {parameter: value}}``.

    Examples
    --------
    >>> stage_params({"C": 1, "features.0.references": 50})
    {0: {'references': 50}}
    """
    out = {}
    for key, value in params.items():
        if key.startswith(STAGE_PREFIX):
            index, _, name = key[len(STAGE_PREFIX):].partition(".")
            if not index.isdigit() or not name:
                raise JobSpecError(f"'search.params.{key}': a stage parameter is written features.<index>.<name>, "
                                   "e.g. features.0.references")
            out.setdefault(int(index), {})[name] = value
    return out


def candidate_params(space: dict, *, method: str = "grid", n_candidates: int | None = None,
                     random_state: int = 0) -> list[dict]:
    """The candidates of a search space, in a fixed order.

    Parameters
    ----------
    space : dict
        ``{parameter: values}``. For ``method="grid"`` every value is a list;
        for ``"random"`` a list (drawn from uniformly) or ``{distribution:
        [low, high]}`` with a distribution of :data:`DISTRIBUTIONS`
        (``int_uniform`` includes ``high``).
    method : {"grid", "random"}
    n_candidates : int
        How many settings a random search draws.
    random_state : int
        Seed of the random draws.

    Returns
    -------
    list of dict
        scikit-learn's :class:`ParameterGrid` order for a grid, its
        :class:`ParameterSampler` draws for a random search.

    Examples
    --------
    >>> candidate_params({"C": [1, 10], "gamma": [0.1]})
    [{'C': 1, 'gamma': 0.1}, {'C': 10, 'gamma': 0.1}]
    >>> len(candidate_params({"C": {"log_uniform": [0.01, 100]}}, method="random", n_candidates=5))
    5
    """
    if not space:
        raise JobSpecError("'search.params' is empty; give at least one parameter and its values")
    if method == "grid":
        for name, values in space.items():
            if not isinstance(values, list) or not values:
                raise JobSpecError(f"'search.params.{name}' must be a non-empty list of values for a grid search; "
                                   f"got {values!r}")
        size = math.prod(len(values) for values in space.values())
        if size > MAX_CANDIDATES:
            raise JobSpecError(f"'search.params' makes a grid of {size} candidates (at most {MAX_CANDIDATES}); "
                               "use 'method: random' with 'n_candidates'")
        return [dict(candidate) for candidate in ParameterGrid(space)]
    if method != "random":
        raise JobSpecError(f"'search.method' is {method!r}; accepted: grid, random")
    if not n_candidates or n_candidates < 1:
        raise JobSpecError("a random search needs 'search.n_candidates' (at least 1)")
    if n_candidates > MAX_CANDIDATES:
        raise JobSpecError(f"'search.n_candidates' is {n_candidates}; at most {MAX_CANDIDATES}")
    distributions = {name: _distribution(name, values) for name, values in space.items()}
    drawn = ParameterSampler(distributions, n_iter=int(n_candidates), random_state=int(random_state))
    return [{name: _plain(value) for name, value in candidate.items()} for candidate in drawn]


def _distribution(name, values):
    if isinstance(values, list):
        if not values:
            raise JobSpecError(f"'search.params.{name}' is an empty list")
        return values
    if not (isinstance(values, dict) and len(values) == 1 and next(iter(values)) in DISTRIBUTIONS):
        raise JobSpecError(f"'search.params.{name}' must be a list of values or one of "
                           f"{{{', '.join(f'{d}: [low, high]' for d in DISTRIBUTIONS)}}}; got {values!r}")
    [(kind, bounds)] = values.items()
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds)
            and bounds[0] < bounds[1]):
        raise JobSpecError(f"'search.params.{name}.{kind}' must be [low, high] with low < high; got {bounds!r}")
    low, high = bounds
    if kind == "uniform":
        return stats.uniform(low, high - low)
    if kind == "log_uniform":
        if low <= 0:
            raise JobSpecError(f"'search.params.{name}.log_uniform' needs low > 0; got {low!r}")
        return stats.loguniform(low, high)
    if not all(isinstance(b, int) for b in bounds):
        raise JobSpecError(f"'search.params.{name}.int_uniform' needs integer bounds; got {bounds!r}")
    return stats.randint(low, high + 1)


def _plain(value):
    """A drawn value as a plain Python number (JSON- and YAML-friendly)."""
    return value.item() if isinstance(value, np.generic) else value


def inner_splits(y_train, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inner folds of one outer training fold, as positions in it (``GridSearchCV(cv=n_splits)``'s folds).

    Raises
    ------
    ValueError
        When a class has fewer rows than ``n_splits``, naming the counts.
    """
    y_train = np.asarray(y_train)
    labels, counts = np.unique(y_train, return_counts=True)
    if counts.min() < n_splits:
        raise ValueError(f"the search's {n_splits} inner folds need at least {n_splits} rows of every class in "
                         f"each training fold; class {_plain(labels[counts.argmin()])!r} has {counts.min()}")
    return list(StratifiedKFold(n_splits=n_splits).split(np.zeros(len(y_train)), y_train))


def select_candidate(inner, *, search: Search) -> dict:
    """Choose a candidate from its inner-fold scores.

    Parameters
    ----------
    inner : list of dict
        One record per (candidate, inner fold): ``candidate``,
        ``inner_fold`` and the :attr:`Search.metrics`.
    search : Search

    Returns
    -------
    dict
        ``index`` and ``params`` of the chosen candidate, ``floor_met``
        (False: no candidate reached every floor, the one closest to them was
        chosen), ``candidates`` (one row per candidate: ``mean_<metric>``,
        ``std_<metric>``, ``fit_time`` and ``predict_time`` summed over its
        inner folds, ``rank``, ``n_failed``: inner folds on which it raised),
        ``search_time`` (every candidate's fit and predict time and each
        inner fold's prepare time, once per stage setting), ``n_failed``
        (failed inner fits in all), ``failures`` (``candidate``,
        ``inner_fold``, ``error`` of each) and ``inner`` (the records given).

    Raises
    ------
    ValueError
        When every candidate failed on every inner fold (naming the first error).
    """
    n = len(search.candidates)
    failures = [{"candidate": r["candidate"], "inner_fold": r["inner_fold"], "error": r["error"]}
                for r in sorted(inner, key=lambda r: (r["candidate"], r["inner_fold"])) if "error" in r]
    if inner and len(failures) == len(inner):
        first = next(r for r in inner if (r["candidate"], r["inner_fold"]) == (failures[0]["candidate"],
                                                                               failures[0]["inner_fold"]))
        raise ValueError(f"every one of the search's {len(inner)} inner fits failed; the first (candidate "
                         f"{failures[0]['candidate']} {search.candidates[failures[0]['candidate']]}, inner fold "
                         f"{failures[0]['inner_fold']}):\n{first.get('traceback') or failures[0]['error']}")
    by_candidate = [[r for r in inner if r["candidate"] == c] for c in range(n)]
    rows = []
    for c, records in enumerate(by_candidate):
        records = sorted(records, key=lambda r: r["inner_fold"])
        row = {"candidate": c, "params": search.candidates[c], "n_inner": len(records),
               "n_failed": sum("error" in r for r in records)}
        for name in search.metrics:
            if name in TIME_METRICS:
                row[name] = float(sum(r.get(name, 0.0) for r in records))
            else:
                values = np.array([r.get(name, np.nan) for r in records], dtype=float)
                row[f"mean_{name}"] = float(np.mean(values)) if len(values) else float("nan")
                row[f"std_{name}"] = float(np.std(values)) if len(values) else float("nan")
        rows.append(row)
    scores = np.array([row[f"mean_{search.scoring}"] for row in rows])
    ranks = _ranks(scores)
    for row, rank in zip(rows, ranks):
        row["rank"] = int(rank)
    # margin to the floors: >= 0 when every floor is reached
    margins = np.array([min((row[f"mean_{m}"] - v for m, v in search.floor.items()), default=0.0)
                        for row in rows])
    margins = np.where(np.isnan(margins), -np.inf, margins)
    eligible = margins >= 0
    if eligible.any():
        index = int(np.argmin(np.where(eligible, ranks, n + 1)))
    else:
        index = int(np.argmax(margins))  # first of the closest to the floors
        logger.warning("no candidate reached the floor(s) %s; chose candidate %d (closest)", search.floor, index)
    # each inner fold's prepare is shared by the candidates of one stage setting: counted once
    prepares = {(r["inner_fold"], json.dumps(stage_params(search.candidates[r["candidate"]]), sort_keys=True,
                                             default=str)): r.get("prepare_time", 0.0) for r in inner}
    search_time = float(sum(row.get(name, 0.0) for row in rows for name in TIME_METRICS) + sum(prepares.values()))
    if failures:
        logger.info("%d of %d inner fits failed and scored %s; the first (candidate %d): %s", len(failures),
                    len(inner), search.error_score, failures[0]["candidate"], failures[0]["error"])
    return {"index": index, "params": search.candidates[index], "floor_met": bool(eligible.any()),
            "search_time": search_time, "n_failed": len(failures), "failures": failures, "candidates": rows,
            "inner": list(inner)}


def _ranks(scores):
    """GridSearchCV's ranks: 1 for the largest mean, ties share the smallest rank, NaN ranked last."""
    if np.isnan(scores).all():
        return np.ones(len(scores), dtype=int)
    filled = np.where(np.isnan(scores), np.nanmin(scores) - 1, scores)
    return stats.rankdata(-filled, method="min").astype(int)
