"""The ``dimbsvm`` verbs on a model registry: ``models``, ``promote``, ``rollback`` (see :mod:`dimbsvm.cli`)."""

from __future__ import annotations

from .exceptions import DimbsvmError

__all__ = ["cmd_models", "cmd_promote", "cmd_rollback", "open_registry"]


def open_registry(path):
    """The registry at ``path``; a directory that is not one is an error (exit 2), not an empty listing."""
    from .jobs.registry import ModelRegistry

    registry = ModelRegistry(path)
    if not registry.exists():
        raise DimbsvmError(f"{path} is not a model registry (no versions/ and no champion.json in it)")
    return registry


def cmd_models(args) -> int:
    registry = open_registry(args.registry)
    versions = registry.versions()
    args.json_document = {"registry": str(args.registry), "champion": registry.champion(),
                          "versions": versions}
    if not versions:
        print(f"{args.registry}: no versions")
        return 0
    for info in versions:
        mark = "*" if info["champion"] else " "
        metrics = " ".join(f"{k}={v:.4f}" for k, v in info.get("holdout_metrics", {}).items())
        print(f"{mark} {info['id']}  {info.get('job', '')}  {metrics}")
    print(f"champion: {registry.champion()}")
    return 0


def cmd_promote(args) -> int:
    registry = open_registry(args.registry)
    version = registry.resolve(args.version)
    registry.set_champion(version, reason=args.reason)
    print(f"champion: {version}")
    _sync_tracking(args.registry)
    return 0


def cmd_rollback(args) -> int:
    version = open_registry(args.registry).rollback(reason=args.reason)
    print(f"champion: {version}")
    _sync_tracking(args.registry)
    return 0


def _sync_tracking(registry) -> None:
    """Move MLflow's ``champion`` alias too, where ``retrain`` registered this registry's versions there."""
    from .jobs.tracking import sync_champion

    sync_champion(registry)
