"""The code MLflow runs to rebuild a logged dimbsvm model (MLflow's "models from code": nothing is pickled).

Not imported by dimbsvm; :mod:`dimbsvm.jobs.tracking` hands MLflow this file's path.
"""

import mlflow.models

from dimbsvm.predict.mlflow_model import DimbsvmPyfunc

mlflow.models.set_model(DimbsvmPyfunc())
