"""What the fold engine and an estimator planning its own fit tasks both handle: a fold's rows, its stored
chunks, its prepared steps, and the context the engine hands the estimator.

- :mod:`~dimbsvm.fold_data.spans` - the stored chunks a fold's rows fall in, and one chunk's rows of a fold;
- :mod:`~dimbsvm.fold_data.prepared` - a fold's rows and fitted preprocessing, and the data as its estimator sees it;
- :mod:`~dimbsvm.fold_data.context` - :class:`FoldContext` and :class:`FoldFit`, the hook's input and output.

Plain values and helpers, no Dask and no I/O: task bodies on both sides read them.
"""
