"""The steps a job fits per training fold: ``[imputer] -> [scaler] -> [feature stages] -> estimator``."""

from __future__ import annotations

from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler


__all__ = ["IMPUTERS", "SCALERS", "build_pipeline", "preprocessing_steps"]

#: ``maxabs`` divides each feature by its largest absolute value: it keeps zeros zero, so sparse rows stay
#: sparse (the one scaler a sparse store takes besides none).
SCALERS = ("minmax", "standard", "maxabs", "none")
IMPUTERS = ("none", "mean", "median")


def build_pipeline(estimator, *, scaler: str = "minmax", impute: str = "none", features=()):
    """``[imputer] -> [scaler] -> [feature stages] -> estimator``, each fitted on training rows only."""
    return make_pipeline(*preprocessing_steps(scaler=scaler, impute=impute, features=features), clone(estimator))


def preprocessing_steps(*, scaler: str = "minmax", impute: str = "none", features=()) -> list:
    """The unfitted steps before the estimator: ``[imputer] [scaler] [feature stages]`` (clones)."""
    steps = []
    if impute != "none":
        # imported here: sklearn.impute loads the neighbours module (KNNImputer), a tenth of a second that
        # a job without missing values would pay at every start
        from sklearn.impute import SimpleImputer

        steps.append(SimpleImputer(strategy=impute))
    if scaler == "minmax":
        steps.append(MinMaxScaler())
    elif scaler == "standard":
        steps.append(StandardScaler())
    elif scaler == "maxabs":
        steps.append(MaxAbsScaler())
    elif scaler != "none":
        raise ValueError(f"unknown scaler {scaler!r}; accepted: {', '.join(SCALERS)}")
    steps.extend(clone(stage) for stage in features)
    return steps
