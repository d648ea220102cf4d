"""What one ``vocadapt adapt`` run produces: each method's outcome, with the rule that ranks the methods, and the
run's result (the parent run, the fertility table, the source model's scores, every outcome and the best)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class MethodOutcome:
    method: str
    run_id: str
    model_dir: Path
    bits_per_byte: dict[str, float] = field(default_factory=dict)
    lapt: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    side_by_side: dict[str, float] = field(default_factory=dict)  # pipelines/side_by_side.py's metrics
    gate_items: dict[str, Any] = field(default_factory=dict)  # their per-item parts (the run's gates/items.json)

    def score(self) -> float:
        """Lower is better, on the text the default promotion gate reads: the out-of-domain target bits per byte
        where the side-by-side benchmark scored them, else the held-out ones. The held-out split comes from the
        training corpora and flatters a method fitted to their domain (a head fit on their hidden states), so it
        ranks methods only where no out-of-domain text was scored."""
        out_of_domain = self.out_of_domain_target_bpb()
        return out_of_domain if out_of_domain is not None else self.held_out_target_bpb()

    def out_of_domain_target_bpb(self) -> float | None:
        """Bits per byte on out-of-domain target text (``bpb_ood_target``, and ``bpb_ood_target_<code>`` for each
        further target language: their mean); None where the side-by-side benchmark scored none."""
        values = [value for key, value in self.side_by_side.items()
                  if (key == "bpb_ood_target" or key.startswith("bpb_ood_target_")) and math.isfinite(value)]
        return sum(values) / len(values) if values else None

    def held_out_target_bpb(self) -> float:
        """Held-out target bits per byte after LAPT when it ran, else zero-shot (with several target languages, the
        mean over their ``target*`` streams)."""
        stage = "after_lapt" if "target_after_lapt" in self.bits_per_byte else "zero_shot"
        values = [value for key, value in self.bits_per_byte.items()
                  if key.startswith("target") and key.endswith(f"_{stage}")]
        return sum(values) / len(values)


@dataclass
class AdaptResult:
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    output_dir: Path
    fertility: dict[str, dict[str, float]]
    source_bits_per_byte: dict[str, float]
    methods: list[MethodOutcome]
    best: MethodOutcome
    registered: tuple[str, int] | None
    source_side_by_side: dict[str, float] = field(default_factory=dict)  # source_model.* of the side-by-side run
    parent_metrics: dict[str, float] = field(default_factory=dict)  # what the parent run logged (gates read it)
    parent_gate_items: dict[str, Any] = field(default_factory=dict)  # the parent's gates/items.json
