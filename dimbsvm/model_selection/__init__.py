"""The one fold engine: splits, the plain task bodies of a fold, the plans of every fold, kNN graph builds.

- :func:`repeat_splits`, :func:`fold_indices`, :func:`minority_class` - the splits and the positive-class rule;
- :func:`run_folds` / :class:`FoldSetup` / :class:`FoldSpec` - fit and score folds (and final models) as one
  plan of tasks;
- :func:`knn_graph` - a dataset's kNN graph, in memory or built as tasks into a store;
"""

from .folds import FoldSetup, FoldSpec, PartStore, run_folds
from .graph_build import knn_graph
from .scoring import METRICS, summarize
from .splits import fold_indices, minority_class, repeat_seeds, repeat_splits

__all__ = ["METRICS", "FoldSetup", "FoldSpec", "PartStore", "fold_indices", "knn_graph", "minority_class",
           "repeat_seeds", "repeat_splits", "run_folds", "summarize"]
