"""Which screening rule for recommended(): chosen on the 20 selection sets, then looked at on the other 64.

Reads the offline scores of the two-round screening rules
(``python -m benchmarks.ensemble_selection halving ... --json FILE``: per rule
and dataset, test G-mean / F-measure / ROC-AUC and the seconds of the member
fits the rule makes) and the per-fold records of the 84-set quality run
(``benchmarks/results/keel-all/folds.csv``: the tuned peers, and the
unscreened recommended()'s fit time per fold).

A rule's fit time in the harness is estimated per dataset as the unscreened
recommended()'s measured fit time times the rule's share of the member
seconds. The choice, declared before any rule was scored:

    among the rules whose estimated fit time on the selection sets is at most
    1.5x that of ``smote_svc_grid`` (the harness's best-ranked tuned peer on
    the 84 sets), the one with the highest G-mean on the selection sets,
    provided its F-measure there is at least the best tuned peer's; ties go to
    the cheaper rule.

Usage (from the repository root)::

    python -m benchmarks.screening_choice HALVING_JSON benchmarks/results/keel-all \\
        --chosen-on benchmarks/search-public.yaml

prints one line per rule (selection sets, held-out sets, all) and the choice.
Nothing here is fitted: it is arithmetic on the two files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

#: The tuned peers of the quality suite, and the one the cost is compared with (best ranked on G-mean).
TUNED_PEERS = ("svc_balanced_grid", "smote_svc_grid", "auc_tuned_threshold")
COST_PEER = "smote_svc_grid"
MAX_COST_RATIO = 1.5


def per_dataset_means(folds: pd.DataFrame) -> pd.DataFrame:
    """Mean G-mean, F-measure and fit time per (method, dataset), failed folds left out."""
    ok = folds[folds["error"].isna()] if "error" in folds else folds
    return ok.groupby(["method", "dataset"])[["g_mean", "f_measure", "fit_time"]].mean()


def rule_table(halving: dict, harness: pd.DataFrame) -> pd.DataFrame:
    """One row per (rule, dataset): scores and the estimated harness fit time."""
    full = halving["None/None"]
    rows = []
    for rule, per_dataset in halving.items():
        for dataset, scores in per_dataset.items():
            measured = harness.loc[("recommended", dataset), "fit_time"]
            rows.append({"rule": rule, "dataset": dataset, "g_mean": scores["g_mean"],
                         "f_measure": scores["f_measure"],
                         "fit_time": measured * scores["seconds"] / full[dataset]["seconds"]})
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame, harness: pd.DataFrame, datasets: list[str]) -> tuple[pd.DataFrame, dict]:
    """Per-rule means over ``datasets`` (in percent; seconds), and the tuned peers' means over them."""
    rules = table[table["dataset"].isin(datasets)].groupby("rule")[["g_mean", "f_measure", "fit_time"]].mean()
    rules[["g_mean", "f_measure"]] *= 100
    peers = {}
    for peer in TUNED_PEERS:
        means = harness.loc[peer].loc[datasets].mean()
        peers[peer] = {"g_mean": 100 * means["g_mean"], "f_measure": 100 * means["f_measure"],
                       "fit_time": means["fit_time"]}
    return rules, peers


def choose(rules: pd.DataFrame, peers: dict) -> str | None:
    """The declared choice (module docstring), or ``None`` when no rule qualifies."""
    budget = MAX_COST_RATIO * peers[COST_PEER]["fit_time"]
    best_f = max(peer["f_measure"] for peer in peers.values())
    eligible = rules[(rules["fit_time"] <= budget) & (rules["f_measure"] >= best_f)]
    if eligible.empty:
        return None
    return eligible.sort_values(["g_mean", "fit_time"], ascending=[False, True]).index[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("halving", type=Path, help="the JSON of `benchmarks.ensemble_selection halving`")
    parser.add_argument("quality_run", type=Path, help="the 84-set quality run's directory (its folds.csv)")
    parser.add_argument("--chosen-on", type=Path, required=True, help="the suite whose datasets choose the rule")
    args = parser.parse_args(argv)
    import yaml

    halving = json.loads(args.halving.read_text())
    harness = per_dataset_means(pd.read_csv(args.quality_run / "folds.csv"))
    table = rule_table(halving, harness)
    everything = sorted(table["dataset"].unique())
    selection = [d for d in yaml.safe_load(args.chosen_on.read_text())["datasets"] if d in everything]
    held_out = [d for d in everything if d not in selection]
    groups = {"selection": selection, "held-out": held_out, "all": everything}
    views = {name: summarise(table, harness, sets) for name, sets in groups.items()}
    for name, (rules, peers) in views.items():
        print(f"## {name} ({len(groups[name])} datasets)")
        print(f"{'rule (screen/survivors)':>24} {'G-mean':>7} {'F':>6} {'fit s':>6}")
        for rule, row in rules.iterrows():
            print(f"{rule:>24} {row['g_mean']:7.1f} {row['f_measure']:6.1f} {row['fit_time']:6.2f}")
        for peer, row in peers.items():
            print(f"{peer:>24} {row['g_mean']:7.1f} {row['f_measure']:6.1f} {row['fit_time']:6.2f}")
    rules, peers = views["selection"]
    chosen = choose(rules, peers)
    print(f"datasets: {len(selection)} selection, {len(held_out)} held out; rules tried: {len(rules)}")
    print("chosen:", chosen if chosen is not None else "none qualifies on the selection sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
