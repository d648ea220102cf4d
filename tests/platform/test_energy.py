"""Energy and CO2 with codecarbon, offline: a busy loop costs energy, the country sets the CO2, nothing is written
where the user works, and the readings of several workers add up with each node counted once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vocadapt.components.errors import UserError
from vocadapt.platform.energy import EnergyLedger, EnergyReading, check_country, measure_energy

pytestmark = pytest.mark.timeout(300)


def _busy(seconds: float) -> int:
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        count += 1
    return count


def _intensity(country: str) -> float:
    """g CO2eq per kWh of the country's grid in codecarbon's offline table."""
    from codecarbon.input import DataSource

    return DataSource().get_global_energy_mix_data()[country]["carbon_intensity"]


def test_busy_loop_costs_energy_and_the_country_sets_the_co2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readings = {}
    for country in ("ITA", "FRA"):
        with measure_energy("busy", country_iso_code=country) as reading:
            _busy(1.0)
        readings[country] = reading
    for country, reading in readings.items():
        assert reading.kwh > 0 and reading.kg_co2eq > 0, reading
        assert reading.seconds >= 1.0 and reading.mode.startswith(("cpu:", "ram:")), reading
        assert reading.kwh == pytest.approx(sum(reading.parts_kwh.values()))
        # the CO2 is the energy times the configured country's grid, not a guessed location's
        assert reading.kg_co2eq * 1000 / reading.kwh == pytest.approx(_intensity(country), rel=1e-6)
        assert reading.metrics() == {"energy.busy.kwh": reading.kwh, "emissions.busy.kg_co2eq": reading.kg_co2eq}
    assert readings["ITA"].kg_co2eq / readings["ITA"].kwh > 3 * readings["FRA"].kg_co2eq / readings["FRA"].kwh
    assert not list(tmp_path.iterdir()), "codecarbon wrote into the working folder"


def test_a_running_meter_reads_so_far_and_keeps_counting():
    from vocadapt.platform.energy import StageMeter

    meter = StageMeter("busy", country_iso_code="ITA")
    meter.start()
    _busy(0.5)
    early = meter.so_far()
    _busy(0.5)
    final = meter.stop()
    assert 0 < early.kwh < final.kwh and early.mode == final.mode
    assert meter.stop() is final and StageMeter("busy", country_iso_code="ITA", enabled=False).so_far().kwh == 0


def test_disabled_measures_nothing_and_logs_nothing():
    class Sink:
        def __init__(self):
            self.calls = []

        def log_metrics(self, run_id, metrics, step=None):
            self.calls.append(metrics)

        def set_tags(self, run_id, tags):
            self.calls.append(tags)

    from vocadapt.platform.energy import log_energy

    with measure_energy("busy", country_iso_code="ITA", enabled=False) as reading:
        _busy(0.2)
    assert reading.kwh == 0 and reading.mode == ""
    ledger = EnergyLedger("ITA")
    ledger.add(reading)
    sink = Sink()
    log_energy(sink, "run", ledger)
    assert not ledger.stages and sink.calls == []


def test_ledger_total_is_the_sum_of_its_stages():
    ledger = EnergyLedger("ITA")
    for stage, kwh in (("tokenizer", 0.5), ("init", 0.25), ("init", 0.125), ("lapt", 2.0)):
        ledger.add(EnergyReading(stage, "ITA", kwh, kwh * 0.3, mode="cpu: RAPL"))
    metrics = ledger.metrics()
    assert metrics["energy.init.kwh"] == 0.375
    assert metrics["energy.total.kwh"] == 2.875
    assert metrics["emissions.total.kg_co2eq"] == pytest.approx(2.875 * 0.3)
    assert EnergyReading.from_dict(ledger.stages["lapt"].as_dict()) == ledger.stages["lapt"]


def test_unknown_country_is_refused_up_front():
    from vocadapt.platform.config import ConfigError, load_config

    assert check_country("FRA") == "FRA"
    with pytest.raises(UserError, match="tracking.country_iso_code"):
        check_country("XYZ")
    with pytest.raises(ConfigError, match="country_iso_code"):
        load_config(None, ["target.language=it", "tracking.country_iso_code=it"])


WORKER = textwrap.dedent("""
    import os, sys, json, time
    import torch.distributed as dist
    from vocadapt.platform.energy import EnergyReading, sum_over_workers

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    measured = rank == 0 or os.environ["BOTH"] == "1"
    reading = EnergyReading("lapt", "ITA", 0.25 * (rank + 1), 0.1 * (rank + 1), 3.0,
                            "cpu: RAPL" if measured else "", {"cpu": 0.2 * (rank + 1), "ram": 0.05 * (rank + 1)})
    if not measured:
        reading = EnergyReading("lapt", "ITA")
    summed = sum_over_workers(reading)
    if rank == 0:
        print(json.dumps(summed.as_dict()))
    dist.destroy_process_group()
""")


@pytest.mark.parametrize("both", [False, True])
def test_readings_of_workers_add_up_once_per_meter(tmp_path, both):
    """Two gloo processes, as two Ray Train workers: one meter per node means a worker that did not measure adds
    nothing; two nodes' meters add up."""
    import json
    import socket

    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
           "BOTH": "1" if both else "0"}
    workers = [subprocess.Popen([sys.executable, str(script)], env={**env, "RANK": str(rank)}, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outputs = [worker.communicate(timeout=180) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err[-2000:] for _, err in outputs]
    summed = json.loads(outputs[0][0].strip().splitlines()[-1])
    if both:
        assert summed["kwh"] == pytest.approx(0.75) and summed["kg_co2eq"] == pytest.approx(0.3)
        assert summed["parts_kwh"]["cpu"] == pytest.approx(0.6) and summed["mode"].endswith("meters summed: 2")
    else:
        assert summed["kwh"] == pytest.approx(0.25) and summed["kg_co2eq"] == pytest.approx(0.1)
        assert summed["mode"] == "cpu: RAPL; meters summed: 1"
    assert [path.name for path in Path(tmp_path).iterdir()] == ["worker.py"]
