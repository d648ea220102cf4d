"""A registered vocadapt model as an MLflow 3 model: a ``pyfunc`` that carries the safetensors checkpoint as its one
artifact and greedy-generates with vocadapt's one loader.

The model is logged "from code" (``pyfunc_entry.py``, MLflow's recommended form): the MLflow model folder holds that
file, ``MLmodel``, the requirements and ``artifacts/checkpoint/`` (config, safetensors weights, tokenizer, the sha256
manifest); no pickle. ``mlflow.transformers`` is not used: mlflow 3.17.2 cannot log a checkpoint folder under
transformers 5 (``'str' object has no attribute '__name__'``), and the pyfunc needs no flavor of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc

CHECKPOINT = "checkpoint"  # the artifact key, and the folder under the MLflow model's ``artifacts/``
ENTRY = Path(__file__).with_name("pyfunc_entry.py")
DEFAULT_MAX_NEW_TOKENS = 32
# What the pyfunc imports when it loads; pinned to this environment's versions (``--env-manager local`` uses this
# environment as it is; vocadapt itself must be installed where the model is loaded).
REQUIREMENTS = ("mlflow", "torch", "transformers", "tokenizers", "safetensors")


class CausalLMPyfunc(mlflow.pyfunc.PythonModel):
    """``predict(["La capitale d'Italia è"])`` -> the greedy continuation of each prompt (new text only).

    ``params={"max_new_tokens": N}`` sets the length (default 32).
    """

    def load_context(self, context) -> None:
        from vocadapt.platform.model_loading import load_model

        self.model, self.tokenizer = load_model(Path(context.artifacts[CHECKPOINT]), what="registered checkpoint")

    def predict(self, context, model_input, params=None):  # no type hints: they would replace the signature's params
        import torch

        max_new_tokens = int((params or {}).get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        outputs = []
        for prompt in prompts(model_input):
            ids = self.tokenizer(str(prompt), return_tensors="pt")
            with torch.no_grad():
                generated = self.model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False,
                                                pad_token_id=pad)
            outputs.append(self.tokenizer.decode(generated[0, ids["input_ids"].shape[1]:], skip_special_tokens=True))
        return outputs


def prompts(model_input) -> list[str]:
    """The prompts in what ``predict`` receives: a list or array of strings, one string, or (after MLflow's schema
    enforcement, and from ``/invocations``) a one-column DataFrame."""
    if isinstance(model_input, str):
        return [model_input]
    if hasattr(model_input, "iloc"):  # pandas DataFrame or Series
        column = model_input.iloc[:, 0] if getattr(model_input, "ndim", 1) == 2 else model_input
        return [str(value) for value in column.tolist()]
    return [str(value) for value in model_input]


def pip_requirements() -> list[str]:
    from importlib.metadata import version

    return [f"{package}=={version(package)}" for package in REQUIREMENTS]


def signature():
    """Prompts in, continuations out; ``max_new_tokens`` as a parameter (``params=`` in ``predict``, and in the
    ``/invocations`` body of ``mlflow models serve``)."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema

    return ModelSignature(inputs=Schema([ColSpec(DataType.string)]), outputs=Schema([ColSpec(DataType.string)]),
                          params=ParamSchema([ParamSpec("max_new_tokens", DataType.long, DEFAULT_MAX_NEW_TOKENS)]))


def log_checkpoint_model(tracking_uri: str, run_id: str, checkpoint: Path, *, tags: dict[str, str],
                         metrics: dict[str, dict[str, float]], dataset=None):
    """Log ``checkpoint`` as an MLflow 3 LoggedModel of ``run_id`` (in the run's experiment); returns the
    LoggedModel. Its metrics (``metrics``: run id -> the metrics that run logged, linked to ``dataset`` when given)
    are logged again on their own run with the model's id, so ``mlflow.search_logged_models`` and the UI show them
    on the model and no run gains another's metrics; the dataset is also logged as an input of the run linked to
    the model."""
    import time
    import warnings

    import mlflow
    from mlflow.entities import DatasetInput, InputTag, LoggedModelInput, Metric
    from mlflow.models import Model
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(tracking_uri):
        client = mlflow.MlflowClient(tracking_uri)
        experiment_id = client.get_run(run_id).info.experiment_id
        logged = client.create_logged_model(experiment_id, name="model", source_run_id=run_id, tags=tags,
                                            model_type="vocadapt-causal-lm")
        with warnings.catch_warnings():  # an input example would load the checkpoint (7B: minutes) only to log it
            warnings.filterwarnings("ignore", message=".*input example was not provided.*")
            warnings.filterwarnings("ignore", message=".*Add type hints to the `predict` method.*")  # see predict
            Model.log(artifact_path=None, name="model", flavor=mlflow.pyfunc, run_id=run_id, model_id=logged.model_id,
                      python_model=str(ENTRY), artifacts={CHECKPOINT: str(checkpoint)}, signature=signature(),
                      pip_requirements=pip_requirements())
        now = int(time.time() * 1000)
        entity = dataset._to_mlflow_entity() if dataset is not None else None
        for source_run, values in metrics.items():
            client.log_batch(source_run, metrics=[
                Metric(key, float(value), now, 0, model_id=logged.model_id,
                       dataset_name=entity.name if entity else None, dataset_digest=entity.digest if entity else None)
                for key, value in sorted(values.items())])
        if entity is not None:
            client.log_inputs(run_id, datasets=[DatasetInput(entity, [InputTag("mlflow.data.context", "training")])],
                              models=[LoggedModelInput(logged.model_id)])
        return client.get_logged_model(logged.model_id)


def checkpoint_dir(local: Path) -> Path:
    """The checkpoint folder inside a downloaded MLflow model (``MLmodel``'s ``python_function.artifacts``), or
    ``local`` itself for a version registered before versions were MLflow models (a plain checkpoint folder)."""
    import yaml

    local = Path(local)
    if not (local / "MLmodel").is_file():
        return local
    flavor = yaml.safe_load((local / "MLmodel").read_text(encoding="utf-8"))["flavors"].get("python_function", {})
    path = (flavor.get("artifacts") or {}).get(CHECKPOINT, {}).get("path")
    return local / path if path else local


def download_model(source: str, destination: Path, tracking_uri: str) -> Path:
    """Download a registered version's source (``models:/<model_id>`` for a LoggedModel) from ``tracking_uri``.

    mlflow 3.17.2's ``download_artifacts`` resolves ``models:/<model_id>`` against the process-wide tracking URI, not
    its ``tracking_uri`` argument ("Logged model with ID ... not found" when the two differ), so it is set for the
    call.
    """
    import mlflow
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(tracking_uri):
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=str(destination),
                                                        tracking_uri=tracking_uri))
