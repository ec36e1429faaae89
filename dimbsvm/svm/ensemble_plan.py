"""What an :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier` fits, planned from its labels or their counts.

The ensemble's members are known before any is fitted: one seed each, drawn
from ``random_state``, and one :class:`~dimbsvm.svm.members.MemberSpec` per
setting of ``param_grid``. :class:`MemberPlanning` gives them to the
ensemble's own ``fit`` and to drivers that fit members elsewhere (the fold
engine: :meth:`~MemberPlanning.plan_members`, then
:meth:`~MemberPlanning.fit_from_members`), and sizes the bags and classes from
labels or from :class:`~dimbsvm._counts.ClassCounts` alone, and assembles the
fitted members into the ensemble (the kept settings of ``param_grid``, the
shared shift on the pooled out-of-bag margins).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

from dimbsvm._counts import ClassCounts
from dimbsvm.svm._base import binary_classes, default_estimator, positive_label
from dimbsvm.svm.calibration import platt_fit
from dimbsvm.svm.grid_members import ScreeningPlan, candidate_settings, keep_best_settings, screened_search_results
from dimbsvm.svm.members import MemberPlan, MemberSpec
from dimbsvm.svm.scaled_defaults import LARGE_N, large_n_estimator
from dimbsvm.svm.shared_threshold import search_shared_shift, with_shared_shift

__all__ = ["MemberPlanning"]

_MAX_SEED = np.iinfo(np.int32).max


class MemberPlanning:
    """The planning and assembling half of :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier` (a mixin of it).

    The methods read the ensemble's parameters and set ``classes_``,
    ``pos_label_``, ``max_samples_`` and ``seeds_``; the assembly of fitted
    members (:meth:`fit_from_members`, :meth:`fit_from_screened`) finishes in
    ``_set_members``: the kept settings, the shared shift and the fitted
    attributes.
    """

    def _screening_plan(self) -> ScreeningPlan:
        seeds, settings, specs = self._grid_specs()
        return ScreeningPlan(seeds, settings, tuple(specs), int(self.screen_members), int(self.screen_survivors))

    def _assemble_screened(self, X, positive, plan, screened, added, screen, sample_weight=None):
        survivors = screen.survivors
        self.seeds_ = np.tile(plan.seeds, len(survivors))
        self._set_members(X, positive, plan.survivor_members(screened, added, survivors),
                          settings=[plan.settings[i] for i in survivors], sample_weight=sample_weight)
        self.search_results_ = screened_search_results(plan.settings, screen, self.search_results_)
        return self

    def _set_members(self, X, positive, members, pooled_margins=None, shared_shift=None, settings=None,
                     sample_weight=None):
        """Finish fitting from fitted members: the shared shift (if pooled) and the attributes.

        ``settings``: the grid settings the members belong to, setting by
        setting (default: all of ``param_grid``'s). ``sample_weight``: the
        training rows' weights, counted by the shared search.
        """
        if self.probability and self.threshold != "pooled_oob":
            raise ValueError("probability=True calibrates the pooled out-of-bag margins: it needs "
                             f"threshold='pooled_oob', got threshold={self.threshold!r}")
        for stale in ("threshold_", "candidates_", "threshold_margins_", "platt_", "best_params_",
                      "search_results_"):
            self.__dict__.pop(stale, None)
        if self.param_grid is not None:
            if pooled_margins is not None:  # pooled over every setting's members: no ranking possible
                raise ValueError("param_grid ranks each setting on its own members' out-of-bag margins; "
                                 "margins pooled over all members cannot be used (pools_out_of_bag() is False)")
            members = self._keep_best_settings(positive, members, settings, sample_weight)
        self._pooled = self.threshold == "pooled_oob"
        if self._pooled:
            members = self._fit_shared_threshold(X, positive, members, self._threshold_search(),
                                                 pooled_margins, shared_shift, sample_weight)
        self.members_ = members
        self.estimators_ = [member.estimator for member in self.members_]
        self.thresholds_ = np.array([member.threshold for member in self.members_])
        self.optimal_thresholds_ = np.array(
            [member.optimal_threshold for member in self.members_]
        )
        return self

    def _keep_best_settings(self, positive, members, settings=None, sample_weight=None):
        """The members of the ``top_candidates`` settings of best out-of-bag ROC-AUC, on one scale."""
        if settings is None:
            settings = candidate_settings(self.param_grid, self._member_params().estimator)
        kept, members, self.search_results_ = keep_best_settings(settings, members, positive, self.top_candidates,
                                                                 sample_weight)
        self.best_params_ = [settings[i] for i in kept]
        per_setting = len(self.seeds_) // len(settings)
        self.seeds_ = np.concatenate([self.seeds_[i * per_setting:(i + 1) * per_setting] for i in kept])
        return members

    def _fit_shared_threshold(self, X, positive, members, search, pooled_margins=None, shift=None,
                              sample_weight=None):
        """Search one shift on the pooled out-of-bag margins (unless given); set it in every member."""
        if shift is None:
            shift = search_shared_shift(X, positive, members, search, pooled_margins=pooled_margins,
                                        n_neighbors=self.n_neighbors, knn_method=self.knn_method,
                                        random_state=int(self.seeds_[0]), max_candidates=self.max_candidates,
                                        sample_weight=sample_weight)
        elif sample_weight is not None:
            raise ValueError("a shared shift searched elsewhere cannot count sample_weight")
        elif self.probability:
            raise ValueError("probability=True calibrates on the pooled margins: the shift is searched here")
        self.threshold_margins_, self.threshold_, self.candidates_ = shift.margins_used, shift.theta, shift.table
        if self.probability:
            if self.threshold_margins_ != "oob":  # the training rows' own margins would make it overconfident
                raise ValueError("probability=True needs out-of-bag rows of both classes to calibrate on; "
                                 "these members' bags left none of one class out (use more rows or members)")
            # the shifted margin decision_function returns, on the rows each member did not see
            self.platt_ = platt_fit(shift.margins + self.threshold_, positive[shift.rows],
                                    None if sample_weight is None else np.asarray(sample_weight)[shift.rows])
        return with_shared_shift(members, self.threshold_, "pooled_" + self.threshold_margins_)

    def plan_screening(self, y) -> ScreeningPlan:
        """What :meth:`fit` does in its two rounds, from the labels alone (with ``screen_members``).

        For drivers that fit members elsewhere (the fold engine): fit
        ``plan.first_round()``, screen them with ``screen =
        screen_survivors(plan.settings, screened, y == pos_label_, plan.n_survivors)``,
        fit ``plan.second_round(screen.survivors)``, then :meth:`fit_from_screened`;
        this gives the ensemble ``fit(X, y)`` gives.

        Raises
        ------
        ValueError
            Without screening (:meth:`plans_members_up_front`: use :meth:`plan_members`).
        """
        self._validate_params()
        self._resolve_bags(*self._class_sizes(y))
        if not self._screens():
            raise ValueError("this ensemble does not screen its settings: its members are planned up front "
                             "(plan_members)")
        return self._screening_plan()

    def fit_from_screened(self, X, y, plan, screened, added, screen, *, sample_weight=None):
        """Finish fitting from the members of :meth:`plan_screening`'s two rounds.

        Parameters
        ----------
        X : ndarray or row handle of shape (n_samples, n_features)
            The training rows (read only when the shared shift needs rows).
        y : array-like of shape (n_samples,)
        plan : ScreeningPlan
        screened, added : list of OTHRMember
            The members of ``plan.first_round()`` and of
            ``plan.second_round(screen.survivors)``, in order.
        screen : Screen
            :func:`~dimbsvm.svm.grid_members.screen_survivors` of ``screened``.
        sample_weight : ndarray of shape (n_samples,), default=None
            The training rows' weights (see :meth:`fit_from_members`).

        Returns
        -------
        self : EnsembleOTHRClassifier
        """
        positive = self._prepare_assembly(X, y)
        return self._assemble_screened(X, positive, plan, list(screened), list(added), screen, sample_weight)

    def plans_members_up_front(self) -> bool:
        """Whether every member is known from the labels alone (:meth:`plan_members`).

        ``False`` when ``screen_members`` screens the settings: which
        settings get the second round's members depends on the first round's
        out-of-bag margins (:meth:`plan_screening`).
        """
        return not self._screens()

    def plan_members(self, y):
        """What :meth:`fit` would hand each member, from the labels alone.

        For drivers that fit members elsewhere (a job fans out one task per
        (repeat, fold, member)): ``plan.members[i].fit(X, y, plan.seeds[i])``
        for each member, then :meth:`fit_from_members` with ``plan.seeds``,
        gives the same ensemble as ``fit(X, y)``.

        Parameters
        ----------
        y : array-like of shape (n_samples,) or ClassCounts
            Training labels, two classes, or their counts alone (the members
            are planned from the counts: a driver need not hold the labels).

        Returns
        -------
        plan : MemberPlan
            One seed per member, drawn from ``random_state`` as :meth:`fit` does
            (with ``param_grid``: the same seeds for every setting, setting by
            setting), and each member's :class:`~dimbsvm.svm.members.MemberSpec`.
        """
        self._validate_params()
        self._resolve_bags(*self._class_sizes(y))
        if self._screens():
            raise ValueError("screen_members chooses the second round's settings on the first round's out-of-bag "
                             "margins: the members cannot be planned before fit (plans_members_up_front() is False)")
        seeds, specs = self._member_tasks()
        return MemberPlan(np.asarray(seeds), tuple(specs))

    def plan_fold_fit(self, context):
        """Add this ensemble's fit tasks of one fold to the fold engine's plan (:mod:`~dimbsvm.svm.ensemble_fold`).

        The hook by which the fold engine leaves an ensemble's bags, member
        tasks, pooled out-of-bag margins, shared threshold search and
        screening to it (:class:`~dimbsvm.fold_data.context.PlansFoldFit`).

        Parameters
        ----------
        context : FoldContext

        Returns
        -------
        FoldFit
        """
        from .ensemble_fold import plan_ensemble_fold

        return plan_ensemble_fold(self, context)

    def pools_out_of_bag(self) -> bool:
        """Whether the out-of-bag margins can be pooled over all members at once (a shared shift, no grid)."""
        return self.threshold == "pooled_oob" and self.param_grid is None

    def fit_from_members(self, X, y, members, seeds, *, pooled_margins=None, shared_shift=None, sample_weight=None):
        """Finish fitting from members fitted by :func:`fit_member` (see :meth:`plan_members`).

        Parameters
        ----------
        X : ndarray or row handle of shape (n_samples, n_features)
            The training rows the members drew from (preprocessed). Read only
            when the shared shift needs rows: ``candidates="othr"`` or no
            usable out-of-bag rows. A handle is read a block at a time.
        y : array-like of shape (n_samples,) or ClassCounts
            The labels, or with ``shared_shift`` (and no ``param_grid``)
            their :class:`~dimbsvm._counts.ClassCounts`: nothing then is read
            row by row.
        members : list of OTHRMember
            In seed order.
        seeds : ndarray of int
            The seeds the members were fitted with (with ``param_grid``: one
            per (setting, member), setting by setting, as :meth:`plan_members`
            returns them).
        pooled_margins : tuple of ndarray, default=None
            ``(margins, counts)`` as :func:`pooled_oob_margins` returns them,
            computed by the caller (members fitted with ``keep_oob="bag"``);
            by default they are pooled from the members' ``oob_margins``.
            A third entry may give ``np.argsort(margins, kind="stable")``
            (NaN last), which the shared search then checks and uses instead
            of sorting the margins itself.
        shared_shift : SharedShift, default=None
            The shared shift already searched by the caller on the pooled
            out-of-bag margins, exactly as the search here would find it
            (:mod:`dimbsvm.svm.range_threshold`, without ``probability``, which
            needs the margins); it is set instead of searching.
        sample_weight : ndarray of shape (n_samples,), default=None
            The training rows' weights, counted by the shared search (the
            members were fitted with them, :meth:`MemberSpec.fit
            <dimbsvm.svm.members.MemberSpec.fit>`).

        Returns
        -------
        self : EnsembleOTHRClassifier
        """
        if isinstance(y, ClassCounts) and (shared_shift is None or self.param_grid is not None):
            raise ValueError("members are assembled from class counts only with the shared shift searched "
                             "already and no param_grid: the labels are needed")
        positive = self._prepare_assembly(X, y)
        self.seeds_ = np.asarray(seeds)
        return self._set_members(X, positive, list(members), pooled_margins, shared_shift,
                                 sample_weight=sample_weight)

    def _prepare_assembly(self, X, y):
        """Classes, bag size and feature count for assembling members fitted elsewhere; the minority rows
        (``None`` for labels given by their :class:`~dimbsvm._counts.ClassCounts`)."""
        if isinstance(y, ClassCounts):
            positive = None
            self._resolve_bags(*self._class_sizes(y))
        else:
            positive = self._set_classes(y)
            self._resolve_bags(positive.size, int(np.count_nonzero(positive)))
        self.n_features_in_ = int(X.shape[1])
        return positive

    def _scaled_defaults(self, n_samples, n_minority):
        """Above ``LARGE_N`` training rows: ``estimator=None`` (without ``param_grid``, whose settings name the
        default's parameters) is ``LinearSVC()``; ``max_samples="auto"`` is bags of ``LARGE_N`` rows once
        ``None``'s bag would be larger."""
        scaled = {}
        if self.estimator is None and self.param_grid is None and n_samples > LARGE_N:
            scaled["estimator"] = large_n_estimator()
        if self.max_samples == "auto":
            default_bag = 2 * n_minority if self.bootstrap == "balanced" else n_samples
            if default_bag > LARGE_N:
                scaled["max_samples"] = LARGE_N
        return scaled

    def _resolve_bags(self, n_samples, n_minority):
        """Set ``max_samples_`` (and ``scaled_defaults_``) for training labels of these sizes."""
        scaled = self._resolve_defaults(int(n_samples), int(n_minority))
        self.max_samples_ = scaled.get("max_samples", None if self.max_samples == "auto" else self.max_samples)

    def _set_classes(self, y):
        y = np.asarray(y)
        self._learn_classes(y)
        return y == self.pos_label_

    def _learn_classes(self, y):
        """Set ``classes_`` and ``pos_label_`` from labels or their :class:`~dimbsvm._counts.ClassCounts`;
        the classes and their counts."""
        classes, counts = binary_classes(y, type(self).__name__)
        self.classes_ = classes
        self.pos_label_ = positive_label(classes, counts, self.pos_label)
        return classes, counts

    def _class_sizes(self, y):
        """Set ``classes_`` and ``pos_label_``; ``(n_samples, n_minority)`` of the labels (or their counts)."""
        classes, counts = self._learn_classes(y if isinstance(y, ClassCounts) else np.asarray(y))
        return int(counts.sum()), int(counts[classes == self.pos_label_][0])

    def _threshold_search(self):
        return dict(
            objective=self.objective,
            candidates=self.candidates,
            smoothing=self.smoothing,
            tolerance=self.tolerance,
            min_precision=self.min_precision,
        )

    def _member_tasks(self):
        """Seeds and :class:`MemberSpec` of every member to fit, in order."""
        seeds = check_random_state(self.random_state).randint(_MAX_SEED, size=self.n_estimators)
        if self.param_grid is None:
            return seeds, [self._member_params()] * len(seeds)
        seeds, _, specs = self._grid_specs(seeds)
        return np.tile(seeds, len(specs)), [spec for spec in specs for _ in seeds]

    def _grid_specs(self, seeds=None):
        """The members' seeds, ``param_grid``'s settings and one :class:`MemberSpec` per setting."""
        if self.threshold != "pooled_oob":
            raise ValueError("param_grid ranks settings on pooled out-of-bag margins: it needs "
                             f"threshold='pooled_oob', got threshold={self.threshold!r}")
        if seeds is None:
            seeds = check_random_state(self.random_state).randint(_MAX_SEED, size=self.n_estimators)
        base = self._member_params()
        settings = candidate_settings(self.param_grid, base.estimator)
        return seeds, settings, [replace(base, estimator=clone(base.estimator).set_params(**s)) for s in settings]

    def _member_params(self):
        """The :class:`MemberSpec` shared by every member (all but the seed)."""
        scaled = getattr(self, "scaled_defaults_", {}).get("estimator")
        estimator = (clone(scaled) if scaled is not None else default_estimator() if self.estimator is None
                     else clone(self.estimator))
        if self.class_weight is not None:
            if "class_weight" not in estimator.get_params():
                raise ValueError(
                    f"class_weight={self.class_weight!r} needs a base estimator with a "
                    f"class_weight parameter; {type(estimator).__name__} has none."
                )
            estimator.set_params(class_weight=self.class_weight)
        pooled = self.threshold == "pooled_oob"
        return MemberSpec(
            pos_label=self.pos_label_,
            estimator=estimator,
            bootstrap=self.bootstrap,
            max_samples=self.max_samples_,
            margins="none" if pooled else self.member_margins,
            cv=self.cv,
            perturbation=0.0 if pooled else self.perturbation,
            n_neighbors=self.n_neighbors,
            knn_method=self.knn_method,
            max_bag_draws=self.max_bag_draws,
            keep_oob=pooled,
            **self._threshold_search(),
        )

    def n_member_fits(self, n_settings=None) -> int:
        """How many members a fit fits: ``n_estimators`` per setting, fewer with ``screen_members``.

        ``n_settings``: the settings of ``param_grid`` (counted here when not given).
        """
        if self.param_grid is None:
            return int(self.n_estimators)
        if n_settings is None:
            n_settings = self._n_settings()
        if not self._screens(n_settings):
            return int(self.n_estimators) * n_settings
        return int(self.screen_members) * n_settings + (self.n_estimators - self.screen_members) * self.screen_survivors
