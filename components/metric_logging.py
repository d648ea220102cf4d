"""The seam between computation and tracking: components report metrics through a ``MetricLogger``.

The MLflow implementation lives in ``vocadapt.platform.tracking`` and imports mlflow only there; tests and
benchmarks use the in-memory one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class MetricLogger(Protocol):
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...


@dataclass
class InMemoryLogger:
    """Keeps every (step, metrics) record; what tests and benchmarks read."""

    records: list[tuple[int | None, dict[str, float]]] = field(default_factory=list)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.records.append((step, dict(metrics)))

    def series(self, name: str) -> list[tuple[int | None, float]]:
        return [(step, metrics[name]) for step, metrics in self.records if name in metrics]


class NullLogger:
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        pass
