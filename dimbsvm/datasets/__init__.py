"""Dataset readers, the synthetic generators and bundled example data.

Every reader returns a :class:`Dataset` with float64 features, integer labels
and the class map (binary data: the minority class is 1). :func:`load` picks
the reader from the file suffix.
"""

from ._base import Dataset
from .keel import read_keel
from .registry import bundled_names, list_available, load, load_keel, shared_datasets_dir
from .synthetic import make_imbalanced
from .agnostic import load_agnostic
from .tabular import load_csv, load_csv_features, load_npz, load_svmlight
from .text_like import make_text_like
from .timeseries import load_ts

__all__ = [
    "Dataset",
    "load_keel",
    "read_keel",
    "load_csv",
    "load_csv_features",
    "load_npz",
    "load_svmlight",
    "load_agnostic",
    "load_ts",
    "load",
    "make_imbalanced",
    "make_text_like",
    "bundled_names",
    "shared_datasets_dir",
    "list_available",
]
