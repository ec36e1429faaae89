"""The configuration to run when quality matters more than time: :func:`recommended`.

One call returns an unfitted scikit-learn estimator with its model selection
built in, so it is used like any other (``fit``, ``predict``,
``cross_val_score``, a pipeline step); with a Dask client active its members
are fitted as tasks on the cluster, without one they are fitted in-process.
In a job it is the estimator name ``recommended``.

What it is and why, with the numbers on 20 public KEEL datasets against
tuned and untuned peers: ``benchmarks/search_study.md``.
"""

from __future__ import annotations

__all__ = ["RECOMMENDED_GRID", "SVM_GRID", "recommended"]

#: The (C, gamma) settings of the SVMs, the grid the tuned peers of the benchmarks search by inner
#: cross-validation (16 settings).
SVM_GRID = {"C": [0.1, 1.0, 10.0, 100.0], "gamma": [0.3, 1.0, 3.0, "scale"]}

#: What :func:`recommended` searches: every setting of :data:`SVM_GRID`, with and without
#: ``class_weight="balanced"`` (32 settings).
RECOMMENDED_GRID = {**SVM_GRID, "class_weight": [None, "balanced"]}


def recommended(*, random_state=None, client=None):
    """An unfitted ensemble that chooses its SVMs' settings on out-of-bag margins.

    ``EnsembleOTHRClassifier(param_grid=RECOMMENDED_GRID, n_estimators=10,
    screen_members=1, screen_survivors=8, top_candidates=3, tolerance=0.0)``:
    one RBF SVM on a stratified bootstrap bag for each of the 32 settings of
    :data:`RECOMMENDED_GRID` ranks the settings by the ROC-AUC of its
    out-of-bag margins; the 8 best get nine more members each (104 fits in
    all, no inner cross-validation); the three settings whose pooled
    out-of-bag margins rank the training rows best are kept and averaged on
    one scale, with one decision threshold, the best smoothed G-mean on their
    pooled out-of-bag margins. Feed it scaled features (e.g. behind a
    ``MinMaxScaler``), as any RBF SVM.

    The screening round (successive halving in two rounds) was chosen on 20
    public KEEL sets, among 16 screening rules, as the best G-mean within 1.5x
    the fit time of the grid-searched ``SMOTE + SVC``; it replaced fitting
    all ten members of every setting (320 fits), for the same quality on the
    84 public KEEL sets at a third of the cost (``benchmarks/search_study.md``).

    Above 20,000 training rows its bags hold 20,000 rows (the ensemble's
    ``max_samples="auto"``, :mod:`dimbsvm.svm.scaled_defaults`); it still
    fits 104 RBF SVMs, about ten times the ensemble's default.

    Parameters
    ----------
    random_state : int, RandomState instance or None, default=None
        Seeds the bags.
    client : distributed.Client or None, default=None
        Where the members are fitted (``None``: the active client, if any).

    Returns
    -------
    EnsembleOTHRClassifier
        Unfitted.

    Examples
    --------
    >>> from dimbsvm import recommended
    >>> model = recommended(random_state=0)
    >>> model.n_estimators, model.screen_members, model.screen_survivors, model.top_candidates
    (10, 1, 8, 3)
    """
    from .svm import EnsembleOTHRClassifier

    return EnsembleOTHRClassifier(n_estimators=10, param_grid={k: list(v) for k, v in RECOMMENDED_GRID.items()},
                                  screen_members=1, screen_survivors=8, top_candidates=3, tolerance=0.0,
                                  random_state=random_state, client=client)
