"""Retrain a job's model and promote it only when it is at least as good as the champion.

One retraining run:

1. open the job's current data, code its labels as the champion coded them
   (its class map and positive class, by class name; the job's
   ``data.positive`` on the first run, else the minority rule), and split off
   the holdout (a stratified fraction with a seed, or a separate source coded
   the same way);
2. fit the challenger on the remaining rows (through the fold engine: an
   ensemble's members are tasks of their own);
3. load the champion (its manifest is verified: a tampered artifact stops the
   run) and score both on the same holdout rows;
4. write the challenger as a new immutable version, then promote it when every
   gated metric is at least the champion's minus its tolerance (the first run
   always promotes), recording the decision in the registry's history.

A retraining whose data and model parameters are those of the champion, or of
a challenger the gates kept out against the same champion (the same data
fingerprint and :func:`model_fingerprint`), would fit the same model and reach
the same decision again: it is recorded in the history as ``unchanged`` and
writes no version, unless forced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import train_test_split

from ..parallel import map_tasks
from ..predict.arrays import feature_order
from ..predict.encoding import column_names
from ..model_selection.scoring import score_rows
from ..exceptions import DataError
from ..store import content_fingerprint
from .registry import ModelRegistry
from ..artifacts import positive_class
from .checks import CheckedJob
from .data import JobData, check_job_data, class_names, code_labels, coded_as, load_job_data
from .job_spec import JobSpec
from .job_folds import challenger_spec, fold_setup
from .runner import execute_folds, model_meta
from .spec import job_search
from .tracking import track_retrain

__all__ = ["RetrainOutcome", "retrain", "retrain_checked", "gate_decision"]

logger = logging.getLogger(__name__)


@dataclass
class RetrainOutcome:
    """What one retraining run decided.

    Attributes
    ----------
    version : str
        The challenger's version id; for an ``unchanged`` run, the version
        already fitted on the same data with the same parameters (the
        champion, or a challenger the gates kept out against it): no
        challenger was fitted.
    promoted : bool
        Whether the challenger became the champion.
    champion : str or None
        The champion when the run started (None on the first run).
    challenger_metrics, champion_metrics : dict
        Holdout metrics of both (those recorded when unchanged).
    reason : str
        Why, in words (the gates, or why nothing was fitted).
    search_params : dict or None
        The parameters a search chose for the challenger.
    unchanged : bool
        No challenger was fitted: ``version`` was fitted on the same data
        with the same parameters, and its outcome would repeat.
    """

    version: str
    promoted: bool
    champion: str | None
    challenger_metrics: dict
    champion_metrics: dict | None
    reason: str
    search_params: dict | None = None
    unchanged: bool = False

    @property
    def action(self) -> str:
        """``"promoted"``, ``"kept"`` (a challenger was fitted and the champion stays) or ``"unchanged"``."""
        if self.promoted:
            return "promoted"
        return "unchanged" if self.unchanged else "kept"

    def summary(self) -> str:
        """One line naming the champion and the challenger as what they are.

        Examples
        --------
        >>> RetrainOutcome("v0002", False, "v0001", {}, {}, "gate failed: g_mean").summary()
        'challenger v0002 not promoted, champion v0001 kept (gate failed: g_mean)'
        >>> RetrainOutcome("v0001", False, "v0001", {}, {}, "same data", unchanged=True).summary()
        'champion v0001 unchanged, no challenger fitted (same data)'
        """
        if self.unchanged:
            return f"champion {self.champion} unchanged, no challenger fitted ({self.reason})"
        if self.promoted:
            over = f" over champion {self.champion}" if self.champion else ""
            return f"challenger {self.version} promoted{over} ({self.reason})"
        return f"challenger {self.version} not promoted, champion {self.champion} kept ({self.reason})"


def gate_decision(challenger: dict, champion: dict | None, gates: dict) -> tuple[bool, str]:
    """Whether the challenger passes every gate, and why.

    Examples
    --------
    >>> gate_decision({"g_mean": 0.80}, {"g_mean": 0.81}, {"g_mean": {"tolerance": 0.02}})
    (True, 'every gate passed: g_mean 0.8000 >= 0.8100 - 0.02')
    >>> gate_decision({"g_mean": 0.80}, {"g_mean": 0.81}, {"g_mean": {}})[0]
    False
    """
    if champion is None:
        return True, "first model in the registry"
    failed, passed = [], []
    for metric, gate in gates.items():
        tolerance = float(gate.get("tolerance", 0.0))
        line = f"{metric} {challenger[metric]:.4f} {{}} {champion[metric]:.4f} - {tolerance:g}"
        if challenger[metric] >= champion[metric] - tolerance:
            passed.append(line.format(">="))
        else:
            failed.append(line.format("<"))
    if failed:
        return False, "gate failed: " + "; ".join(failed)
    return True, "every gate passed: " + "; ".join(passed)


def model_fingerprint(job: JobSpec) -> str:
    """SHA-256 of what decides the fitted model besides the data: preprocessing, features, estimator, holdout, search."""
    decides = {"preprocessing": job.preprocessing.to_dict(), "features": [stage.to_dict() for stage in job.features],
               "estimator": job.estimator.to_dict(), "holdout": job.retrain.holdout.to_dict()}
    if job.search is not None:  # only with one: the fingerprints of registries without a search stay as they were
        decides["search"] = job.search.to_dict()
    return hashlib.sha256(json.dumps(decides, sort_keys=True, default=str).encode()).hexdigest()


def retrain_checked(checked: CheckedJob, client, registry_dir, *, force: bool = False) -> RetrainOutcome:
    """:func:`retrain` of a job that passed :func:`~dimbsvm.jobs.checks.check_job`: its data is not checked again."""
    return _retrain(checked.job, client, registry_dir, job_text=checked.job_text, data=checked.data, force=force)


def retrain(job: JobSpec, client, registry_dir, *, job_text: str, data: JobData | None = None,
            force: bool = False) -> RetrainOutcome:
    """Check the data and run one retraining of ``job`` against the registry at ``registry_dir``.

    With ``force=False``, a job whose data fingerprint and
    :func:`model_fingerprint` equal the champion's fits nothing: the outcome
    names the champion, ``promoted`` is false, and the registry's history
    records ``unchanged``.

    Raises
    ------
    StoreError
        The champion's artifact fails verification (tampered or damaged): no
        challenger is promoted over a model that cannot be checked.
    DataError
        Bad data, or a holdout source whose features differ from the training data's (in count, or in the
        names of its columns: they are matched by name, in any order, as prediction matches them); a positive class
        (``data.positive``) that is not a class of the data or not the champion's; data or a holdout whose
        class names are not the champion's (or the training data's): a new or a missing class.
    """
    if data is None:
        data = load_job_data(job.data.source, nominal=job.data.nominal)
    check_job_data(data, job)
    return _retrain(job, client, registry_dir, job_text=job_text, data=data, force=force)


def _retrain(job: JobSpec, client, registry_dir, *, job_text: str, data: JobData, force: bool) -> RetrainOutcome:
    """:func:`retrain` with ``data`` checked for ``job``."""
    registry = ModelRegistry(registry_dir)
    gates = job.retrain.to_dict()["gates"]
    binary_gates = sorted(set(gates) & {"f_measure", "auc"})
    if binary_gates and len(np.unique(data.y)) > 2:
        raise DataError(f"{data.name}: gated metric(s) {', '.join(binary_gates)} need two classes")
    champion = registry.champion()
    champion_model, champion_meta = registry.load(champion) if champion else (None, None)  # verified before any work
    # the champion's coding, not this batch's class balance: else a flipped balance inverts the labels it is
    # scored against, and the challenger learns the other class as positive
    data, pos_label = code_labels(data, positive=job.data.positive, champion=champion_meta,
                                  champion_id=champion or "champion")
    if champion_meta is not None:
        _check_champion_columns(data, champion_meta, champion)
    train_data, train_rows, hold_data, hold_rows = _holdout(job, data)
    fingerprints = {"data_fingerprint": content_fingerprint(data.meta) or None,
                    "model_fingerprint": model_fingerprint(job)}
    if champion and not force and fingerprints["data_fingerprint"]:
        tried = _already_tried(registry, champion, fingerprints)
        if tried is not None:
            version, reason = tried
            info = next((v for v in registry.versions() if v["id"] == champion), {})
            registry.record({"action": "unchanged", "version": version, "reason": reason, **fingerprints})
            metrics = info.get("holdout_metrics") or {}
            tried_metrics = next((v.get("holdout_metrics") for v in registry.versions() if v["id"] == version),
                                 None) or metrics
            outcome = RetrainOutcome(version=version, promoted=False, champion=champion,
                                     challenger_metrics=tried_metrics, champion_metrics=metrics, reason=reason,
                                     unchanged=True)
            logger.info("retrain %s: %s", job.name, outcome.summary())
            track_retrain(job, registry_dir, outcome)  # the champion alias, should it have moved meanwhile
            return outcome

    # the challenger through the fold engine: an ensemble's members fan out as tasks
    search = job_search(job)  # with a search, the challenger's parameters are chosen on its training rows
    setup = fold_setup(job, pos_label, metrics=(), search=search, class_map=data.meta.get("class_map"))
    [fitted], _ = execute_folds(job, setup, train_data, [challenger_spec(train_rows)], client=client,
                                label="challenger tasks")
    challenger = fitted.model
    chosen = {"search_params": fitted.search["params"]} if search is not None else {}
    reported = set(gates) | set(_always_reported(data))
    metrics = sorted(reported)
    models = [challenger] + ([champion_model] if champion_model is not None else [])
    scores = map_tasks(
        score_rows, [{"model": m, "rows": hold_rows, "metrics": tuple(metrics), "pos_label": pos_label}
                     for m in models],
        client=client, shared={"X": hold_data.X, "y": hold_data.y}, retries=job.execution.retries,
        label="holdout scores")
    challenger_metrics = scores[0]
    champion_metrics = scores[1] if champion_model is not None else None

    promote, reason = gate_decision(challenger_metrics, champion_metrics, gates)
    version = registry.add_version(
        challenger, job_text=job_text,
        info={"job": job.name, "estimator": job.estimator.to_dict(), **fingerprints,
              "n_train": int(len(train_rows)), "n_holdout": int(len(hold_rows)),
              "holdout_metrics": challenger_metrics, **chosen},
        # a later retraining keeps the positive class by its name, so one is always recorded
        model_meta={**model_meta(challenger, job, data, pos_label), "positive_class": _positive_name(data, pos_label)})
    event = {"data_fingerprint": fingerprints["data_fingerprint"], "challenger_metrics": challenger_metrics,
             "champion": champion, "champion_metrics": champion_metrics}
    raced = False
    if promote:
        promoted = registry.promote(version, reason=reason, expected_champion=champion, event=event)
        if not promoted:
            raced = True
            # the one another process promoted stays; the metrics scored were its predecessor's
            champion, champion_metrics = registry.champion(), None
            reason = f"the champion changed while {version} was evaluated; it passed the gates of the old one"
    else:
        promoted = False
        registry.record(dict(event, action="keep_champion", version=version, reason=reason))
    outcome = RetrainOutcome(version=version, promoted=promoted, champion=champion,
                             challenger_metrics=challenger_metrics, champion_metrics=champion_metrics, reason=reason,
                             search_params=chosen.get("search_params"))
    # a routine outcome (promoted, or kept by the gates) is information; two writers racing on one registry is
    # not routine: someone should look
    logger.log(logging.WARNING if raced else logging.INFO, "retrain %s: %s", job.name, outcome.summary())
    track_retrain(job, registry_dir, outcome)  # after the registry recorded it; an MLflow error is a warning
    return outcome


def _already_tried(registry, champion: str, fingerprints: dict):
    """``(version, reason)`` of a version fitted on the same data with the same parameters whose outcome would
    repeat: the champion itself, or a challenger the gates kept out against this same champion; else None."""
    same = {v["id"] for v in registry.versions()
            if all(v.get(key) == value for key, value in fingerprints.items())}
    if champion in same:
        return champion, (f"the champion {champion} was fitted on the same data with the same parameters; no new "
                          "version (--force retrains anyway)")
    for event in reversed(registry.history()):
        if (event.get("action") == "keep_champion" and event.get("version") in same
                and event.get("champion") == champion):
            version = event["version"]
            return version, (f"{version} was fitted on the same data with the same parameters and the gates kept it "
                             f"out against the champion {champion}; no new version (--force retrains anyway)")
    return None


def _holdout(job: JobSpec, data: JobData):
    """``(train_data, train_rows, hold_data, hold_rows)``: a stratified split of ``data``, or a separate source.

    A separate source is coded as ``data`` is, by class name: its own class
    balance (a reversed ratio) does not decide its coding.
    """
    settings = job.retrain.holdout
    source = settings.source
    if not source:
        train_rows, hold_rows = train_test_split(np.arange(len(data.y)), test_size=settings.fraction,
                                                 random_state=settings.random_state, stratify=data.y)
        return data, train_rows, data, hold_rows
    hold_data = load_job_data(source, nominal=job.data.nominal)
    if tuple(hold_data.X.shape[1:]) != tuple(data.X.shape[1:]):
        raise DataError(f"holdout {source} has {hold_data.X.shape[1:]} features per row, "
                        f"the training data {data.X.shape[1:]}")
    hold_data = _columns_as(hold_data, data, f"holdout {source}")
    hold_data = coded_as(hold_data, class_names(data), reference=f"the training data {data.name}")
    return data, np.arange(len(data.y)), hold_data, np.arange(len(hold_data.y))


def _check_champion_columns(data: JobData, champion_meta: dict, champion: str) -> None:
    """The champion scores the holdout's rows as they are: they must be its features, in its order.

    Raises
    ------
    DataError
        Other or more or fewer features than the champion's (an svmlight batch
        with another highest index included), or its named columns in another
        order; one line naming both.
    """
    n_features = champion_meta.get("n_features")
    if n_features is None or len(data.X.shape) != 2:
        return  # an older model's meta, or time series (channels, not feature columns)
    source = f"{data.name} (for the champion {champion})"
    try:
        order = feature_order(column_names(data.meta), data.X.shape[1],
                              feature_names=champion_meta.get("feature_names"), n_features=int(n_features),
                              source=source)
    except DataError as exc:
        raise DataError(f"{exc}; the champion and the challenger are compared on the same rows, so they need its "
                        "features (an svmlight batch with fewer: ingest it with --n-features "
                        f"{int(n_features)}; new features: a new registry)") from None
    if order is not None:
        raise DataError(f"{source}: its columns are the champion's in another order; write them in the champion's "
                        "order (or retrain into a new registry)")


def _columns_as(hold_data: JobData, data: JobData, source: str) -> JobData:
    """The holdout with its columns in the training data's order, matched by name as prediction matches them.

    A store's columns cannot be reordered in place: a store holdout whose
    named columns are in another order is refused.
    """
    if len(hold_data.X.shape) != 2:
        return hold_data  # time series: channels, not named feature columns
    order = feature_order(column_names(hold_data.meta), hold_data.X.shape[1],
                          feature_names=column_names(data.meta), n_features=data.X.shape[1], source=source)
    if order is None:
        return hold_data
    if not isinstance(hold_data.X, np.ndarray):
        raise DataError(f"{source}: its columns are the training data's in another order, and a store's columns "
                        "are not reordered; ingest it with the training data's column order")
    logger.info("%s: columns reordered by name to the training data's order", source)
    return dataclasses.replace(hold_data, X=np.ascontiguousarray(hold_data.X[:, order]))


def _positive_name(data: JobData, pos_label) -> str:
    """The positive class's name, recorded in the model's meta so that a later retraining keeps it."""
    name = positive_class({"class_map": class_names(data), "positive_label": pos_label})
    return name if name is not None else str(pos_label)


def _always_reported(data: JobData):
    """G-mean, and F-measure where it is defined (two classes), beside the gated metrics."""
    return ("g_mean", "f_measure") if len(np.unique(data.y)) == 2 else ("g_mean",)
