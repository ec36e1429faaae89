"""Out-of-fold prediction files read back: the truth is numpy's own concatenation of every fold's file."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("with_proba", [(True, True), (True, False)])
def test_out_of_fold_files_load_as_numpy_concatenates_them(tmp_path, with_proba):
    """``load_oof`` fills its columns in place: the same arrays and dtypes as concatenating every file's."""
    from dimbsvm.jobs.oof import load_oof, save_fold_predictions

    rng = np.random.default_rng(0)
    saved = []
    for (seed, fold), proba, pred_dtype in zip([(0, 0), (0, 1), (1, 0)], [*with_proba, True],
                                               [np.int32, np.int64, np.int32]):
        n = int(rng.integers(0, 50)) if fold else 40
        arrays = dict(rows=np.sort(rng.choice(1000, n, replace=False)), y_true=rng.integers(0, 2, n),
                      y_pred=rng.integers(0, 2, n).astype(pred_dtype), score=rng.normal(size=n),
                      proba=rng.random(n) if proba else None)
        save_fold_predictions(tmp_path / "oof", (seed, fold), **arrays)
        saved.append(((seed, fold), arrays))
    loaded = load_oof(tmp_path)
    expected = {"seed": np.concatenate([np.full(len(a["rows"]), k[0]) for k, a in saved]),
                "fold": np.concatenate([np.full(len(a["rows"]), k[1]) for k, a in saved]),
                **{name: np.concatenate([a[key] for _, a in saved])
                   for name, key in (("row", "rows"), ("y_true", "y_true"), ("y_pred", "y_pred"), ("score", "score"))}}
    if all(with_proba):
        expected["proba"] = np.concatenate([a["proba"] for _, a in saved])
    assert loaded.keys() == expected.keys()
    for name, values in expected.items():
        assert loaded[name].dtype == values.dtype and np.array_equal(loaded[name], values), name
