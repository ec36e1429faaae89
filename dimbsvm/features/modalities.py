"""Modalities: which distance applies to which part of a row.

The similarity kernel gives one block of |S| features per distance
("modality", eq. (2) of the paper). A modality names a metric and the part of
the input it reads: a subset of columns of a 2-D table, or one channel (or
several) of 3-D time series ``(n, channels, length)``.

Accepted forms of ``distances`` (the parameter of
:class:`~dimbsvm.features.SimilarityFeatures`):

- a metric name, e.g. ``"euclidean"``: one modality over the whole row;
- a dict, e.g. ``{"metric": "hamming", "columns": [3, 4, 5]}``;
- a list of names and dicts: one modality each, blocks in list order.

Dict keys: ``metric`` (required); ``columns`` (2-D input: list of column
indices); ``channel`` (3-D input: one channel index, compared as a univariate
series) or ``channels`` (3-D input: list of channel indices, compared as one
multivariate series); ``window`` (``"dtw"`` only, Sakoe-Chiba band);
``base`` (``"jensenshannon"`` only, logarithm base); ``name`` (label used in
feature names; defaults to the metric plus the selection). Without a selection
a modality reads the whole row; tabular metrics read a 3-D selection flattened
to ``channels * length`` values.

The parsed form is a list of plain dicts with every key present, so it can be
stored in a stage's metadata (JSON) and shipped to Dask tasks.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..exceptions import DataError
from .distances import DISTANCE_METRICS, pairwise_distances_to

__all__ = ["parse_modalities", "modality_view", "modality_distances"]

_KEYS = {"metric", "columns", "channel", "channels", "window", "base", "name"}


def parse_modalities(distances, input_shape):
    """Normalise a ``distances`` specification against the shape of one row.

    Parameters
    ----------
    distances : str, dict or list of str/dict
        See the module docstring.
    input_shape : tuple of int
        Shape of one row: ``(n_features,)`` for a table or univariate series,
        ``(n_channels, length)`` for 3-D series.

    Returns
    -------
    modalities : list of dict
        Keys ``name``, ``metric``, ``columns``, ``channels``, ``window``,
        ``base``; ``channels`` is an int for one channel (a univariate
        series), a list for several, or ``None``.

    Raises
    ------
    DataError
        Unknown metric or key, column or channel index out of range, a
        selection that does not fit the input's number of dimensions.

    Examples
    --------
    >>> [m["name"] for m in parse_modalities(["euclidean", {"metric": "hamming",
    ...                                        "columns": [2, 3]}], (4,))]
    ['euclidean', 'hamming[2:4]']
    >>> parse_modalities({"metric": "dtw", "channel": 1}, (3, 50))[0]["channels"]
    1
    """
    specs = distances if isinstance(distances, (list, tuple)) else [distances]
    if not specs:
        raise DataError("distances is an empty list; give at least one metric")
    modalities = [_parse_one(spec, k, tuple(input_shape)) for k, spec in enumerate(specs)]
    seen = {}
    for modality in modalities:  # names label feature columns, so make them unique
        count = seen.get(modality["name"], 0)
        seen[modality["name"]] = count + 1
        if count:
            modality["name"] = f"{modality['name']}#{count}"
    return modalities


def modality_view(X, modality):
    """The part of ``X`` (all rows) that one modality measures.

    Returns a 2-D array for tabular metrics and univariate DTW, a 3-D one for
    multivariate DTW.
    """
    if X.ndim == 2:
        return X if modality["columns"] is None else X[:, modality["columns"]]
    channels = modality["channels"]
    if isinstance(channels, int):
        return X[:, channels, :]
    part = X if channels is None else X[:, channels, :]
    if modality["metric"] == "dtw":
        return part
    return part.reshape(part.shape[0], -1)


def modality_distances(X, S, modalities, *, parallel=True):
    """Distance blocks of ``X`` to references ``S``, one per modality, side by side.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
    S : ndarray of shape (n_references, ...)
    modalities : list of dict
        From :func:`parse_modalities`.
    parallel : bool, default=True
        Passed to the DTW kernel.

    Returns
    -------
    D : ndarray of shape (n_samples, n_modalities * n_references), float64
        Columns ``k * n_references + i`` hold ``dist_k(x, s_i)``.
    """
    blocks = [
        pairwise_distances_to(modality_view(X, m), modality_view(S, m), m["metric"],
                              window=m["window"], base=m["base"], parallel=parallel)
        for m in modalities
    ]
    return np.hstack(blocks) if len(blocks) > 1 else blocks[0]


def _parse_one(spec, k, input_shape):
    if isinstance(spec, str):
        spec = {"metric": spec}
    if not isinstance(spec, dict):
        raise DataError(f"distances[{k}] must be a metric name or a dict, got {type(spec).__name__}")
    unknown = set(spec) - _KEYS
    if unknown:
        raise DataError(f"distances[{k}] has unknown key(s) {sorted(unknown)}; "
                        f"accepted keys: {sorted(_KEYS)}")
    metric = spec.get("metric")
    if metric not in DISTANCE_METRICS:
        raise DataError(f"distances[{k}]: unknown metric {metric!r}; choose one of {', '.join(DISTANCE_METRICS)}")
    if spec.get("window") is not None and metric != "dtw":
        raise DataError(f"distances[{k}]: 'window' applies to 'dtw' only, not {metric!r}")
    if spec.get("base") is not None and metric != "jensenshannon":
        raise DataError(f"distances[{k}]: 'base' applies to 'jensenshannon' only, not {metric!r}")
    window = _optional_int(spec.get("window"), f"distances[{k}]['window']", low=0)
    base = spec.get("base")
    if base is not None and (not isinstance(base, numbers.Real) or base <= 1):
        raise DataError(f"distances[{k}]['base'] must be a number > 1, got {base!r}")

    columns = channels = None
    suffix = ""
    if "channel" in spec and "channels" in spec:
        raise DataError(f"distances[{k}]: give 'channel' (one) or 'channels' (several), not both")
    if len(input_shape) == 1:
        if "channel" in spec or "channels" in spec:
            raise DataError(f"distances[{k}] selects channels, but the input is 2-D "
                            "(n_samples, n_features); channels need 3-D series (n, channels, length)")
        if spec.get("columns") is not None:
            columns = _indices(spec["columns"], input_shape[0], f"distances[{k}]['columns']", "column")
            suffix = _range_label(columns)
    else:
        if spec.get("columns") is not None:
            raise DataError(f"distances[{k}] selects columns, but the input is 3-D series "
                            "(n, channels, length); use 'channel' or 'channels'")
        if spec.get("channel") is not None:
            channels = _indices([spec["channel"]], input_shape[0], f"distances[{k}]['channel']",
                                "channel")[0]
            suffix = f"[ch{channels}]"
        elif spec.get("channels") is not None:
            channels = _indices(spec["channels"], input_shape[0], f"distances[{k}]['channels']",
                                "channel")
            suffix = "[ch" + ",".join(map(str, channels)) + "]"
    name = spec.get("name") or f"{metric}{suffix}"
    return {"name": str(name), "metric": metric, "columns": columns, "channels": channels,
            "window": window, "base": None if base is None else float(base)}


def _indices(values, size, what, noun):
    values = [values] if isinstance(values, numbers.Integral) else list(values)
    if not values:
        raise DataError(f"{what} is empty")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise DataError(f"{what} must hold integer {noun} indices, got {v!r}")
        if not -size <= v < size:
            raise DataError(f"{what}: {noun} {v} is out of range for input with {size} {noun}s")
        out.append(int(v) % size)
    if len(set(out)) != len(out):
        raise DataError(f"{what} repeats a {noun}: {values}")
    return out


def _optional_int(value, what, low):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise DataError(f"{what} must be an int >= {low} or None, got {value!r}")
    return int(value)


def _range_label(columns):
    if columns == list(range(columns[0], columns[-1] + 1)):
        return f"[{columns[0]}:{columns[-1] + 1}]"
    return "[" + ",".join(map(str, columns)) + "]"
