"""dimbsvm's Zarr stores: the layout (ingest, open, verify), row handles, and feature stages.

``layout`` writes and opens stores, ``stages`` keeps the feature stages
below them (fingerprints and completion markers), ``rows`` holds the handle
tasks read rows through, and ``_zarr`` opens arrays so that a missing chunk
is an error rather than zeros.
"""

from ._zarr import COMPRESSIONS, create_checksummed_array, open_array, open_group, writable
from .fingerprints import content_fingerprint, dataset_fingerprint, fingerprint_file
from .layout import StoredData, find_damage, ingest, open_store, verify_store
from .rows import StoreLabels, StoreRows
from .stages import finish_stage, open_finished_stage, open_stage, stage_is_complete

__all__ = [
    "COMPRESSIONS", "StoreLabels", "StoreRows", "StoredData", "content_fingerprint", "create_checksummed_array",
    "dataset_fingerprint", "find_damage", "fingerprint_file", "finish_stage", "ingest", "open_array",
    "open_finished_stage", "open_group", "open_stage", "open_store", "stage_is_complete", "verify_store",
    "writable",
]
