"""The ``dimbsvm`` listings: ``datasets``, ``estimators``, ``features`` (see :mod:`dimbsvm.cli`)."""

from __future__ import annotations

import json

__all__ = ["cmd_datasets", "cmd_estimators", "cmd_features"]


def cmd_datasets(args) -> int:
    from .datasets import list_available, shared_datasets_dir

    available = list_available()
    print("bundled: " + ", ".join(available["bundled"]))
    shared = available.get("shared") or {}
    if not shared or not any(shared.values()):
        print("shared datasets: not found (set DIMBSVM_SHARED_DATASETS)")
        return 0
    print(f"shared ({shared_datasets_dir()}):")
    for group, names in shared.items():
        print(f"  {group} ({len(names)}): {', '.join(names)}")
    return 0


def cmd_estimators(args) -> int:
    from .estimators import describe_estimators, make_estimator

    return _list_components(describe_estimators(), make_estimator, as_json=args.json)


def cmd_features(args) -> int:
    from .estimators import describe_features, make_feature

    return _list_components(describe_features(), make_feature, as_json=args.json)


def _list_components(described: dict, make, *, as_json: bool) -> int:
    """Each name with its description and its parameters' defaults (those a job's ``params`` may set)."""
    listing = {}
    for name, description in described.items():
        params = make(name).get_params(deep=False)
        listing[name] = {"description": description,
                         "params": {key: _plain_default(value) for key, value in sorted(params.items())}}
    if as_json:
        print(json.dumps(listing, indent=2))
        return 0
    for name, entry in listing.items():
        print(f"{name}: {entry['description']}")
        for key, value in entry["params"].items():
            print(f"    {key} = {value!r}" if not isinstance(value, str) or not value.startswith("<")
                  else f"    {key} = {value}")
    return 0


def _plain_default(value):
    """A parameter's default as JSON shows it: plain values as they are, an estimator by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return f"<{value!r}>"
