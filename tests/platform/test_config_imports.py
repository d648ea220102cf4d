"""Reading a config imports no torch: `vocadapt config`, preflight and the dashboard parse configs, and the
components' packages load their torch modules only when one of their names is used."""

import subprocess
import sys

HEAVY = ("torch", "transformers", "ray", "mlflow", "deepspeed", "tokenizers", "sentencepiece")


def _modules_after(statement: str) -> set[str]:
    probe = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_config_package_imports_nothing_heavy():
    loaded = _modules_after("from vocadapt.platform.config import ExperimentConfig, LaptSection, load_config")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_lazy_packages_still_give_every_name():
    loaded = _modules_after(
        "from vocadapt.components.training import LaptSettings, DatasetSource\n"
        "from vocadapt.components.merging import MergeSettings, DEFAULT_RATES")
    assert "torch" not in loaded
    import vocadapt.components.merging as merging
    import vocadapt.components.training as training

    for package in (training, merging):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
    from vocadapt.components.training import loop

    assert training.train_lapt is loop.train_lapt
