"""Tabular sources read partition by partition: Parquet, CSV, URLs and DataFrames.

``ingest`` hands a Parquet or CSV path or URL, or a DataFrame, to
:func:`resolve_tabular_source`, which returns lazy Dask arrays and the
store's meta. Rooms, in the order a source passes through them:

``_locate``
    the files of a path, directory, glob or fsspec URL; their format; their
    fingerprint; the extra to install for a URL's filesystem.
``_frames``
    the source as a lazy Dask DataFrame (``read_parquet``, ``read_csv``).
``_columns``
    which column is the label, the id, dropped, a feature, and of what kind.
``_scan`` (workers)
    one pass: every partition summarised, summaries merged in a tree.
``_decide`` (client)
    kinds settled, categories fixed, classes mapped; every refusal.
``_encode`` (workers)
    a partition as features, labels and ids.
``ids``
    the ``ids`` array a store keeps beside its rows.
"""

from ..._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: the pieces predicting reuses (the cells'
#: parsing) without the Dask DataFrame readers.
_LAZY = {
    "class_map_from_counts": "._decide",
    "UnscannedCellError": "._encode",
    **dict.fromkeys(("IDS", "create_ids_array", "open_ids"), ".ids"),
    **dict.fromkeys(("DEFAULT_MAX_CATEGORIES", "TabularSource", "is_tabular_source", "resolve_tabular_source",
                     "with_columns"), ".resolve"),
}

__all__ = ["DEFAULT_MAX_CATEGORIES", "IDS", "TabularSource", "UnscannedCellError", "class_map_from_counts", "create_ids_array",
           "is_tabular_source", "open_ids", "resolve_tabular_source", "with_columns"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
