"""The fitted cost model of benchmarks/project_scale.py, checked on hand-made summaries with closed-form answers."""

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ sits beside the package and is not installed (as in test_benchmarks.py)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.project_scale import (  # noqa: E402
    classify, default_folds, fit_line, fit_terms, main, project, project_scale, render_markdown)

# Two sizes, 10 chunks, 4 members, 2-fold CV + the final model (3 folds); every term exactly a + b*n:
#   first_task      2 + 1.0e-6 n      after_last_task  1 + 0.5e-6 n
#   rows  (3 tasks)   0.3 + 3e-6 n    read  (30 tasks = 3 x 10 chunks)  6e-6 n
#   member (12 tasks = 4 members x 3) 1.2    score (20 tasks = 2 x 10 chunks)  4e-6 n
LINES = {"first_task": (2.0, 1e-6), "after_last_task": (1.0, 0.5e-6)}
KINDS = {"rows": (3, 0.3, 3e-6), "read": (30, 0.0, 6e-6), "member": (12, 1.2, 0.0), "score": (20, 0.0, 4e-6)}


def make_run(n, *, chunks=10, members=4, T=None, kinds=KINDS, key="seconds"):
    run = {"n": n, "chunks": chunks, "members": members, "repeat": 0,
           **{name: a + b * n for name, (a, b) in LINES.items()},
           "kinds": {kind: {"tasks": tasks * (chunks // 10 if kind in ("read", "score") else 1), key: a + b * n,
                            "alone": 0.0}
                     for kind, (tasks, a, b) in kinds.items()}}
    run["T"] = T if T is not None else 1.0
    return run


SUMMARY = {"runs": [make_run(1e6, T=12.5), make_run(3e6, T=30.0)]}


def test_the_fit_recovers_exactly_linear_terms():
    terms = {t["name"]: t for t in fit_terms(SUMMARY["runs"], 3)}
    expected = {"client before first task": (2.0, 1e-6), "client after last task": (1.0, 0.5e-6),
                **{kind: (a, b) for kind, (_, a, b) in KINDS.items()}}
    assert set(terms) == set(expected)
    for name, (a, b) in expected.items():
        assert terms[name]["a"] == pytest.approx(a, abs=1e-9), name
        assert terms[name]["b"] == pytest.approx(b, abs=1e-15), name
        assert terms[name]["max_residual"] == pytest.approx(0.0, abs=1e-9)
        assert not terms[name]["one_size"]


def test_fit_with_one_size_is_proportional_and_says_so():
    fit = fit_line([4e6, 4e6], [2.0, 4.0])  # two repeats of one size: their mean / n
    assert fit["a"] == 0.0 and fit["b"] == pytest.approx(3.0 / 4e6) and fit["one_size"]
    summary = project_scale([{"runs": [make_run(4e6, T=40.0)]}], 1e8, [32])
    assert summary["one_size"]
    assert all(t["a"] == 0.0 for t in summary["terms"])
    text = "\n".join(render_markdown(summary))
    assert "one size: a = 0, b = value / n" in text and "One size only" in text


def test_fit_keeps_coefficients_non_negative():
    # falling with n: the unconstrained slope is negative, so b = 0 and a = the mean
    fit = fit_line([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert (fit["a"], fit["b"]) == pytest.approx((2.0, 0.0))
    # y = 2n - 2: the unconstrained intercept is negative; through the origin b = (0 + 4 + 12) / (1 + 4 + 9)
    # (residual 12/7) beats the constant 2 (residual 8)
    fit = fit_line([1.0, 2.0, 3.0], [0.0, 2.0, 4.0])
    assert (fit["a"], fit["b"]) == pytest.approx((0.0, 8.0 / 7.0))
    assert fit["max_residual"] == pytest.approx(8.0 / 7.0)  # at n = 1


def test_kinds_are_classified_from_their_task_counts():
    classes = classify(SUMMARY["runs"], 3)
    assert {k: v["class"] for k, v in classes.items()} == {
        "rows": "fold", "read": "chunk", "member": "fixed", "score": "chunk"}
    assert classes["read"]["per_chunk"] == 3 and classes["score"]["per_chunk"] == 2
    assert not any(v["ambiguous"] for v in classes.values())
    # with 4 folds the 3-task kind is not one per fold (3 is not a multiple of 10 chunks: a fixed count)
    assert classify(SUMMARY["runs"], 4)["rows"]["class"] == "fixed"


def test_runs_with_different_chunk_counts_tell_per_chunk_from_per_member():
    # 12 tasks at 12 chunks could be one per chunk or 4 members x 3 folds; at 24 chunks it stays 12: fixed,
    # while a kind that doubles with the chunks is per chunk
    runs = [{"n": 1e6, "chunks": 12, "members": 4, "kinds": {"member": {"tasks": 12, "seconds": 1.0}, "oob": {"tasks": 12, "seconds": 1.0}}},
            {"n": 2e6, "chunks": 24, "members": 4, "kinds": {"member": {"tasks": 12, "seconds": 1.0}, "oob": {"tasks": 24, "seconds": 2.0}}}]
    classes = classify(runs, 3)
    assert classes["member"]["class"] == "fixed" and classes["member"]["tasks"] == 12
    assert classes["oob"] == {"class": "chunk", "per_chunk": 1, "ambiguous": False, "tasks": 24}
    # one chunk count only: the data cannot tell, so it is taken as per chunk and flagged
    same = [{"n": 1e6, "chunks": 12, "members": 4, "kinds": {"member": {"tasks": 12, "seconds": 1.0}}}]
    assert classify(same, 3)["member"] == {"class": "chunk", "per_chunk": 1, "ambiguous": True, "tasks": 12}
    assert "Taken as per chunk" in " ".join(project_scale([{"runs": [dict(same[0], T=1.0, first_task=0.0,
                                                                           after_last_task=0.0)]}],
                                                          1e8, [32])["assumptions"])


def test_projection_equals_the_formula_by_hand():
    summary = project_scale([SUMMARY], 1e8, [32, 128], inflation=2.0)
    # rows per chunk of the largest run: 3e6 / 10; chunks at 1e8: ceil(1e8 / 3e5) = 334
    assert summary["chunk_rows"] == 300_000 and summary["chunks"] == 334 and summary["folds"] == 3
    p32, p128 = summary["projections"]["32"], summary["projections"]["128"]
    client = (2 + 1e-6 * 1e8) + (1 + 0.5e-6 * 1e8)  # 153
    rows = (0.3 + 3e-6 * 1e8) / 3  # the fold chain: three folds side by side
    read, score = 6e-6 * 1e8 * 2.0, 4e-6 * 1e8 * 2.0  # inflated; 1,002 and 668 tasks: every worker busy
    member = 1.2 / 12  # 12 tasks: at most 12 workers
    assert p32["seconds"] == pytest.approx({
        "client before first task": 102.0, "client after last task": 51.0, "rows": rows, "read": read / 32,
        "member": member, "score": score / 32})
    assert p32["total"] == pytest.approx(client + rows + read / 32 + member + score / 32)
    assert p128["total"] == pytest.approx(client + rows + read / 128 + member + score / 128)
    assert p32["dominant"] == p128["dominant"] == "client before first task"
    assert p32["tasks"]["read"] == 1002 and p32["tasks"]["score"] == 668 and p32["tasks"]["member"] == 12
    assert p32["tasks"]["rows"] == 3


def test_the_check_at_measured_sizes_uses_two_workers_without_inflation():
    summary = project_scale([SUMMARY], 1e8, [32], inflation=2.0)
    # at 1e6 on 2 workers: client 3 + 1.5, rows 3.3 / 2, read 6 / 2, member 1.2 / 2, score 4 / 2 = 11.75
    first = summary["checks"][0]
    assert first["projected"] == pytest.approx(11.75)
    assert first["off"] == pytest.approx(11.75 / 12.5 - 1)
    text = "\n".join(render_markdown(summary))
    assert "| 1,000,000 | 0 | 12.5 | 11." in text and "| -6% |" in text  # 11.75 rounds either way


def test_fold_chains_use_at_most_the_workers_there_are():
    terms = [{"name": "assemble", "class": "fold", "tasks": 3, "a": 6.0, "b": 0.0}]
    assert project(terms, 1e6, 1, folds=3, chunks=1)["total"] == pytest.approx(6.0)
    assert project(terms, 1e6, 2, folds=3, chunks=1)["total"] == pytest.approx(3.0)
    assert project(terms, 1e6, 64, folds=3, chunks=1)["total"] == pytest.approx(2.0)


def test_busy_key_folds_and_the_default_folds():
    runs = [make_run(1e6, key="busy"), make_run(3e6, key="busy")]
    for run in runs:
        run["folds"] = 3
    assert project_scale([{"runs": runs}], 1e8, [32])["projections"]["32"]["total"] == pytest.approx(
        project_scale([SUMMARY], 1e8, [32])["projections"]["32"]["total"])
    assert default_folds() == 3  # serial_fraction's job: 2 splits x 1 repeat + the final model


def test_main_prints_and_writes_a_summary_results_md_can_render(tmp_path, capsys):
    from benchmarks.results import find_renderer

    path = tmp_path / "in.json"
    path.write_text(json.dumps(SUMMARY))
    out = tmp_path / "out"
    assert main([str(path), "--rows", "100000000", "--workers", "32", "128", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| **total** |" in printed and "W=128 s" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "project_scale" and (out / "report.md").read_text().strip() == printed.strip()
    assert find_renderer(summary["kind"]) is not None
    assert math.isclose(summary["projections"]["32"]["total"],
                        project_scale([SUMMARY], 1e8, [32])["projections"]["32"]["total"])
