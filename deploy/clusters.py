"""Cluster factories for ``dimbsvm run|retrain|schedule|predict|ingest --cluster clusters:NAME``.

dimbsvm imports this module (put ``deploy/`` on ``PYTHONPATH``, or copy the
file next to your jobs: the working directory is searched first), calls the
function with no argument and runs on the cluster it returns, closing it when
the work ends. Every cluster here starts with no worker and scales with the
work dimbsvm submits (scale from zero): the workers' software is checked as
each joins, and a run ends with one line if no worker has joined within
``--worker-timeout`` seconds of the work being submitted.

    PYTHONPATH=deploy dimbsvm run jobs/quickstart.yaml --cluster clusters:local_adaptive

Settings come from environment variables, so one file serves every site;
each factory's docstring lists its own. Workers are single-threaded
processes (SVM fits hold the GIL) and must run the same dimbsvm, Python,
scikit-learn, NumPy and Dask as the submitting process: use one image or one
environment on a shared filesystem. Each manager is an optional extra:
``pip install "dimbsvm[jobqueue]"`` (SLURM, PBS, LSF, SGE), ``[kubernetes]``
(the Dask Kubernetes operator), ``[gateway]`` (dask-gateway), ``[coiled]``.

:func:`local_adaptive` and :func:`gateway` (against a real dask-gateway server
with its local backend) run in dimbsvm's test suite; the others follow their
managers' documented APIs and are not run there (no SLURM, Kubernetes or
Coiled on the test machine).
"""

from __future__ import annotations

import os

#: The malloc settings of dimbsvm's embedded workers (see dimbsvm.distributed.worker_memory), for nannies.
NANNY_PRELOAD = ["dimbsvm.distributed.worker_memory"]


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"DIMBSVM_CLUSTER_{name}", default)


def _most_workers() -> int:
    return int(_setting("MAX_WORKERS", "8"))


def local_adaptive():
    """Single-threaded worker processes on this machine, from 0 up to ``DIMBSVM_CLUSTER_MAX_WORKERS``
    (default 8) as the work asks.
    """
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=True, dashboard_address=":0",
                           preload_nanny=NANNY_PRELOAD)
    cluster.adapt(minimum=0, maximum=_most_workers())
    return cluster


def slurm():
    """SLURM jobs of ``DIMBSVM_CLUSTER_CORES`` single-threaded workers each (dask-jobqueue).

    ``DIMBSVM_CLUSTER_QUEUE``, ``_ACCOUNT``, ``_CORES`` (16), ``_MEMORY``
    (64GB a job), ``_WALLTIME`` (08:00:00), ``_MAX_WORKERS`` (8).
    PBSCluster, LSFCluster and SGECluster take the same arguments.
    """
    from dask_jobqueue import SLURMCluster

    cores = int(_setting("CORES", "16"))
    cluster = SLURMCluster(queue=_setting("QUEUE", "") or None, account=_setting("ACCOUNT", "") or None,
                           cores=cores, processes=cores, memory=_setting("MEMORY", "64GB"),
                           walltime=_setting("WALLTIME", "08:00:00"),
                           worker_extra_args=["--preload-nanny", *NANNY_PRELOAD])
    cluster.adapt(minimum=0, maximum=_most_workers())
    return cluster


def kubernetes():
    """A DaskCluster of the Dask Kubernetes operator, scaled by its autoscaler from 0.

    ``DIMBSVM_CLUSTER_IMAGE`` (an image with this dimbsvm, e.g. built from
    deploy/docker/Dockerfile), ``_NAMESPACE`` (default), ``_MAX_WORKERS`` (8).
    """
    from dask_kubernetes.operator import KubeCluster, make_cluster_spec

    spec = make_cluster_spec(name="dimbsvm", image=_setting("IMAGE", "dimbsvm:latest"), n_workers=0,
                             worker_command=["dask", "worker", "--nthreads", "1", "--nanny",
                                             "--preload-nanny", *NANNY_PRELOAD])
    cluster = KubeCluster(custom_cluster_spec=spec, namespace=_setting("NAMESPACE", "default"))
    cluster.adapt(minimum=0, maximum=_most_workers())
    return cluster


def gateway():
    """A cluster from a dask-gateway server at ``DIMBSVM_CLUSTER_GATEWAY`` (its options as the server allows;
    authentication as dask-gateway's configuration says). The server's backend decides the workers' environment:
    its local backend passes none of the submitting shell's, so BLAS settings such as ``OPENBLAS_CORETYPE``
    belong in the server's ``c.ClusterConfig.environment`` if results are to equal this machine's to the bit."""
    from dask_gateway import GatewayCluster

    cluster = GatewayCluster(address=_setting("GATEWAY", "http://127.0.0.1:8000"))  # (it owns its connection)
    cluster.adapt(minimum=0, maximum=_most_workers())
    return cluster


def coiled():
    """A Coiled cluster of ``DIMBSVM_CLUSTER_MAX_WORKERS`` at most, software from this environment."""
    import coiled as coiled_api

    return coiled_api.Cluster(n_workers=[0, _most_workers()], worker_options={"nthreads": 1})
