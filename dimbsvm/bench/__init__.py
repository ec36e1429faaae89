"""The benchmark harness: quality suites of dimbsvm's methods against their peers (``dimbsvm bench``).

Modules
-------
quality
    ``dimbsvm bench SUITE.yaml``: every (dataset, method, repeat, fold) as
    fold-engine tasks on a Dask cluster, then the results directory.
suite
    The suite YAML schema and its validation.
peers
    The peer estimators (scikit-learn, imbalanced-learn), all on one base SVM.
stats, plots, report
    Aggregate tables and tests, figures, and the files of a results directory.

The peers, statistics and plots need the ``bench`` extra
(``pip install "dimbsvm[bench]"``); importing this package does not.
"""
