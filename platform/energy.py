"""Energy and CO2 per stage with codecarbon, offline: the grid's carbon intensity comes from the configured
country, nothing is looked up on the network and no ``emissions.csv`` is written.

``measure_energy(stage, country_iso_code=...)`` is a context manager yielding an :class:`EnergyReading` that is
filled when the block ends; :class:`EnergyLedger` sums readings per stage so the parent run can show the totals.
Metric names: ``energy.<stage>.kwh`` and ``emissions.<stage>.kg_co2eq``; ``energy.total.kwh`` and
``emissions.total.kg_co2eq`` are the sums over stages.

What is measured (codecarbon picks the best source the machine offers, named in ``EnergyReading.mode``): the CPU
through RAPL counters where the kernel exposes them, else an estimate from the CPU model's TDP and the measured
load; RAM from an estimate per installed gigabyte; NVIDIA GPUs through NVML's energy counter, for the GPUs in
``CUDA_VISIBLE_DEVICES`` (all of them when unset). Nothing here disables NVML; codecarbon looks for GPUs only when
``nvidia-smi`` runs (the binary must be on PATH, as it is in CUDA images).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from vocadapt.components.errors import UserError

# Seconds between codecarbon's energy readings. A reading also happens at stop, so a stage shorter than this costs
# one reading at each end. Longer is cheaper, but RAPL's package counter wraps at about 262 kJ (2^32 units of
# 61 uJ): after 22 minutes at 200 W, 4 minutes at 1 kW; one reading a minute sees at most one wrap, which codecarbon
# corrects. Its separate 1-second power sampler only reads psutil's load counters (0.1% of a core, BENCHMARKS.md).
MEASURE_SECONDS = 60.0
ENERGY_PREFIX, EMISSIONS_PREFIX = "energy.", "emissions."


@dataclass
class EnergyReading:
    """One stage's measurement; the numbers are filled when the ``measure_energy`` block ends."""

    stage: str
    country_iso_code: str
    kwh: float = 0.0
    kg_co2eq: float = 0.0
    seconds: float = 0.0
    mode: str = ""  # e.g. "cpu: RAPL; ram: estimate; gpu: NVML (1 x NVIDIA H100)"
    parts_kwh: dict[str, float] = field(default_factory=dict)  # cpu, ram, gpu

    def metrics(self) -> dict[str, float]:
        return {f"{ENERGY_PREFIX}{self.stage}.kwh": self.kwh, f"{EMISSIONS_PREFIX}{self.stage}.kg_co2eq": self.kg_co2eq}

    def add(self, other: EnergyReading) -> None:
        """Fold another reading of the same stage into this one (several workers, several methods)."""
        self.kwh += other.kwh
        self.kg_co2eq += other.kg_co2eq
        self.seconds = max(self.seconds, other.seconds)  # the longest reading: workers measure side by side
        for part, value in other.parts_kwh.items():
            self.parts_kwh[part] = self.parts_kwh.get(part, 0.0) + value
        modes = [m for m in dict.fromkeys([*self.mode.split(" | "), *other.mode.split(" | ")]) if m]
        self.mode = " | ".join(modes)

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "country_iso_code": self.country_iso_code, "kwh": self.kwh,
                "kg_co2eq": self.kg_co2eq, "seconds": self.seconds, "mode": self.mode, "parts_kwh": self.parts_kwh}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnergyReading:
        return cls(**{key: data[key] for key in ("stage", "country_iso_code", "kwh", "kg_co2eq", "seconds", "mode")},
                   parts_kwh=dict(data.get("parts_kwh", {})))


class MetricSink(Protocol):
    """Where a reading goes: ``platform.tracking.Tracker`` fits."""

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int | None = None) -> None: ...

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None: ...


def check_country(country_iso_code: str) -> str:
    """The code if codecarbon's energy-mix table knows it; otherwise a ``UserError`` naming the field and the fix
    (codecarbon itself would fall back to the world average without saying so)."""
    from codecarbon.input import DataSource

    known = DataSource().get_global_energy_mix_data()
    if country_iso_code not in known:
        raise UserError(f"tracking.country_iso_code (vocadapt evaluate: --country): {country_iso_code!r} is not in "
                        "codecarbon's energy-mix table; use an ISO 3166-1 alpha-3 code such as ITA, FRA, DEU or USA")
    return country_iso_code


class StageMeter:
    """Start and stop one stage's measurement where a ``with`` block does not fit (a Ray worker)."""

    def __init__(self, stage: str, *, country_iso_code: str, tracking_mode: str = "machine",
                 enabled: bool = True) -> None:
        self.reading = EnergyReading(stage, country_iso_code)
        self._tracking_mode, self._enabled = tracking_mode, enabled
        self._tracker, self._started = None, 0.0

    def start(self) -> EnergyReading:
        if self._enabled:
            self._tracker = _start_tracker(self.reading.country_iso_code, self._tracking_mode)
            self._started = time.perf_counter()
        return self.reading

    def stop(self) -> EnergyReading:
        """Fill the reading; a second call changes nothing."""
        if self._tracker is not None:
            tracker, self._tracker = self._tracker, None
            self.reading.seconds = time.perf_counter() - self._started
            _stop_into(tracker, self.reading)
        return self.reading

    def so_far(self) -> EnergyReading:
        """A reading from the start up to now, the meter still running (empty when it does not measure)."""
        reading = EnergyReading(self.reading.stage, self.reading.country_iso_code)
        if self._tracker is not None:
            reading.seconds = time.perf_counter() - self._started
            self._tracker.flush()  # measures up to now; with no outputs configured it writes nothing
            _fill(reading, self._tracker._prepare_emissions_data(), self._tracker)
        return reading


@contextmanager
def measure_energy(
    stage: str, *, country_iso_code: str, tracking_mode: str = "machine", enabled: bool = True,
) -> Iterator[EnergyReading]:
    """Measure the energy and CO2 of the block as stage ``stage``.

    tracking_mode: ``machine`` counts the whole machine (every process, every visible GPU), ``process`` only this
    process's share of CPU load and memory (RAPL and GPUs are read whole either way). The reading stays at zero
    with an empty ``mode`` when ``enabled`` is false or codecarbon could not measure."""
    meter = StageMeter(stage, country_iso_code=country_iso_code, tracking_mode=tracking_mode, enabled=enabled)
    try:
        yield meter.start()
    finally:
        meter.stop()


def sum_over_workers(reading: EnergyReading, device: Any = None) -> EnergyReading:
    """The readings of every worker of a ``torch.distributed`` group, summed; a collective, so every worker calls
    it. Workers that did not measure add zero; ``mode`` is rank 0's with the number of workers that measured."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return reading
    parts = ("cpu", "ram", "gpu")
    values = torch.tensor([reading.kwh, reading.kg_co2eq, *(reading.parts_kwh.get(p, 0.0) for p in parts),
                           1.0 if reading.mode else 0.0], dtype=torch.float64, device=device)
    dist.all_reduce(values)
    kwh, kg_co2eq, *part_values, measured = values.tolist()
    summed = EnergyReading(reading.stage, reading.country_iso_code, kwh, kg_co2eq, reading.seconds,
                           parts_kwh=dict(zip(parts, part_values)))
    if measured:
        summed.mode = f"{reading.mode or 'not measured on rank 0'}; meters summed: {int(measured)}"
    return summed


def _start_tracker(country_iso_code: str, tracking_mode: str):
    from codecarbon import OfflineEmissionsTracker

    # after the import, which sets its logger to INFO; the tracker logs before it reads log_level
    logging.getLogger("codecarbon").setLevel(logging.ERROR)

    # Explicit None or [] for everything that could send data or write files: codecarbon otherwise reads these
    # from ~/.codecarbon.config, ./.codecarbon.config and CODECARBON_* variables.
    tracker = OfflineEmissionsTracker(
        country_iso_code=country_iso_code, tracking_mode=tracking_mode, measure_power_secs=MEASURE_SECONDS,
        output_methods=[], emissions_endpoint=None, electricitymaps_api_token=None,
        force_carbon_intensity_g_co2e_kwh=None, output_dir=tempfile.gettempdir(), allow_multiple_runs=True,
        log_level="error", project_name="vocadapt",
    )
    tracker.start()
    return tracker


def _stop_into(tracker, reading: EnergyReading) -> None:
    emissions = tracker.stop()
    data = getattr(tracker, "final_emissions_data", None)
    if emissions is None or data is None:  # codecarbon swallows its own errors; log nothing rather than zeros
        logging.getLogger(__name__).warning("codecarbon could not measure stage %s", reading.stage)
        return
    _fill(reading, data, tracker)


def _fill(reading: EnergyReading, data, tracker) -> None:
    """Copy codecarbon's ``EmissionsData`` into ``reading``."""
    reading.kwh = float(data.energy_consumed)
    reading.kg_co2eq = float(data.emissions)
    reading.parts_kwh = {"cpu": float(data.cpu_energy), "ram": float(data.ram_energy), "gpu": float(data.gpu_energy)}
    reading.mode = measurement_mode(tracker)


def measurement_mode(tracker) -> str:
    """How codecarbon measured, read from the hardware it set up: RAPL or a TDP estimate for the CPU, NVML for
    NVIDIA GPUs."""
    cpu_modes = {"intel_rapl": "RAPL", "cpu_load": "TDP estimate from load", "constant": "TDP constant",
                 "intel_power_gadget": "Power Gadget", "windows_emi": "Windows EMI (RAPL)",
                 "apple_powermetrics": "powermetrics"}
    parts = []
    for hardware in getattr(tracker, "_hardware", []):
        kind = type(hardware).__name__
        if kind == "CPU":
            parts.append(f"cpu: {cpu_modes.get(getattr(hardware, '_mode', ''), getattr(hardware, '_mode', '?'))}")
        elif kind == "GPU":
            devices = {type(device).__name__ for device in getattr(getattr(hardware, "devices", None), "devices", [])}
            source = "AMD SMI" if devices == {"AMDGPUDevice"} else "NVML"
            parts.append(f"gpu: {source} ({tracker._conf.get('gpu_model') or 'GPU'})")
        elif kind == "RAM":
            parts.append("ram: estimate")
        else:
            parts.append(kind.lower())
    if not any(part.startswith("gpu") for part in parts):
        parts.append("gpu: none")
    return "; ".join(parts)


@dataclass
class EnergyLedger:
    """Readings summed per stage over a whole pipeline run (its own stages and its child runs')."""

    country_iso_code: str
    stages: dict[str, EnergyReading] = field(default_factory=dict)

    def add(self, reading: EnergyReading) -> None:
        if not reading.mode:  # not measured
            return
        if reading.stage not in self.stages:
            self.stages[reading.stage] = EnergyReading(reading.stage, reading.country_iso_code)
        self.stages[reading.stage].add(reading)

    def metrics(self) -> dict[str, float]:
        """Per-stage sums plus ``energy.total.kwh`` and ``emissions.total.kg_co2eq``, the sums over stages."""
        metrics: dict[str, float] = {}
        for reading in self.stages.values():
            metrics |= reading.metrics()
        metrics[f"{ENERGY_PREFIX}total.kwh"] = sum(r.kwh for r in self.stages.values())
        metrics[f"{EMISSIONS_PREFIX}total.kg_co2eq"] = sum(r.kg_co2eq for r in self.stages.values())
        return metrics

    def modes(self) -> str:
        return " | ".join(dict.fromkeys(r.mode for r in self.stages.values() if r.mode))


def log_energy(sink: MetricSink, run_id: str, ledger: EnergyLedger) -> None:
    """Log the ledger's per-stage sums and totals on ``run_id``, with how they were measured and the country as
    tags (``vocadapt.energy_mode``, ``vocadapt.energy_country``). An empty ledger logs nothing."""
    if not ledger.stages:
        return
    sink.log_metrics(run_id, ledger.metrics())
    sink.set_tags(run_id, {"vocadapt.energy_mode": ledger.modes(), "vocadapt.energy_country": ledger.country_iso_code})
