"""The typed experiment config: one pydantic model per section, every field documented.

Filled from a YAML file in ``configs/`` plus dotted command-line overrides (``--set lapt.max_steps=5``). Validation
happens here, up front, so a malformed config fails before any work with a message that names the field and the fix.
This package imports nothing heavy (no torch: ``tests/platform/test_config_imports.py``). ``lapt_sections.py`` holds
the shared base class, ``ConfigError`` and the sections the training side owns (``lapt``, ``lapt.deepspeed``),
``sections.py`` the other sections, ``experiment.py`` the whole config and the rules that span sections,
``loading.py`` the YAML reading and the dotted overrides; every name is imported from here.
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
from vocadapt.platform.config.lapt_sections import ConfigError, LaptSection

__all__ = ["ConfigError", "ExperimentConfig", "LaptSection", "apply_override", "load_config", "set_dotted"]
