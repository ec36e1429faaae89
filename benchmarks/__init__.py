"""Benchmarks of dimbsvm against the peers a user would otherwise pick.

Modules
-------
quality
    ``python -m benchmarks.quality SUITE.yaml``: every (dataset, method,
    repeat, fold) as a task on a Dask cluster, then the results directory.
suite
    The suite YAML schema and its validation.
peers
    The peer estimators (scikit-learn, imbalanced-learn), all on one base SVM.
stats, plots, report
    Aggregate tables and tests, figures, and the files of a results directory.
environment
    The machine and package versions a result was measured with.
results
    ``python -m benchmarks.results DIR ...``: regenerates ``benchmarks/RESULTS.md``.
"""
