"""Benchmark and study scripts of dimbsvm, run from a checkout.

The quality harness itself is part of the package (:mod:`dimbsvm.bench`,
``dimbsvm bench SUITE.yaml``); the suites of ``benchmarks/RESULTS.md`` are
the YAML files here. The scripts measure what a suite does not: scaling
(``scale``, ``strong_scaling``, ``knn_scale``, ``hpc_scale``,
``member_cost``, ``similarity_throughput``), per-method studies
(``act_quality``, ``hpc_quality``, ``hpc_replicate``, ``structural_quality``,
``similarity_ucr``, ``stored_stage_recall``), and ``results``
(``python -m benchmarks.results DIR ...``), which regenerates
``benchmarks/RESULTS.md``. Machine and package records come from
:mod:`dimbsvm.environment`.
"""
