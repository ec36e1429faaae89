"""Prediction: a saved model that scores raw rows on its own, and scoring at scale.

``arrays``
    encoded feature arrays (a store's rows, the in-memory readers' files):
    columns matched to the model's by name, scored chunk by chunk.
``encoding``
    how raw rows become the model's features (input columns, training
    categories, unseen categories), recorded in the model's meta.
``model``
    :class:`DimbsvmModel` and :func:`load_model`: raw rows in, class names out.
``tables``
    ``dimbsvm predict``: Parquet, CSV or a store in, scored partition by
    partition on the cluster, written as Parquet, CSV or a store.
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: a run writes its model's meta with
#: predict.encoding; scoring tables (Dask DataFrames) is dimbsvm predict's.
_LAZY = {
    **dict.fromkeys(("align_features", "feature_order", "has_probability", "is_store", "predict_chunks",
                     "prediction_columns", "prediction_features", "write_prediction_csv", "write_predictions"), ".arrays"),
    **dict.fromkeys(("UNKNOWN_CATEGORIES", "InputEncoding", "RowError", "class_names", "column_names",
                     "prediction_meta"), ".encoding"),
    **dict.fromkeys(("DimbsvmModel", "load_model"), ".model"),
    **dict.fromkeys(("COMPLETE_MARKER", "Prediction", "Written", "check_output", "output_kind", "plan_prediction",
                     "predict_to"), ".tables"),
}

__all__ = ["COMPLETE_MARKER", "UNKNOWN_CATEGORIES", "DimbsvmModel", "InputEncoding", "Prediction", "RowError",
           "Written", "align_features", "check_output", "class_names", "column_names", "feature_order",
           "has_probability",
           "is_store", "load_model", "output_kind", "plan_prediction", "predict_chunks", "predict_to",
           "prediction_columns", "prediction_features", "prediction_meta", "write_prediction_csv",
           "write_predictions"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
