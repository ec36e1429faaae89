"""Sparse, text-like imbalanced data: word counts with Zipf frequencies and a rare topic.

Construction of a row: a count of words ``max(1, Poisson(nnz_per_row))``,
each word a column drawn from a Zipf law (column ``j`` about as frequent as
``1 / (j + 1) ** zipf``, folded into ``n_features``). A row is minority
(``y = 1``) with probability ``minority_fraction``; a minority row draws a
``topic_share`` of its words uniformly from 50 *topic* columns (chosen by
the seed among the rarer half of the vocabulary) instead. A row's value in
a column is the word's count there (a bag of words, as scikit-learn's
``CountVectorizer`` gives; svmlight files of it stay short).
The classes overlap (short rows may hold no topic word), so a linear SVM
lands well above chance and below 1.

Rows are generated in fixed blocks of :data:`BLOCK_ROWS`, block ``b`` from
``np.random.default_rng([seed, b])``, so a row depends only on the seed
and its index: :func:`write_text_like_svmlight` writes files of any size a
block at a time, and they hold exactly :func:`make_text_like`'s rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["BLOCK_ROWS", "make_text_like", "write_text_like_svmlight"]

#: Rows per generated block (a row depends on the seed and its index only).
BLOCK_ROWS = 8192
#: Topic columns the minority draws from.
N_TOPIC = 50


def make_text_like(n_samples, n_features=50_000, *, nnz_per_row=30, minority_fraction=0.05, topic_share=0.2,
                   zipf=1.1, random_state=0):
    """Text-like sparse rows in memory.

    Parameters
    ----------
    n_samples, n_features : int
    nnz_per_row : float, default=30
        Mean words a row (distinct columns are somewhat fewer: repeats sum).
    minority_fraction : float, default=0.05
    topic_share : float, default=0.2
        Share of a minority row's words drawn from the topic columns.
    zipf : float, default=1.1
        The Zipf exponent of word frequencies (> 1).
    random_state : int, default=0

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
    y : ndarray of int64 (1: minority)

    Examples
    --------
    >>> X, y = make_text_like(2000, 5000, random_state=0)
    >>> X.shape, round(X.nnz / X.shape[0]), round(float(y.mean()), 2)
    ((2000, 5000), 27, 0.06)
    """
    blocks = [_block(random_state, b, n_features, nnz_per_row, minority_fraction, topic_share, zipf)
              for b in range(-(-int(n_samples) // BLOCK_ROWS))]
    if not blocks:
        return sp.csr_matrix((0, int(n_features))), np.empty(0, dtype=np.int64)
    X = sp.vstack([b[0] for b in blocks], format="csr")[:int(n_samples)]
    y = np.concatenate([b[1] for b in blocks])[:int(n_samples)]
    return X, y


def write_text_like_svmlight(path, n_samples, n_features=50_000, **params) -> None:
    """Write :func:`make_text_like`'s rows to an svmlight file, one block at a time (one-based indices)."""
    from sklearn.datasets import dump_svmlight_file

    with open(path, "wb") as handle:
        for b in range(-(-int(n_samples) // BLOCK_ROWS)):
            X, y = _block(params.get("random_state", 0), b, n_features,
                          **{k: v for k, v in params.items() if k != "random_state"})
            rows = min(BLOCK_ROWS, int(n_samples) - b * BLOCK_ROWS)
            dump_svmlight_file(X[:rows], np.where(y[:rows] == 1, 1, -1), handle, zero_based=False)


def _block(seed, block, n_features, nnz_per_row=30, minority_fraction=0.05, topic_share=0.2, zipf=1.1):
    n_features = int(n_features)
    topic = np.random.default_rng([int(seed), 2**31]).choice(np.arange(n_features // 2, n_features), N_TOPIC,
                                                              replace=False)
    rng = np.random.default_rng([int(seed), int(block)])
    y = (rng.random(BLOCK_ROWS) < minority_fraction).astype(np.int64)
    words = np.maximum(1, rng.poisson(nnz_per_row, BLOCK_ROWS))
    rows = np.repeat(np.arange(BLOCK_ROWS), words)
    columns = (rng.zipf(zipf, rows.size) - 1) % n_features
    on_topic = (y[rows] == 1) & (rng.random(rows.size) < topic_share)
    columns[on_topic] = topic[rng.integers(0, N_TOPIC, int(on_topic.sum()))]
    counts = sp.csr_matrix((np.ones(rows.size), (rows, columns)), shape=(BLOCK_ROWS, n_features))
    counts.sum_duplicates()
    return counts, y
