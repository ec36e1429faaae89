"""The ``client=None`` parameter of estimators that hand out work (:mod:`dimbsvm.parallel`).

An estimator that fans out (an ensemble's members, HPC-SVM's passes over Dask
chunks, the similarity features' moments) takes ``client=None`` and resolves
it once, at the top of ``fit``, with
:func:`dimbsvm.parallel.current_client`.
A client holds sockets and an event loop, so :class:`ClientParamMixin` keeps
it out of pickles and skops files, shares it (does not deep-copy it) in
``clone``, and gives models saved before the parameter existed ``client=None``.
"""

from __future__ import annotations

from sklearn.base import clone

__all__ = ["ClientParamMixin"]


class ClientParamMixin:
    """Pickling and cloning rules of an estimator's ``client`` parameter.

    Put it before ``BaseEstimator`` among the bases; the estimator declares
    ``client`` in ``__init__`` and ``"client": "no_validation"`` in
    ``_parameter_constraints``.
    """

    def __getstate__(self):
        # A client holds sockets and an event loop: never pickle it.
        state = dict(super().__getstate__())
        state["client"] = None
        return state

    def __setstate__(self, state):
        # Models saved before the estimator took a client have none.
        state = dict(state)
        state.setdefault("client", None)
        super().__setstate__(state)

    def __sklearn_clone__(self):
        if getattr(self, "client", None) is None:
            return super().__sklearn_clone__()
        # clone() would deep-copy the client (it cannot be copied): share it instead.
        params = self.get_params(deep=False)
        client = params.pop("client")
        new = type(self)(**{name: clone(value, safe=False) for name, value in params.items()})
        new.client = client
        return new
