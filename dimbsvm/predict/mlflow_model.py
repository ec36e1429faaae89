"""A saved dimbsvm model as an MLflow ``pyfunc`` model: raw rows in, class names out.

MLflow stores the model directory (:func:`dimbsvm.artifacts.save_model`) as
the logged model's artifact, and :class:`DimbsvmPyfunc` loads it with
:func:`dimbsvm.load_model`: the manifest checked, only trusted types rebuilt,
nominal columns encoded over the training categories. So
``mlflow.pyfunc.load_model(uri).predict(frame)`` scores the rows a user has,
with the columns they trained on, and answers in class names, where the
estimator alone would need the encoded features and answer in label codes.
Imported only when MLflow is (the ``mlflow`` extra).
"""

from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc

__all__ = ["MODEL_ARTIFACT", "MODEL_CODE", "DimbsvmPyfunc", "signature"]

#: The name of the model directory among the logged model's artifacts.
MODEL_ARTIFACT = "dimbsvm_model"
#: The file MLflow runs to build the model when it loads it ("models from code": no pickle).
MODEL_CODE = Path(__file__).with_name("_mlflow_model_code.py")


class DimbsvmPyfunc(mlflow.pyfunc.PythonModel):
    """The ``python_model`` of a logged dimbsvm model.

    After loading, :meth:`unwrap` gives the :class:`~dimbsvm.predict.DimbsvmModel`
    (``decision_function``, ``predict_proba``, ``classes_``).
    """

    def load_context(self, context):
        from .model import load_model

        self.model = load_model(context.artifacts[MODEL_ARTIFACT])

    def predict(self, context, model_input, params=None):
        """The class name of each row of ``model_input`` (a pandas DataFrame with the training columns)."""
        return [str(name) for name in self.model.predict(model_input)]

    def unwrap(self):
        """The loaded :class:`~dimbsvm.predict.DimbsvmModel`."""
        return self.model


def signature(model) -> "mlflow.models.ModelSignature":
    """The logged model's signature: the training columns in (by name, or by position for unnamed
    features), a class name out. Columns are typed ``Any``: dimbsvm checks and encodes each cell itself,
    and names the row and column of a bad one."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, Schema

    if model.encoding is not None:
        inputs = [ColSpec(AnyType(), name) for name in model.encoding.input_columns]
    else:
        inputs = [ColSpec(AnyType()) for _ in range(int(model.meta["n_features"]))]
    return ModelSignature(inputs=Schema(inputs), outputs=Schema([ColSpec("string")]))
