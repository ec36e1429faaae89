"""dimbsvm's Zarr stores: the layout (ingest, open, verify), row handles, and feature stages.

``layout`` writes stores, ``reading`` opens and verifies them, ``stages`` keeps the feature stages
below them (fingerprints and completion markers), ``rows`` holds the handle
tasks read rows through, and ``_zarr`` opens arrays so that a missing chunk
is an error rather than zeros.
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it. Imported when first used: ``dimbsvm.store.location``
#: (URL checks the CLI makes on every command) and jobs on in-memory data need neither Zarr nor Dask.
_LAZY = {
    **dict.fromkeys(("COMPRESSIONS", "create_checksummed_array", "open_array", "open_group", "writable"), "._zarr"),
    **dict.fromkeys(("content_fingerprint", "dataset_fingerprint", "fingerprint_file"), ".fingerprints"),
    **dict.fromkeys(("StoredData", "find_damage", "open_store", "verify_store"), ".reading"),
    "ingest": ".layout",
    **dict.fromkeys(("StoreLabels", "StoreRows"), ".rows"),
    **dict.fromkeys(("finish_stage", "open_finished_stage", "open_stage", "stage_is_complete"), ".stages"),
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
