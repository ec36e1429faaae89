"""Class weights named as the data names its classes: ``class_weight: {pos: 5, neg: 1}`` in a job.

A job's labels are coded as integers before anything is fitted
(:func:`~dimbsvm.jobs.data.code_labels`), so an estimator's ``class_weight``
keyed by class name would name classes its fit never sees. The names are
mapped here to the codes the job's labels have; a key that names no class of
the data is refused in one line by ``validate`` and ``run`` before any work.
Data without class names (arrays, a store ingested from arrays) is keyed by
its codes, as before.
"""

from __future__ import annotations

from ..datasets._labels import label_key
from ..exceptions import JobSpecError

__all__ = ["coded_class_weights"]


def coded_class_weights(params: dict, class_map: dict | None, *, where: str = "estimator.params") -> dict:
    """``params`` with each ``class_weight`` dict keyed by the codes of ``class_map``'s class names.

    Parameters
    ----------
    params : dict
        An estimator's job parameters; ``class_weight`` and any nested
        ``..._class_weight`` (``estimator__class_weight``) given as a dict are
        mapped, anything else is kept.
    class_map : dict or None
        Class name -> code of the job's labels (``data.meta["class_map"]``
        after coding); ``None``: the labels are the caller's own codes.
    where : str
        The parameters' place in the job, for messages.

    Returns
    -------
    dict
        A new dict; ``params`` itself when no ``class_weight`` dict is in it.

    Raises
    ------
    JobSpecError
        A key names no class of the data, or two keys name one class
        (``1`` and ``"1"``).

    Examples
    --------
    >>> coded_class_weights({"C": 1.0, "class_weight": {"pos": 5, "neg": 1}}, {"neg": 0, "pos": 1})
    {'C': 1.0, 'class_weight': {1: 5, 0: 1}}
    >>> coded_class_weights({"class_weight": "balanced"}, {"neg": 0, "pos": 1})
    {'class_weight': 'balanced'}
    """
    weighted = [key for key, value in params.items() if _is_class_weight(key) and isinstance(value, dict)]
    if not weighted:
        return params
    names = {label_key(name): int(code) for name, code in (class_map or {}).items()}
    coded = dict(params)
    for key in weighted:
        mapped = {}
        for name, weight in params[key].items():
            code = _code_of(name, names)
            if code is None:
                known = ", ".join(repr(n) for n in names) if names else "their codes (the data names no class)"
                raise JobSpecError(f"'{where}.{key}' names class {name!r}, which the data does not have; "
                                   f"its classes: {known}")
            if code in mapped:
                raise JobSpecError(f"'{where}.{key}' weights class {name!r} twice (two keys name it)")
            mapped[code] = weight
        coded[key] = mapped
    return coded


def _is_class_weight(key: str) -> bool:
    return key == "class_weight" or key.endswith("__class_weight")


def _code_of(name, names: dict):
    """The code class ``name`` has: by name where the data names its classes, else by code."""
    if names:
        return names.get(label_key(name))
    if isinstance(name, bool):
        return None
    try:
        return int(name) if float(name) == int(float(name)) else None
    except (TypeError, ValueError):
        return None
