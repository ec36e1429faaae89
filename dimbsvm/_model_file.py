"""Whether this thread is writing a model file: what an object's state may leave out there.

A model file (skops) holds only types dimbsvm trusts, written attribute by
attribute. An object whose pickled state carries a built search structure
(pynndescent's ``NNDescent``, which pickles but which skops cannot write)
leaves it out while :func:`writing_model_file` is active and builds it again
when loaded; a pickle (a Dask transfer between workers) keeps it, so that no
worker builds it twice.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["is_writing_model_file", "writing_model_file"]

_state = threading.local()


@contextlib.contextmanager
def writing_model_file():
    """Mark this thread as writing a model file for the duration of the block."""
    previous = getattr(_state, "active", False)
    _state.active = True
    try:
        yield
    finally:
        _state.active = previous


def is_writing_model_file() -> bool:
    """Whether :func:`writing_model_file` is active in this thread."""
    return getattr(_state, "active", False)
