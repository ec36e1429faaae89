"""A lazily generated imbalanced classification problem of any size."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["make_imbalanced"]

# Rows are drawn in fixed blocks of this many rows, whatever the output
# chunking; a row's values therefore depend only on (seed, row index).
GENERATION_BLOCK = 4096
# Number of leading columns that carry the class signal.
MAX_INFORMATIVE = 4


def make_imbalanced(
    n_samples,
    n_features=32,
    minority_fraction=0.01,
    chunks=100_000,
    random_state=None,
    class_sep=1.0,
):
    """Lazy Dask arrays of a two-class problem with a rare, overlapping minority.

    Construction: each row is minority (``y = 1``) independently with
    probability ``minority_fraction``. Majority rows are drawn from
    ``N(0, I)``; minority rows from ``N(mu, I)``, where ``mu`` is non-zero only
    on the first ``k = min(4, n_features)`` columns, each ``2 * class_sep /
    sqrt(k)``, so the class means are ``2 * class_sep`` apart. The remaining
    columns are pure noise. The classes overlap: the best balanced linear rule
    has recall ``Phi(class_sep)`` on both classes (about 0.84 G-mean at
    ``class_sep=1``), so a linear SVM lands well above 0.5 and well below 1.

    Reproducibility: rows are generated in fixed blocks of 4096, block ``b``
    from ``np.random.default_rng([seed, b, stream])`` (one stream for labels,
    one for features). Every output chunk generates only the blocks it
    overlaps and slices them, so no step ever holds all ``n_samples`` rows,
    and the values are identical for any ``chunks`` and are a prefix of those
    for a larger ``n_samples``. The labels do not depend on ``n_features``.

    Parameters
    ----------
    n_samples : int
        Number of rows, at least 1.
    n_features : int, default=32
        Number of columns, at least 1.
    minority_fraction : float, default=0.01
        Probability that a row is minority, in the open interval (0, 1).
    chunks : int, default=100_000
        Rows per Dask chunk, at least 1 (the last chunk may be shorter).
    random_state : int, numpy Generator or None, default=None
        Seed. ``None`` draws a fresh seed once, so the returned arrays still
        compute to the same values every time.
    class_sep : float, default=1.0
        Separation of the class means in units of the noise standard
        deviation (see above); at least 0.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), dtype float32
    y : dask.array.Array of shape (n_samples,), dtype int8

    Examples
    --------
    >>> X, y = make_imbalanced(10_000, n_features=8, minority_fraction=0.1,
    ...                        chunks=3_000, random_state=0)
    >>> X.shape, X.dtype, y.dtype, X.chunks[0]
    ((10000, 8), dtype('float32'), dtype('int8'), (3000, 3000, 3000, 1000))
    >>> X2, _ = make_imbalanced(10_000, n_features=8, minority_fraction=0.1,
    ...                         chunks=4_321, random_state=0)
    >>> bool((X.compute() == X2.compute()).all())
    True
    """
    import dask.array as da

    _check_int("n_samples", n_samples, 1)
    _check_int("n_features", n_features, 1)
    _check_int("chunks", chunks, 1)
    if not isinstance(minority_fraction, numbers.Real) or not 0 < minority_fraction < 1:
        raise ValueError(
            "The 'minority_fraction' parameter of make_imbalanced must be a float in the "
            f"range (0, 1). Got {minority_fraction!r} instead."
        )
    if not isinstance(class_sep, numbers.Real) or not class_sep >= 0:
        raise ValueError(
            "The 'class_sep' parameter of make_imbalanced must be a float in the range "
            f"[0, inf). Got {class_sep!r} instead."
        )
    seed = _seed(random_state)
    row_chunks = _row_chunks(int(n_samples), int(chunks))
    params = dict(
        seed=seed,
        n_features=int(n_features),
        minority_fraction=float(minority_fraction),
        class_sep=float(class_sep),
    )
    X = da.map_blocks(
        _features_chunk,
        chunks=(row_chunks, (int(n_features),)),
        dtype=np.float32,
        meta=np.empty((0, int(n_features)), dtype=np.float32),
        token="make_imbalanced-X",
        **params,
    )
    y = da.map_blocks(
        _labels_chunk,
        chunks=(row_chunks,),
        dtype=np.int8,
        meta=np.empty((0,), dtype=np.int8),
        token="make_imbalanced-y",
        seed=seed,
        minority_fraction=float(minority_fraction),
    )
    return X, y


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(
            f"The '{name}' parameter of make_imbalanced must be an int in the range "
            f"[{low}, inf). Got {value!r} instead."
        )


def _seed(random_state) -> int:
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(
                "The 'random_state' parameter of make_imbalanced must be a non-negative int, "
                f"a numpy Generator or None. Got {random_state!r} instead."
            )
        return int(random_state)
    raise ValueError(
        "The 'random_state' parameter of make_imbalanced must be a non-negative int, "
        f"a numpy Generator or None. Got {random_state!r} instead."
    )


def _row_chunks(n_samples: int, chunks: int) -> tuple[int, ...]:
    full, rest = divmod(n_samples, chunks)
    return (chunks,) * full + ((rest,) if rest else ())


def _block_labels(seed: int, block: int, minority_fraction: float) -> np.ndarray:
    rng = np.random.default_rng([seed, block, 0])
    return (rng.random(GENERATION_BLOCK) < minority_fraction).astype(np.int8)


def _block_features(
    seed: int, block: int, n_features: int, minority_fraction: float, class_sep: float
) -> np.ndarray:
    labels = _block_labels(seed, block, minority_fraction).astype(bool)
    rng = np.random.default_rng([seed, block, 1])
    X = rng.standard_normal((GENERATION_BLOCK, n_features), dtype=np.float32)
    k = min(MAX_INFORMATIVE, n_features)
    X[labels, :k] += np.float32(2.0 * class_sep / np.sqrt(k))
    return X


def _overlapping_blocks(start: int, stop: int, make_block) -> np.ndarray:
    first, last = start // GENERATION_BLOCK, (stop - 1) // GENERATION_BLOCK
    rows = np.concatenate([make_block(b) for b in range(first, last + 1)])
    offset = first * GENERATION_BLOCK
    return rows[start - offset : stop - offset]


def _features_chunk(*, seed, n_features, minority_fraction, class_sep, block_info=None):
    start, stop = block_info[None]["array-location"][0]
    return _overlapping_blocks(
        start,
        stop,
        lambda b: _block_features(seed, b, n_features, minority_fraction, class_sep),
    )


def _labels_chunk(*, seed, minority_fraction, block_info=None):
    start, stop = block_info[None]["array-location"][0]
    return _overlapping_blocks(
        start, stop, lambda b: _block_labels(seed, b, minority_fraction)
    )
