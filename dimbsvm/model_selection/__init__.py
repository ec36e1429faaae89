"""The one fold engine: splits, the plain task bodies of a fold, the plans of every fold, kNN graph builds.

- :func:`repeat_splits`, :func:`fold_indices`, :class:`StratifiedBlockKFold`, :func:`minority_class` - the splits
  (the same for any chunking of the rows) and the positive-class rule;
- :func:`run_folds` / :class:`FoldSetup` / :class:`FoldSpec` - fit and score folds (and final models) as one
  plan of tasks;
- :func:`knn_graph` - a dataset's kNN graph, in memory or built as tasks into a store;
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: a job imports the scoring and the fold
#: engine, not the kNN graph builds (Dask).
_LAZY = {
    **dict.fromkeys(("FoldSetup", "FoldSpec", "PartStore", "run_folds"), ".folds"),
    "knn_graph": ".graph_build",
    **dict.fromkeys(("METRICS", "summarize"), ".scoring"),
    **dict.fromkeys(("StratifiedBlockKFold", "fold_indices", "minority_class", "repeat_seeds", "repeat_splits"),
                   ".splits"),
}

__all__ = ["METRICS", "FoldSetup", "FoldSpec", "PartStore", "StratifiedBlockKFold", "fold_indices", "knn_graph",
           "minority_class", "repeat_seeds", "repeat_splits", "run_folds", "summarize"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
