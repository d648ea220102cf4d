"""The code MLflow logs for a vocadapt model ("models from code"): it names the pyfunc class, nothing else."""

import mlflow.models

from vocadapt.platform.registry.mlflow_model import CausalLMPyfunc

mlflow.models.set_model(CausalLMPyfunc())
