"""A saved dimbsvm model as an MLflow ``pyfunc`` model: raw rows in, class names (or scores) out.

MLflow stores the model directory (:func:`dimbsvm.artifacts.save_model`) as
the logged model's artifact, and :class:`DimbsvmPyfunc` loads it with
:func:`dimbsvm.load_model`: the manifest checked, only trusted types rebuilt,
nominal columns encoded over the training categories. So
``mlflow.pyfunc.load_model(uri).predict(frame)`` scores the rows a user has,
with the columns they trained on, and answers in class names, where the
estimator alone would need the encoded features and answer in label codes.
The parameter ``predict_method`` (in the signature's ``ParamSchema``, so
``mlflow models serve`` takes it in a request's ``params``) asks for
``decision_function`` values or ``predict_proba`` columns instead.
Imported only when MLflow is (the ``mlflow`` extra).
"""

from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pandas as pd

__all__ = ["MODEL_ARTIFACT", "MODEL_CODE", "PREDICT_METHODS", "DimbsvmPyfunc", "input_example", "signature"]

#: The name of the model directory among the logged model's artifacts.
MODEL_ARTIFACT = "dimbsvm_model"
#: The file MLflow runs to build the model when it loads it ("models from code": no pickle).
MODEL_CODE = Path(__file__).with_name("_mlflow_model_code.py")
#: What ``params={"predict_method": ...}`` may ask for; the first is the default.
PREDICT_METHODS = ("predict", "decision_function", "predict_proba")


class DimbsvmPyfunc(mlflow.pyfunc.PythonModel):
    """The ``python_model`` of a logged dimbsvm model.

    After loading, :meth:`unwrap` gives the :class:`~dimbsvm.predict.DimbsvmModel`
    (``decision_function``, ``predict_proba``, ``classes_``).
    """

    def load_context(self, context):
        from .model import load_model

        self.model = load_model(context.artifacts[MODEL_ARTIFACT])

    # the type hint tells MLflow the input is a DataFrame checked by the signature (and dimbsvm), not a schema
    # to infer from the hint; without one, MLflow warns on every logged model
    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None):
        """Score ``model_input`` (a pandas DataFrame with the training columns).

        ``params["predict_method"]`` chooses the answer: ``"predict"`` (the
        default) the class name of each row; ``"decision_function"`` the
        estimator's decision value of each row (positive values: the second
        class); ``"predict_proba"`` a DataFrame with one column of
        probabilities per class name (models trained with probabilities).
        """
        method = (params or {}).get("predict_method") or PREDICT_METHODS[0]
        if method not in PREDICT_METHODS:
            _refuse(f"predict_method must be one of {', '.join(PREDICT_METHODS)}; got {method!r}")
        if method == "decision_function":
            return np.asarray(self.model.decision_function(model_input), dtype=np.float64)
        if method == "predict_proba":
            if not self.model.has_probability:
                _refuse(f"predict_method 'predict_proba': this {type(self.model.estimator).__name__} gives no "
                        "probabilities (train it with probability=True); 'decision_function' gives its scores")
            return pd.DataFrame(self.model.predict_proba(model_input), columns=[str(c) for c in self.model.classes_])
        return [str(name) for name in self.model.predict(model_input)]

    def unwrap(self):
        """The loaded :class:`~dimbsvm.predict.DimbsvmModel`."""
        return self.model


def signature(model) -> "mlflow.models.ModelSignature":
    """The logged model's signature: the training columns in (by name, or by position for unnamed
    features) and the parameter ``predict_method``. Columns are typed ``Any``: dimbsvm checks and encodes
    each cell itself, and names the row and column of a bad one. No output schema: the answer's type is the
    one ``predict_method`` asks for."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, ParamSchema, ParamSpec, Schema

    if model.encoding is not None:
        inputs = [ColSpec(AnyType(), name) for name in model.encoding.input_columns]
    else:
        inputs = [ColSpec(AnyType()) for _ in range(int(model.meta["n_features"]))]
    params = ParamSchema([ParamSpec("predict_method", "string", PREDICT_METHODS[0])])
    return ModelSignature(inputs=Schema(inputs), params=params)


def input_example(model):
    """One row of the model's input, as its columns describe it (not a row of the training data, which
    stays out of the tracking server): a nominal column holds its first training category, a number
    column 0.0. Unnamed features are taken by position."""
    if model.encoding is None:
        return pd.DataFrame([np.zeros(int(model.meta["n_features"]))])
    return pd.DataFrame([{name: (0.0 if categories is None else categories[0])
                          for name, categories in model.encoding.columns}])


def _refuse(message: str):
    from mlflow.exceptions import INVALID_PARAMETER_VALUE, MlflowException

    raise MlflowException(message, error_code=INVALID_PARAMETER_VALUE)
