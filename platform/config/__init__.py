"""The typed experiment config: one pydantic model per section, every field documented.

Filled from a YAML file in ``configs/`` plus dotted command-line overrides (``--set lapt.max_steps=5``). Validation
happens here, up front, so a malformed config fails before any work with a message that names the field and the fix.
This package imports nothing heavy. ``sections.py`` holds the sections, ``experiment.py`` the whole config and the
rules that span sections, ``loading.py`` the YAML reading and the dotted overrides; every name is imported from here.
"""

from __future__ import annotations

from vocadapt.platform.config.experiment import ExperimentConfig
from vocadapt.platform.config.loading import (  # noqa: F401  (re-exported: importers read every name from here)
    UniqueKeyLoader, apply_override, load_config, read_yaml_mapping, set_dotted,
)
from vocadapt.platform.config.sections import (  # noqa: F401  (re-exported)
    EMBEDDED_CORPUS, EMBEDDED_MODEL, CorpusSection, EvaluationSection, InitSection, LanguageCorpus, MergeSection,
    SourceSection, TargetSection, TokenizerSection, TrackingSection,
)
from vocadapt.platform.config_sections import ConfigError, LaptSection

__all__ = ["ConfigError", "ExperimentConfig", "LaptSection", "apply_override", "load_config", "set_dotted"]
