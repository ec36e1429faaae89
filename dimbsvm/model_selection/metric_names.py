"""The metrics a job, a search or a suite may ask for, by name and kind."""

__all__ = ["BINARY_METRICS", "METRICS", "QUALITY_METRICS", "SCORE_METRICS", "TIME_METRICS"]

#: Quality metrics a job or suite may ask for. ``auc`` (ROC-AUC) and
#: ``average_precision`` need a score (decision_function or predict_proba);
#: ``precision``, ``recall`` (TPR) and ``specificity`` (TNR) are of the
#: positive (minority) class; ``balanced_accuracy`` equals ``a_mean`` and is
#: scikit-learn's name for it; ``mcc`` is the Matthews correlation coefficient.
QUALITY_METRICS = ("g_mean", "f_measure", "auc", "a_mean", "precision", "recall", "specificity",
                   "average_precision", "mcc", "balanced_accuracy")
#: Times measured around fit and predict (seconds): reported apart from quality.
TIME_METRICS = ("fit_time", "predict_time")
#: Everything a job or suite may ask for.
METRICS = QUALITY_METRICS + TIME_METRICS
#: Binary-only metrics.
BINARY_METRICS = ("f_measure", "auc", "precision", "recall", "specificity", "average_precision")
#: Metrics computed from scores rather than predictions.
SCORE_METRICS = ("auc", "average_precision")
