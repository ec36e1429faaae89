"""Out-of-fold prediction files read back: the truth is numpy's own concatenation of every fold's file."""

from __future__ import annotations

import numpy as np
import pytest

from dimbsvm.report.oof_sections import fold_summaries_of_rows


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


def _store_folds(tmp_path):
    from dimbsvm.datasets import load_keel
    from dimbsvm.jobs import validate_job
    from dimbsvm.jobs.data import load_job_data
    from dimbsvm.jobs.runner import fold_setup
    from dimbsvm.model_selection.folds import FoldSpec
    from dimbsvm.store import ingest

    data = load_keel("ecoli1")
    ingest((data.X, data.y), tmp_path / "ecoli1.zarr", chunk_rows=40)
    stored = load_job_data(str(tmp_path / "ecoli1.zarr"))
    job = validate_job({"name": "w", "data": {"source": str(tmp_path / "ecoli1.zarr")},
                        "estimator": {"name": "ensemble_othr", "params": {"estimator": "linear_svc",
                                                                          "n_estimators": 3}},
                        "cv": {"n_splits": 3}})
    specs = [FoldSpec((0, fold), None, None, split={"n_splits": 3, "seed": 0, "fold": fold}) for fold in range(3)]
    return stored, specs, lambda **kw: fold_setup(job, 1, keep_predictions=True, **kw)


def test_a_folds_tasks_write_its_predictions_and_the_driver_receives_none(scheduler, tmp_path):
    """The files the tasks write equal those the driver writes from the predictions handed back to it."""
    from dimbsvm.jobs.oof import FoldPredictionWriter, load_fold_summaries, load_oof, save_fold_predictions
    from dimbsvm.model_selection.folds import run_folds

    stored, specs, setup = _store_folds(tmp_path)
    labels = stored.X.labels()
    writer = FoldPredictionWriter.open(tmp_path / "by-tasks" / "oof", pos_label=1)
    written, _ = run_folds(setup(prediction_sink=writer), stored.X, stored.y, specs, client=scheduler,
                           task_labels=labels)
    writer.close()
    assert all(result.predictions is None and result.record is not None for result in written)
    # a store fold is written a chunk at a time: each fold's file over the parts its chunks' tasks wrote
    files = sorted(p.name for p in (tmp_path / "by-tasks" / "oof").iterdir())
    assert files == sorted([f"seed0-fold{f}.npz" for f in range(3)] + [f"seed0-fold{f}.parts" for f in range(3)])
    assert len(list((tmp_path / "by-tasks" / "oof" / "seed0-fold0.parts").iterdir())) == -(-len(labels) // 40)

    handed, _ = run_folds(setup(), stored.X, stored.y, specs, client=scheduler, task_labels=labels)
    for spec, result in zip(specs, handed):
        p = result.predictions
        save_fold_predictions(tmp_path / "by-driver" / "oof", spec.key, p.rows, stored.y[p.rows], p.y_pred,
                              p.score, p.proba, pos_label=1)
    assert [r.record for r in written] == [r.record for r in handed]
    by_tasks, by_driver = load_oof(tmp_path / "by-tasks"), load_oof(tmp_path / "by-driver")
    assert by_tasks.keys() == by_driver.keys()
    for name in by_tasks:
        assert by_tasks[name].dtype == by_driver[name].dtype and np.array_equal(by_tasks[name], by_driver[name])
    # the summaries the report reads are those of the rows, wherever written
    _assert_summaries_equal(load_fold_summaries(tmp_path / "by-tasks", 1), fold_summaries_of_rows(by_tasks, 1))
    _assert_summaries_equal(load_fold_summaries(tmp_path / "by-driver", 1), fold_summaries_of_rows(by_tasks, 1))


def _assert_summaries_equal(got, expected):
    assert got.keys() == expected.keys()
    for key in got:
        a, b = got[key], expected[key]
        assert (a.rows, a.confusion, a.highest_unpredicted) == (b.rows, b.confusion, b.highest_unpredicted)
        assert a.scores.errors == b.scores.errors and (a.scores.n_pos, a.scores.n_neg) == (b.scores.n_pos, b.scores.n_neg)
        for name in ("thresholds", "tp", "fp", "pp"):
            np.testing.assert_array_equal(getattr(a.scores, name), getattr(b.scores, name))
        assert (a.calibration is None) == (b.calibration is None)
        for name, values in (b.calibration or {}).items():
            np.testing.assert_array_equal(a.calibration[name], values)


def test_fold_files_without_summaries_or_for_another_class_are_summarised_from_their_rows(tmp_path):
    """A run written before the summaries existed (or a summary for the other class) still gives the report."""
    from dimbsvm.jobs.oof import load_fold_summaries, load_oof, save_fold_predictions

    rng = np.random.default_rng(2)
    for fold, pos_label in ((0, None), (1, 0)):
        y = rng.integers(0, 2, 50)
        save_fold_predictions(tmp_path / "oof", (0, fold), np.arange(50), y, 1 - y, rng.normal(size=50),
                              pos_label=pos_label)
    _assert_summaries_equal(load_fold_summaries(tmp_path, 1), fold_summaries_of_rows(load_oof(tmp_path), 1))


def test_a_task_that_cannot_reach_the_run_directory_hands_its_predictions_back(tmp_path):
    # where the driver's marker is not found (a worker on another machine), nothing is written there
    from dimbsvm.jobs.oof import FoldPredictionWriter
    from dimbsvm.model_selection.folds import run_folds

    stored, specs, setup = _store_folds(tmp_path)
    writer = FoldPredictionWriter.open(tmp_path / "oof")
    writer.close()  # as if the directory were another machine's
    results, _ = run_folds(setup(prediction_sink=writer), stored.X, stored.y, specs, client=None,
                           task_labels=stored.X.labels())
    assert all(len(result.predictions.rows) == result.record["n_test"] for result in results)
    assert list((tmp_path / "oof").iterdir()) == []


def test_markers_of_an_interrupted_run_are_removed_when_its_tasks_write_again(tmp_path):
    from dimbsvm.jobs.oof import FoldPredictionWriter

    left = FoldPredictionWriter.open(tmp_path)  # never closed: the run was killed
    again = FoldPredictionWriter.open(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f".tasks-write-{again.token}"] and left.token != again.token
    again.close()
    assert list(tmp_path.iterdir()) == []


def test_a_fold_written_in_parts_reads_as_one_and_a_missing_part_is_named(tmp_path):
    """Parts first, the fold's file last: parts an interrupted attempt left are not read, a lost part is an error."""
    from dimbsvm.jobs.oof import FoldPredictionWriter, load_fold_summaries, load_oof, save_fold_predictions

    rng = np.random.default_rng(0)
    rows, y = np.arange(0, 60, 2), (rng.random(30) < 0.3).astype(np.int64)
    pred, score = (rng.random(30) < 0.3).astype(np.int64), rng.normal(size=30)
    writer = FoldPredictionWriter.open(tmp_path / "parts" / "oof", pos_label=1)
    summaries = []
    for first, stop in ((0, 12), (12, 25), (25, 30)):
        assert writer.write_part((0, 1), first, rows[first:stop], y[first:stop], pred[first:stop], score[first:stop],
                                 None)
        summaries.append(writer.summarise(y[first:stop], pred[first:stop], score[first:stop], None))
    assert writer.write_part((0, 1), 99, rows[:3], y[:3], pred[:3], score[:3], None)  # a stale part: not listed
    with pytest.raises(FileNotFoundError):
        load_oof(tmp_path / "parts")  # parts without the fold's file: no fold is complete
    assert writer.finish_parts((0, 1), [0, 12, 25], [12, 13, 5], summaries)
    save_fold_predictions(tmp_path / "whole" / "oof", (0, 1), rows, y, pred, score, pos_label=1)
    parts, whole = load_oof(tmp_path / "parts"), load_oof(tmp_path / "whole")
    assert parts.keys() == whole.keys() and all(np.array_equal(parts[k], whole[k]) for k in parts)
    merged, of_rows = (load_fold_summaries(tmp_path / d, 1)[0, 1].to_arrays("") for d in ("parts", "whole"))
    assert merged.keys() == of_rows.keys() and all(np.array_equal(merged[k], of_rows[k]) for k in merged)
    (tmp_path / "parts" / "oof" / "seed0-fold1.parts" / f"{12:012d}.npz").unlink()
    with pytest.raises(FileNotFoundError, match="lists part 000000000012.npz of 13 rows"):
        load_oof(tmp_path / "parts")
