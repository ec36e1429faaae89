"""Can out-of-bag margins choose an ensemble's (C, gamma) as well as an inner CV? (the search study)

For every dataset of a suite, every outer fold of its protocol (the harness's
folds: stratified 5-fold, seeds 0 and 1, min-max scaling fitted on the
training fold) and every (C, gamma) of the tuned peers' grid
(:data:`dimbsvm.bench.peers.TUNED_GRID`), this fits the members of
``EnsembleOTHRClassifier(SVC(C, gamma), **params)`` once and caches, per
candidate, the pooled out-of-bag margins of the training rows and the mean
margin of the test rows. Selection rules are then scored offline on the
cache (:func:`rules_for_fold`): rank the candidates of an outer fold by the
ROC-AUC of their out-of-bag margins only, average the standardised margins of
the best few, apply the ensemble's own shared-shift search to their pooled
out-of-bag margins, and score the test rows. No test row chooses anything
(the "oracle" row, where the test rows choose, is an upper bound, not a method).

Usage (from the repository root)::

    python -m benchmarks.ensemble_selection fit --suite benchmarks/keel-public.yaml --cache /tmp/ens-sel
    python -m benchmarks.ensemble_selection fit --suite benchmarks/keel-public.yaml --cache /tmp/ens-sel-bal \
        --class-weight balanced
    python -m benchmarks.ensemble_selection score --cache /tmp/ens-sel [/tmp/ens-sel-bal] [--json FILE]
    python -m benchmarks.ensemble_selection halving --cache /tmp/ens-sel /tmp/ens-sel-bal --json FILE

``fit`` skips (dataset, candidate) files already in the cache, so it can be
stopped and resumed; ``score`` prints a table of the rules.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from dimbsvm.bench.peers import TUNED_GRID
from dimbsvm.bench.suite import load_suite
from dimbsvm.datasets import load
from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.model_selection.splits import minority_class, repeat_seeds, repeat_splits
from dimbsvm.svm import EnsembleOTHRClassifier
from dimbsvm.svm.grid_members import oob_auc_and_spread
from dimbsvm.svm.threshold import best_threshold, midpoint_candidates

logger = logging.getLogger(__name__)

CANDIDATES = [dict(zip(TUNED_GRID, values)) for values in itertools.product(*TUNED_GRID.values())]


def _candidate_key(params: dict) -> str:
    return "_".join(f"{k}{v}" for k, v in sorted(params.items()))


def fit_dataset(name: str, protocol: dict, cache: Path, ensemble_params: dict) -> None:
    """Cache out-of-bag and test margins of every candidate on every outer fold of one dataset."""
    data = load(name)
    X, y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y)
    pos = minority_class(y)
    folds = [(seed, fold, train, test)
             for seed in repeat_seeds(protocol["n_repeats"], protocol["random_state"])
             for fold, (train, test) in enumerate(repeat_splits(y, n_splits=protocol["n_splits"], seed=seed))]
    for params in CANDIDATES:
        path = cache / name / f"{_candidate_key(params)}.npz"
        if path.exists():
            continue
        start = time.perf_counter()
        record = {"oob": [], "test": [], "y_train": [], "y_test": [], "fit_seconds": []}
        for _seed, _fold, train, test in folds:
            scaler = MinMaxScaler().fit(X[train])
            X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
            ens = EnsembleOTHRClassifier(SVC(**params), random_state=0, **ensemble_params)
            plan = ens.plan_members(y[train])
            members, seconds = [], []
            for seed, spec in zip(plan.seeds, plan.members):
                t0 = time.perf_counter()
                members.append(spec.fit(X_train, y[train], seed))  # the fit and its out-of-bag scoring
                seconds.append(time.perf_counter() - t0)
            record["fit_seconds"].append(np.array(seconds))
            # per member: its out-of-bag margins (NaN in its bag) and its test margins (theta = 0 here)
            oob = np.full((len(members), len(train)), np.nan)
            for i, member in enumerate(members):
                oob[i, member.oob_rows] = member.oob_margins
            record["oob"].append(oob)
            record["test"].append(np.stack([m.shifted_margin(X_test) for m in members]))
            record["y_train"].append(y[train] == pos)
            record["y_test"].append(y[test] == pos)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".partial.npz")
        np.savez(tmp, **{k: _object_array(v) for k, v in record.items()}, params=repr(params))
        tmp.rename(path)
        logger.info("%s %s: %.1f s", name, params, time.perf_counter() - start)


def _object_array(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def shared_shift(oob, counts, positive, **search):
    """The ensemble's default shared-shift search on pooled out-of-bag margins."""
    rows = counts > 0
    theta, _ = best_threshold(positive[rows], oob[rows], midpoint_candidates(oob[rows])[0], **search)
    return theta


#: The ensemble's own default shared-shift search (objective, smoothing, tolerance), read from it.
DEFAULT_SEARCH = {key: value for key, value in EnsembleOTHRClassifier().get_params().items()
                  if key in ("objective", "smoothing", "tolerance")}


def load_cache(cache: Path) -> dict:
    """``{dataset: {candidate key: record}}`` of every cached file."""
    out = {}
    for path in sorted(cache.glob("*/*.npz")):
        if path.name.endswith(".partial.npz"):
            continue
        with np.load(path, allow_pickle=True) as f:
            out.setdefault(path.parent.name, {})[path.stem] = {k: f[k] for k in f.files}
    return out


def pooled(record, fold, members):
    """Pooled out-of-bag margins and counts of the first ``members`` members."""
    per_member = record["oob"][fold][:members]
    counts = np.sum(~np.isnan(per_member), axis=0)
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.where(counts > 0, per_member, 0.0), axis=0), counts


def _standardised(record, fold, members, positive):
    """A candidate's pooled out-of-bag and test mean margins (first ``members`` members), divided by the
    out-of-bag margins' spread as the estimator does (:func:`oob_auc_and_spread`), its counts and
    out-of-bag ROC-AUC."""
    oob, counts = pooled(record, fold, members)
    auc, spread = oob_auc_and_spread(oob, counts, positive)
    return oob / spread, record["test"][fold][:members].mean(axis=0) / spread, counts, auc


SEARCHES = {
    "default shift": DEFAULT_SEARCH,
    "tolerance 0": {**DEFAULT_SEARCH, "tolerance": 0.0},
}


def averaged_scores(parts, positive, y_test, search):
    """Test scores of the mean of standardised margins ``parts``, shifted by the pooled search on their OOB mean."""
    counts = np.min([part[2] for part in parts], axis=0)
    oob = np.mean([part[0] for part in parts], axis=0)
    test = np.mean([part[1] for part in parts], axis=0)
    theta = shared_shift(oob, counts, positive, **search)
    predicted = test + theta > 0
    return {"g_mean": g_mean(y_test, predicted), "f_measure": f_measure(y_test, predicted, pos_label=True),
            "auc": roc_auc_score(y_test, test)}


def _top(parts, n_top, among=None):
    """The ``n_top`` settings of best out-of-bag ROC-AUC (NaN last, ties in key order), as the estimator ranks."""
    keys = list(parts) if among is None else among
    return sorted(keys, key=lambda k: -np.nan_to_num(parts[k][3], nan=-np.inf))[:n_top]


def rules_for_fold(records, keys, fold, *, fixed_keys=(), oracle=False):
    """``{rule: test scores}`` of every rule on one outer fold; nothing but training rows chooses.

    With ``oracle``, also every setting alone and the "oracle": the setting
    whose *test* G-mean is best, an upper bound on what choosing one setting
    per fold can give, never a method.
    """
    positive = records[keys[0]]["y_train"][fold]
    y_test = records[keys[0]]["y_test"][fold]
    out = {}
    full = {k: _standardised(records[k], fold, 10, positive) for k in keys}
    screen = {k: _standardised(records[k], fold, 3, positive) for k in keys}
    for k in (keys if oracle else fixed_keys):
        out["fixed " + k] = averaged_scores([full[k]], positive, y_test, DEFAULT_SEARCH)
    if oracle:
        out["oracle: the test rows choose one setting"] = max(
            (out["fixed " + k] for k in keys), key=lambda t: t["g_mean"])
    for search_name, search in SEARCHES.items():
        for n_top in (1, 3, 5):
            out[f"10 members, top-{n_top} by OOB AUC, {search_name}"] = averaged_scores(
                [full[k] for k in _top(full, n_top)], positive, y_test, search)
        for n_screen in (4, 6):
            # successive halving: 3 members per setting rank them all, the best n_screen get 10 members
            survivors = _top(screen, n_screen)
            out[f"halving 3 -> 10 members ({n_screen} settings), top-3, {search_name}"] = averaged_scores(
                [full[k] for k in _top(full, 3, survivors)], positive, y_test, search)
    return out


def score(caches, fixed=("C1.0_gammascale",), oracle=False) -> list[dict]:
    """Mean test G-mean / F-measure / AUC over datasets of each rule (:func:`rules_for_fold`).

    Several caches (e.g. members without and with class_weight="balanced")
    are searched as one grid, their settings named ``cache:setting``.
    """
    merged = {}
    for cache in caches:
        for name, records in load_cache(cache).items():
            if len(records) == len(CANDIDATES):
                merged.setdefault(name, {}).update({f"{cache.name}:{k}": r for k, r in records.items()})
    complete = {name: recs for name, recs in merged.items() if len(recs) == len(CANDIDATES) * len(caches)}
    results = {}
    for name, records in complete.items():
        keys = sorted(records)
        per_rule = {}
        for fold in range(len(records[keys[0]]["oob"])):
            fixed_keys = [k for k in keys if k.split(":", 1)[1] in fixed]
            for rule, scores in rules_for_fold(records, keys, fold, fixed_keys=fixed_keys, oracle=oracle).items():
                per_rule.setdefault(rule, []).append(scores)
        for rule_name, fold_scores in per_rule.items():
            results.setdefault(rule_name, []).append(
                {"dataset": name, **{m: np.mean([s[m] for s in fold_scores]) for m in ("g_mean", "f_measure", "auc")}})
    return [{"rule": rule, "datasets": len(per_dataset), "per_dataset": per_dataset,
             **{m: 100 * np.mean([d[m] for d in per_dataset]) for m in ("g_mean", "f_measure", "auc")}}
            for rule, per_dataset in results.items()]


#: The two-round screening rules scored by ``halving`` (17): (members per setting in the screen, settings that
#: get all 10 members); every rule keeps the best 3 survivors and uses tolerance 0, as recommended() does.
HALVING_RULES = [(None, None)] + [(screen, survivors) for screen in (1, 2, 3, 4) for survivors in (3, 4, 6, 8)]


def halving_for_fold(records, keys, fold, rules=HALVING_RULES, n_top=3):
    """``{rule: test scores and member seconds}`` of each screening rule on one outer fold.

    The rule ``(None, None)`` is the unscreened grid (every member of every
    setting). A rule's cost is the sum of the fit seconds of the members it
    fits (the cache times each member's fit and out-of-bag scoring).
    """
    positive = records[keys[0]]["y_train"][fold]
    y_test = records[keys[0]]["y_test"][fold]
    full = {k: _standardised(records[k], fold, 10, positive) for k in keys}
    seconds = {k: np.asarray(records[k]["fit_seconds"][fold], dtype=float) for k in keys}
    search = {**DEFAULT_SEARCH, "tolerance": 0.0}
    out, scored, screens = {}, {}, {}
    for screen, n_survivors in rules:
        if screen is None:
            survivors, cost = list(keys), sum(seconds[k].sum() for k in keys)
        else:
            if screen not in screens:
                screens[screen] = {k: _standardised(records[k], fold, screen, positive) for k in keys}
            screened = screens[screen]
            survivors = _top(screened, n_survivors)
            cost = sum(seconds[k][:screen].sum() for k in keys) + sum(seconds[k][screen:].sum() for k in survivors)
        kept = tuple(_top(full, n_top, survivors))
        if kept not in scored:  # rules that keep the same settings give the same model
            scored[kept] = averaged_scores([full[k] for k in kept], positive, y_test, search)
        out[(screen, n_survivors)] = {**scored[kept], "seconds": cost}
    return out


def _halving_for_dataset(caches, name) -> dict:
    """``{rule: mean test scores and member seconds per fold}`` of one dataset, or ``{}`` if a cache lacks it."""
    records = {}
    for cache in caches:
        found = {path.stem: path for path in (cache / name).glob("*.npz") if not path.name.endswith(".partial.npz")}
        if len(found) != len(CANDIDATES):
            return {}
        for key, path in found.items():
            with np.load(path, allow_pickle=True) as f:
                records[f"{cache.name}:{key}"] = {k: f[k] for k in f.files}
    keys = sorted(records)
    per_fold = [halving_for_fold(records, keys, fold) for fold in range(len(records[keys[0]]["oob"]))]
    return {rule: {m: float(np.mean([f[rule][m] for f in per_fold])) for m in ("g_mean", "f_measure", "auc", "seconds")}
            for rule in per_fold[0]}


def score_halving(caches, jobs: int = 1) -> dict:
    """``{rule: {dataset: mean test scores and member seconds per fold}}`` over the datasets every cache holds."""
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    names = sorted({path.name for cache in caches for path in cache.iterdir() if path.is_dir()})
    with ProcessPoolExecutor(jobs) as pool:
        per_dataset = dict(zip(names, pool.map(partial(_halving_for_dataset, caches), names)))
    out = {}
    for name, rules in per_dataset.items():
        for rule, scores in rules.items():
            out.setdefault(rule, {})[name] = scores
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit")
    fit.add_argument("--suite", default="benchmarks/keel-public.yaml")
    fit.add_argument("--cache", type=Path, required=True)
    fit.add_argument("--datasets", nargs="*")
    fit.add_argument("--class-weight", default=None, choices=[None, "balanced"])
    sc = sub.add_parser("score")
    sc.add_argument("--cache", type=Path, nargs="+", required=True)
    sc.add_argument("--json", type=Path, help="also write every rule's per-dataset means here")
    sc.add_argument("--oracle", action="store_true", help="also every setting alone and the oracle bound")
    hv = sub.add_parser("halving", help="score the two-round screening rules (HALVING_RULES) with their cost")
    hv.add_argument("--cache", type=Path, nargs="+", required=True)
    hv.add_argument("--json", type=Path, required=True, help="per rule and dataset: scores and member seconds")
    hv.add_argument("--jobs", type=int, default=2, help="datasets scored at once (processes)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.command == "fit":
        suite = load_suite(args.suite)
        params = {"class_weight": args.class_weight} if args.class_weight else {}
        for name in args.datasets or suite["datasets"]:
            fit_dataset(name, suite["protocol"], args.cache, params)
        return 0
    if args.command == "halving":
        results = score_halving(args.cache, args.jobs)
        args.json.write_text(json.dumps({f"{screen}/{survivors}": per_dataset
                                         for (screen, survivors), per_dataset in results.items()}, indent=1))
        for (screen, survivors), per_dataset in results.items():
            logger.info("screen %s, survivors %s: %d datasets  G-mean %.1f  F-measure %.1f  member s/fold %.2f",
                        screen, survivors, len(per_dataset),
                        100 * np.mean([d["g_mean"] for d in per_dataset.values()]),
                        100 * np.mean([d["f_measure"] for d in per_dataset.values()]),
                        np.mean([d["seconds"] for d in per_dataset.values()]))
        return 0
    rows = score(args.cache, oracle=args.oracle)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    for row in rows:
        logger.info("%-50s %2d datasets  G-mean %.1f  F-measure %.1f  AUC %.1f", row["rule"], row["datasets"],
                    row["g_mean"], row["f_measure"], row["auc"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
