"""Members of several base-estimator settings, ranked and combined on their out-of-bag margins.

An :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier` with a
``param_grid`` fits ``n_estimators`` members for every candidate setting of
its base estimator (e.g. every ``(C, gamma)``), all candidates on the same
bags. Each candidate's pooled out-of-bag margins are an honest view of how
it ranks rows it did not see: the candidates are ranked by their
out-of-bag ROC-AUC, and the members of the ``top_candidates`` best are kept.
Their margins are put on one scale first (each candidate's divided by the
standard deviation of its pooled out-of-bag margins), so that the ensemble's
mean margin weighs the candidates alike whatever their ``C``.

With screening (successive halving in two rounds), every setting first
gets a few members, and only the settings whose few members rank the rows
best get all of theirs (:func:`screen_survivors`).

Why averaging the best few rather than keeping the best one, and what
screening costs in quality, with the measurements, is in
``benchmarks/search_study.md``. Plain numpy and
scikit-learn: no Dask, no I/O.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import ParameterGrid

from dimbsvm.svm.members import pooled_oob_margins

__all__ = [
    "candidate_settings",
    "keep_best_settings",
    "oob_auc_and_spread",
    "rank_candidates",
    "Screen",
    "ScreeningPlan",
    "screen_survivors",
    "screened_search_results",
    "standardised",
]

logger = logging.getLogger(__name__)


def candidate_settings(param_grid, estimator) -> list[dict]:
    """Every setting of ``param_grid`` (scikit-learn's ``ParameterGrid``), checked against ``estimator``.

    Raises
    ------
    ValueError
        A key that is not a parameter of the base estimator.

    Examples
    --------
    >>> from sklearn.svm import SVC
    >>> candidate_settings({"C": [1, 10], "gamma": [0.5]}, SVC())
    [{'C': 1, 'gamma': 0.5}, {'C': 10, 'gamma': 0.5}]
    """
    settings = list(ParameterGrid(param_grid))
    valid = estimator.get_params(deep=True)
    unknown = sorted({key for setting in settings for key in setting} - set(valid))
    if unknown:
        raise ValueError(f"param_grid names {', '.join(map(repr, unknown))}, not parameter(s) of the base "
                         f"estimator {type(estimator).__name__}; accepted: {', '.join(sorted(valid))}")
    return settings


def rank_candidates(members_by_candidate, positive, sample_weight=None) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-bag ROC-AUC and margin spread of each candidate's members.

    Parameters
    ----------
    members_by_candidate : list of list of OTHRMember
        Fitted with ``keep_oob=True``.
    positive : ndarray of bool of shape (n_samples,)
        The minority rows of the training data.
    sample_weight : ndarray of shape (n_samples,), default=None
        The rows' weights in the ROC-AUC (the spread stays unweighted: a scale).

    Returns
    -------
    auc : ndarray of shape (n_candidates,)
        ROC-AUC of the pooled out-of-bag margins on the rows some member left
        out; NaN where those rows miss a class.
    spread : ndarray of shape (n_candidates,)
        Standard deviation of the same margins (1 where it is 0 or undefined).
    """
    views = [oob_auc_and_spread(*pooled_oob_margins(members, positive.size), positive, sample_weight)
             for members in members_by_candidate]
    return np.array([auc for auc, _ in views]), np.array([spread for _, spread in views])


def oob_auc_and_spread(margins, counts, positive, sample_weight=None) -> tuple[float, float]:
    """ROC-AUC and standard deviation of pooled out-of-bag ``margins`` over the rows with ``counts > 0``.

    The AUC is NaN where those rows miss a class; the spread is 1 where it
    is 0 or undefined (nothing to rescale). ``sample_weight``: the rows' weights in the AUC.
    """
    rows = counts > 0
    weights = None if sample_weight is None else np.asarray(sample_weight)[rows]
    auc = (roc_auc_score(positive[rows], margins[rows], sample_weight=weights)
           if 0 < positive[rows].sum() < rows.sum() else np.nan)
    deviation = float(np.std(margins[rows])) if rows.any() else 0.0
    return auc, (deviation if deviation > 0 else 1.0)


def standardised(members, spread: float) -> list:
    """``members`` with margins (and kept out-of-bag margins) divided by ``spread``."""
    return [dataclasses.replace(member, margin_sign=member.margin_sign / spread,
                                oob_margins=None if member.oob_margins is None else member.oob_margins / spread)
            for member in members]


def keep_best_settings(settings, members, positive, top: int, sample_weight=None):
    """Rank ``settings`` on their members' out-of-bag margins and keep the ``top`` best.

    Parameters
    ----------
    settings : list of dict
        The candidate settings (:func:`candidate_settings`).
    members : list of OTHRMember
        ``len(members) // len(settings)`` members per setting, setting by
        setting, fitted with ``keep_oob=True``.
    positive : ndarray of bool
        The minority rows of the training data.
    top : int
        How many settings to keep (at most all of them).
    sample_weight : ndarray of shape (n_samples,), default=None
        The training rows' weights in the ROC-AUC.

    Returns
    -------
    kept : ndarray of int
        The kept settings, best out-of-bag ROC-AUC first (ties: grid order).
    members : list of OTHRMember
        Their members, standardised (:func:`standardised`), in that order.
    results : dict of ndarray
        ``params``, ``oob_auc``, ``oob_spread`` and ``kept`` per setting.

    Raises
    ------
    ValueError
        No setting's out-of-bag rows hold both classes.
    """
    groups = _groups(members, len(settings))
    auc, spread = rank_candidates(groups, positive, sample_weight)
    if np.all(np.isnan(auc)):
        raise ValueError("param_grid needs out-of-bag rows of both classes to rank the settings; these "
                         "bags left none of one class out (use more rows or members)")
    kept = _best_first(auc)[:min(top, len(settings))]
    logger.info("kept settings %s of %d by out-of-bag ROC-AUC %s", [settings[i] for i in kept], len(settings),
                np.round(auc[kept], 4).tolist())
    results = {"params": np.array(settings, dtype=object), "oob_auc": auc, "oob_spread": spread,
               "kept": np.isin(np.arange(len(settings)), kept)}
    return kept, [member for i in kept for member in standardised(groups[i], spread[i])], results


def _groups(members, n_groups: int) -> list:
    """``members`` cut into ``n_groups`` equal runs (setting by setting)."""
    per_group = len(members) // n_groups
    return [members[i * per_group:(i + 1) * per_group] for i in range(n_groups)]


def _best_first(auc) -> np.ndarray:
    """Positions of ``auc`` from the best down (NaN last, ties in grid order)."""
    return np.argsort(-np.nan_to_num(auc, nan=-np.inf), kind="stable")


@dataclass(frozen=True)
class Screen:
    """What the screening round found.

    Attributes
    ----------
    survivors : ndarray of int
        Positions in the settings, best pooled out-of-bag ROC-AUC first
        (NaN last, ties in grid order).
    oob_auc : ndarray of shape (n_settings,)
        Every setting's pooled out-of-bag ROC-AUC of its screening members.
    """

    survivors: np.ndarray
    oob_auc: np.ndarray


def screen_survivors(settings, screened, positive, n_survivors: int, sample_weight=None) -> Screen:
    """The ``n_survivors`` settings whose screening members rank the training rows best.

    Parameters
    ----------
    settings : list of dict
    screened : list of OTHRMember
        The same number of members per setting, setting by setting, fitted
        with ``keep_oob=True``.
    positive : ndarray of bool
    n_survivors : int
    sample_weight : ndarray of shape (n_samples,), default=None
        The training rows' weights in the ROC-AUC.

    Returns
    -------
    Screen
        The survivors and every setting's screening ROC-AUC.

    Raises
    ------
    ValueError
        No setting's out-of-bag rows hold both classes.
    """
    auc, _ = rank_candidates(_groups(screened, len(settings)), positive, sample_weight)
    if np.all(np.isnan(auc)):
        raise ValueError("screen_members needs out-of-bag rows of both classes to screen the settings; these "
                         "bags left none of one class out (use more screening members or rows)")
    survivors = _best_first(auc)[:n_survivors]
    logger.info("screening: %d of %d settings go on, out-of-bag ROC-AUC %s", survivors.size, len(settings),
                np.round(auc[survivors], 4).tolist())
    return Screen(survivors, auc)


def screened_search_results(settings, screen: Screen, survivor_results) -> dict:
    """``search_results_`` over every setting: the screening round's view and the survivors' final one.

    ``survivor_results`` is :func:`keep_best_settings`'s ``results`` over the
    survivors (in ``screen.survivors`` order); settings that did not survive
    get NaN ``oob_auc`` and ``oob_spread`` and are not kept.
    """
    n, survivors = len(settings), np.asarray(screen.survivors)
    results = {"params": np.array(settings, dtype=object), "screen_oob_auc": screen.oob_auc,
               "survived": np.isin(np.arange(n), survivors), "oob_auc": np.full(n, np.nan),
               "oob_spread": np.full(n, np.nan), "kept": np.zeros(n, dtype=bool)}
    for key in ("oob_auc", "oob_spread", "kept"):
        results[key][survivors] = survivor_results[key]
    return results


@dataclass(frozen=True)
class ScreeningPlan:
    """A screening grid's members before fitting (successive halving in two rounds).

    Round one: the first ``n_screen`` seeds for every setting, setting by
    setting; round two, once the ``n_survivors`` best settings are known:
    the remaining seeds for each of them, survivor by survivor.

    Attributes
    ----------
    seeds : ndarray of int
        The ``n_estimators`` seeds every setting's members use (the same bags
        for every setting).
    settings : list of dict
        The grid's settings, in grid order.
    specs : tuple of MemberSpec
        One per setting.
    n_screen : int
    n_survivors : int
    """

    seeds: np.ndarray
    settings: list
    specs: tuple
    n_screen: int
    n_survivors: int

    def first_round(self) -> list:
        """``[(seed, spec)]`` of the screening members, setting by setting."""
        return [(int(seed), spec) for spec in self.specs for seed in self.seeds[:self.n_screen]]

    @property
    def n_added(self) -> int:
        """How many members the second round fits."""
        return (len(self.seeds) - self.n_screen) * self.n_survivors

    def second_round(self, survivors) -> list:
        """``[(seed, spec)]`` of the members the ``survivors`` get, survivor by survivor."""
        return [(int(seed), self.specs[i]) for i in survivors for seed in self.seeds[self.n_screen:]]

    def survivor_members(self, screened, added, survivors) -> list:
        """Each survivor's members in seed order (its screening members, then its added ones), survivor by survivor."""
        first, rest = self.n_screen, len(self.seeds) - self.n_screen
        return [member for rank, i in enumerate(survivors)
                for member in (list(screened[i * first:(i + 1) * first]) + list(added[rank * rest:(rank + 1) * rest]))]
