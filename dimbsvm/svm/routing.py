"""Metadata routing of the threshold-moving classifiers' ``fit``: what reaches the base estimator and the splitter.

scikit-learn's metadata routing (``sklearn.set_config(enable_metadata_routing=True)``)
lets ``fit(X, y, sample_weight=w, groups=g)`` reach the sub-objects that ask
for them. :class:`~dimbsvm.svm.OTHRClassifier`,
:class:`~dimbsvm.svm.THRClassifier` and
:class:`~dimbsvm.svm.EnsembleOTHRClassifier` consume ``sample_weight``
themselves (their threshold objectives count it) and route the rest as
scikit-learn's ``CalibratedClassifierCV`` does: to the base estimator's
``fit`` and, for OTHR's out-of-fold margins, to the splitter's ``split``.

Without routing, ``sample_weight`` goes to the base estimator as before (a
``TypeError`` names a base that takes none) and any other fit parameter is
refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn import get_config
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing
from sklearn.utils.validation import has_fit_parameter

__all__ = ["RoutedFit", "check_takes_weights", "fit_router", "route_fit", "routing_enabled", "rows_of"]


def routing_enabled() -> bool:
    """Whether scikit-learn's metadata routing is on (``sklearn.set_config(enable_metadata_routing=True)``)."""
    return bool(get_config().get("enable_metadata_routing", False))


@dataclass(frozen=True)
class RoutedFit:
    """Where ``fit``'s metadata goes.

    Attributes
    ----------
    estimator : dict
        Keyword arguments of the base estimator's ``fit`` (row-aligned arrays
        are indexed by :func:`rows_of` wherever it is fitted on some rows).
    splitter : dict
        Keyword arguments of the splitter's ``split`` (``groups``).
    """

    estimator: dict = field(default_factory=dict)
    splitter: dict = field(default_factory=dict)


def fit_router(owner, estimator, splitter=None) -> MetadataRouter:
    """The :class:`~sklearn.utils.metadata_routing.MetadataRouter` of a classifier that consumes
    ``sample_weight`` and routes ``fit`` to ``estimator`` (and ``split`` to ``splitter``)."""
    router = MetadataRouter(owner=owner).add_self_request(owner).add(
        estimator=estimator, method_mapping=MethodMapping().add(caller="fit", callee="fit"))
    if splitter is not None:
        router.add(splitter=splitter, method_mapping=MethodMapping().add(caller="fit", callee="split"))
    return router


def route_fit(owner, estimator, sample_weight, fit_params) -> RoutedFit:
    """``fit``'s metadata routed (or, without routing, ``sample_weight`` to the base estimator).

    Parameters
    ----------
    owner : estimator
        The classifier being fitted (its :meth:`get_metadata_routing` decides).
    estimator : estimator
        The base estimator that will be fitted (without routing: checked to take ``sample_weight``).
    sample_weight : ndarray or None
    fit_params : dict
        The other keyword arguments ``fit`` was given.

    Returns
    -------
    RoutedFit

    Raises
    ------
    ValueError
        Fit parameters other than ``sample_weight`` without routing.
    TypeError
        Without routing, ``sample_weight`` for a base estimator whose ``fit`` takes none.
    """
    name = type(owner).__name__
    if routing_enabled():
        routed = process_routing(owner, "fit", sample_weight=sample_weight, **fit_params)
        splitter = routed.splitter.split if "splitter" in routed else {}
        return RoutedFit(dict(routed.estimator.fit), dict(splitter))
    if fit_params:
        raise ValueError(f"{name}.fit was given {', '.join(sorted(fit_params))}: parameters other than "
                         "sample_weight are routed only with sklearn.set_config(enable_metadata_routing=True)")
    if sample_weight is None:
        return RoutedFit()
    check_takes_weights(estimator, owner=name)
    return RoutedFit({"sample_weight": sample_weight})


def check_takes_weights(estimator, *, owner: str) -> None:
    """Refuse, with a ``TypeError`` naming both, a base ``estimator`` whose ``fit`` takes no ``sample_weight``:
    weights given to ``owner`` are never dropped silently."""
    if not has_fit_parameter(estimator, "sample_weight"):
        raise TypeError(f"{owner} was given sample_weight, but its base estimator "
                        f"{type(estimator).__name__} does not accept sample_weight in fit.")


def rows_of(params: dict, rows, n_samples: int) -> dict:
    """``params`` for the rows ``rows`` of ``n_samples``: row-aligned values indexed, others as they are.

    Examples
    --------
    >>> rows_of({"sample_weight": np.array([1.0, 2.0, 3.0]), "verbose": 1}, np.array([2, 0]), 3)
    {'sample_weight': array([3., 1.]), 'verbose': 1}
    """
    return {key: np.asarray(value)[rows] if _row_aligned(value, n_samples) else value
            for key, value in params.items()}


def _row_aligned(value, n_samples: int) -> bool:
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        return False
    return getattr(value, "ndim", 1) >= 1 and len(value) == n_samples
