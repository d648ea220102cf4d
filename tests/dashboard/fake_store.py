"""A realistic MLflow store for the dashboard tests: an adapt run with two methods, an evaluation run, a registered
model. Run and method names are made up on purpose so nothing in the app can be hard-coded to them."""

from __future__ import annotations

import json
from pathlib import Path

ADAPT_RUN = "kestrel-adapt"
METHODS = ("fvt", "sava")
EVALUATION_RUN = "evaluate/offline/vocadapt-xx-kestrel-v1"
REGISTERED = "vocadapt-xx-kestrel"
# energy per stage in kWh, logged the way the pipelines log it (platform.energy.log_energy); made-up numbers
ENERGY_COUNTRY, ENERGY_MODE = "FRA", "cpu: RAPL; ram: estimate; gpu: NVML (1 x Kestrel GPU)"
GRID_KG_PER_KWH = 0.056
TOKENIZER_KWH, EVALUATION_KWH = 0.0034, 0.0112
METHOD_KWH = {"init": 0.0021, "evaluation": 0.0013, "lapt": 0.0475}  # plus 0.01 kWh of LAPT per method offset
# the corpora the adapt run checked: name -> (language, non-blank lines)
CHECKED_CORPORA = {"target training": ("xx", 5400), "target held-out": ("xx", 290),
                   "source-language training": ("en", 5900), "source-language held-out": ("en", 310)}
EXPECTATIONS = ("expect_table_row_count_to_be_between", "expect_column_values_to_be_in_set on utf8",
                "expect_column_value_lengths_to_be_between on text",
                "expect_column_proportion_of_unique_values_to_be_between on text",
                "expect_column_values_to_be_in_set on language")


def sqlite_tracker(folder: Path, experiment: str):
    """(tracking URI, Tracker) of a SQLite store in ``folder/mlflow.db``, artifacts in ``folder/artifacts``."""
    import mlflow

    from vocadapt.platform.tracking import Tracker

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    # Tracker builds its client before it sets the global registry URI, so a Tracker made earlier in the same
    # process (another test's store) would receive this store's registrations: point the registry here first.
    mlflow.set_registry_uri(uri)
    return uri, Tracker(uri, experiment, artifact_root=folder / "artifacts")


def fill_store(folder: Path, experiment: str = "kestrel-experiment") -> str:
    """Write the runs into ``folder/mlflow.db`` (artifacts in ``folder/artifacts``); returns the tracking URI."""
    from vocadapt.platform.data.corpus_checks import log_expectations
    from vocadapt.platform.energy import log_energy
    from vocadapt.platform.lapt.worker import METRIC_PREFIX

    uri, tracker = sqlite_tracker(folder, experiment)
    with tracker.run(ADAPT_RUN, tags={"vocadapt.target_language": "xx"}) as parent:
        parent_id = parent.info.run_id
        parent_energy = _ledger({"tokenizer": TOKENIZER_KWH})
        tracker.log_params(parent_id, {"target.language": "xx", "target.source_language": "en"})
        tracker.log_metrics(parent_id, {
            "fertility.source_tokenizer.xx.tokens_per_word": 2.1, "fertility.target_tokenizer.xx.tokens_per_word": 1.4,
            "fertility.source_tokenizer.en.tokens_per_word": 1.3, "fertility.target_tokenizer.en.tokens_per_word": 1.9,
            "source_model.bpb_target": 1.35, "source_model.bpb_source": 1.02,
            **{f"source_model.{key}": value for key, value in SOURCE_SIDE_BY_SIDE.items()},
        })
        for offset, method in enumerate(METHODS):
            with tracker.run(f"{ADAPT_RUN}/{method}", parent_run_id=parent_id) as child:
                run_id = child.info.run_id
                tracker.log_params(run_id, {"method": method})
                tracker.log_metrics(run_id, {"bpb_target_zero_shot": 2.4 - offset * 0.3,
                                             "bpb_source_zero_shot": 2.0 - offset * 0.2}, step=0)
                for step in range(1, 6):  # as platform/lapt/worker.py logs LAPT, with its prefix
                    tracker.log_metrics(run_id, {f"{METRIC_PREFIX}loss": 6.0 / step + offset * 0.2,
                                                 f"{METRIC_PREFIX}learning_rate": 3e-4}, step=step)
                tracker.log_metrics(run_id, {f"{METRIC_PREFIX}bits_per_byte_target": 1.5}, step=5)
                tracker.log_metrics(run_id, {"bpb_target_after_lapt": 1.5 - offset * 0.1,
                                             "bpb_source_after_lapt": 1.3 - offset * 0.05}, step=5)
                tracker.log_metrics(run_id, method_side_by_side(offset), step=5)
                method_energy = _ledger(method_kwh(offset))
                for reading in method_energy.stages.values():
                    parent_energy.add(reading)
                log_energy(tracker, run_id, method_energy)
        log_energy(tracker, parent_id, parent_energy)
        tracker.set_tags(parent_id, {"vocadapt.best_method": METHODS[-1]})
        log_expectations(tracker, parent_id, expectation_results(CHECKED_CORPORA))
    model_uri = tracker.log_model_directory(run_id, _tiny_folder(folder))
    tracker.register(model_uri, REGISTERED, alias="candidate", run_id=run_id,
                     tags={"vocadapt.method": METHODS[-1], "vocadapt.source_model": "kestrel-135m"})
    from vocadapt.platform.registry.model_versions import promote

    promote(tracker.client, REGISTERED, 1)  # refused (no out-of-domain parts): a decision recorded on the version
    with tracker.run(EVALUATION_RUN, tags={"vocadapt.suite": "offline", "vocadapt.model_version": "1"}) as run:
        eval_id = run.info.run_id
        tracker.log_metrics(eval_id, {
            "benchmark.vocadapt_cloze_xx.acc_bytes": 0.41, "benchmark.vocadapt_cloze_en.acc_bytes": 0.52,
            "benchmark.vocadapt_translation_en_xx.chrf": 31.5,
            "source_model.benchmark.vocadapt_cloze_xx.acc_bytes": 0.37,
            "source_model.benchmark.vocadapt_cloze_en.acc_bytes": 0.55,
            "source_model.benchmark.vocadapt_translation_en_xx.chrf": 28.0,
            "generation.vocadapt_translation_en_xx.characters_per_second": 120.0,
            "generation.vocadapt_translation_en_xx.tokens_per_second": 30.0,
            "generation.vocadapt_translation_en_xx.percent_generated_new": 61.0,
            "source_model.generation.vocadapt_translation_en_xx.characters_per_second": 80.0,
            "source_model.generation.vocadapt_translation_en_xx.tokens_per_second": 31.0,
            "speed_up.vocadapt_translation_en_xx.characters_per_second": 1.5, "speed_up.characters_per_second": 1.1,
            "generation.vocadapt_translation_xx_en.characters_per_second": 64.0,
            "source_model.generation.vocadapt_translation_xx_en.characters_per_second": 80.0,
            "speed_up.vocadapt_translation_xx_en.characters_per_second": 0.8,
            "benchmark.vocadapt_cloze_xx.sample_len": 20.0,  # stores from before lm-eval's sample_len was dropped
            "parameters.total": 1.2e8, "parameters.embeddings": 1.2e7, "source_model.parameters.total": 1.35e8,
            "similarity.kestrel__helper": 43.2,
        })
        log_energy(tracker, eval_id, _ledger({"evaluation": EVALUATION_KWH}))
        tracker.log_dict(eval_id, {"names": ["kestrel", "helper"], "matrix": [[100.0, 43.2], [43.2, 100.0]],
                                   "anchors": 256, "tokens_compared": 9000}, "similarity/similarity.json")
    return uri


# what adapt logs for the side-by-side benchmark: the source model's on the parent (source_model.*), made-up numbers
SOURCE_SIDE_BY_SIDE = {"benchmark.side_by_side_cloze_xx.acc_bytes": 0.375, "bpb_ood_target": 2.25,
                       "benchmark.side_by_side_translation_en_xx.chrf": 21.5, "bpb_ood_source": 1.125,
                       "generation.tokens_per_character": 0.4375, "parameters.total": 135000.0}


def method_side_by_side(offset: int) -> dict[str, float]:
    return {"benchmark.side_by_side_cloze_xx.acc_bytes": 0.3125 + offset / 8, "bpb_ood_target": 2.5 - offset / 4,
            "benchmark.side_by_side_translation_en_xx.chrf": 18.25 + offset, "bpb_ood_source": 1.25,
            "generation.tokens_per_character": 0.3125, "generation.percent_generated_new": 40.0 + offset,
            "generation.same_text_token_saving": 0.125 + offset / 16, "parameters.total": 120000.0 + offset}


def expectation_results(corpora: dict[str, tuple[str, int]]) -> dict:
    """Results shaped as ``platform.corpus_checks.run_expectation_suite`` returns them, every expectation met."""
    measures = ("non-blank lines", "share of lines in UTF-8", "share of lines of 1 to 20000 characters",
                "share of distinct lines", "share of lines labelled {language}")
    thresholds = (">= 100", ">= 1.0", ">= 1.0", ">= 0.8", ">= 0.8")
    records = [
        {"corpus": name, "language": language, "expectation": expectation, "measure": measure.format(language=language),
         "observed": lines if measure == "non-blank lines" else 0.97, "threshold": threshold, "success": True}
        for name, (language, lines) in corpora.items()
        for expectation, measure, threshold in zip(EXPECTATIONS, measures, thresholds)
    ]
    summary = {name: {"files": [f"/corpora/{name.replace(' ', '-')}.txt"], "language": language, "lines": lines,
                      "rows_validated": lines} for name, (language, lines) in corpora.items()}
    return {"success": True, "failures": [], "expectations": records, "corpora": summary, "seconds": 1.5}


def method_kwh(offset: int) -> dict[str, float]:
    return {**METHOD_KWH, "lapt": METHOD_KWH["lapt"] + 0.01 * offset}


def expected_energy_kwh() -> dict[str, float]:
    """Run name -> the total energy the store records for it (an adapt run's total includes its methods')."""
    methods = {f"{ADAPT_RUN}/{m}": sum(method_kwh(offset).values()) for offset, m in enumerate(METHODS)}
    return {ADAPT_RUN: TOKENIZER_KWH + sum(methods.values()), **methods, EVALUATION_RUN: EVALUATION_KWH}


def _ledger(stages: dict[str, float]):
    from vocadapt.platform.energy import EnergyLedger, EnergyReading

    ledger = EnergyLedger(ENERGY_COUNTRY)
    for stage, kwh in stages.items():
        ledger.add(EnergyReading(stage, ENERGY_COUNTRY, kwh, kwh * GRID_KG_PER_KWH, mode=ENERGY_MODE))
    return ledger


def _tiny_folder(folder: Path) -> Path:
    model = folder / "model-files"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return model


MATRIX_EXPERIMENT = "kestrel-languages"
# (language, script, words delimited, SmolLM2-like parity, target parity): made-up numbers, real logging
# four rows: the matrix experiment has more runs than the comparison one, which must still open first
MATRIX_ROWS = (("qa", "Latin", True, 1.6, 0.9), ("qb", "Khmer", False, 9.4, 1.6), ("qc", "Greek", True, 4.1, 1.0),
               ("qd", "Devanagari", True, 5.3, 1.1))


def fill_language_matrix(folder: Path, experiment: str = MATRIX_EXPERIMENT) -> str:
    """A language matrix logged the way ``vocadapt languages`` logs it (parent run, one child per language)."""
    from vocadapt.pipelines.languages import _track_language
    from vocadapt.platform.data.corpus_checks import log_expectations
    from vocadapt.platform.tracking import Tracker

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    tracker = Tracker(uri, experiment, artifact_root=folder / "artifacts")
    with tracker.run("languages", tags={"vocadapt.matrix": "languages"}) as parent:
        log_expectations(tracker, parent.info.run_id, expectation_results(
            {f"{row[0]} training": (row[0], 5000) for row in MATRIX_ROWS}))
        for language, script, delimited, parity_source, parity_target in MATRIX_ROWS:
            _track_language(tracker, parent.info.run_id, _matrix_row(language, script, delimited, parity_source,
                                                                       parity_target))
    return uri


def _matrix_row(language, script, delimited, parity_source, parity_target) -> dict:
    def report(parity: float) -> dict:
        tokens = int(1000 * parity)
        return {"documents": 100, "tokens": tokens, "tokens_per_character": parity / 4, "parity": parity,
                "tokens_per_word": parity * 1.3 if delimited else None, "tokens_per_byte": parity / 5}

    fertility = {"source": report(parity_source), "target": report(parity_target),
                 "expanded": report((parity_source + parity_target) / 2)}
    ratio = parity_source / parity_target
    return {
        "language": language, "script": script, "words_delimited": delimited,
        "segmentation": "whitespace-separated words" if delimited else "not delimited",
        "tokenizer": {"kind": "sentencepiece-bpe", "vocab_size": 4096},
        "protection": {"english_lines": 200, "word_list": "en.txt", "word_list_words": 174344, "note": None},
        "corpus": {"lines": {"train": 5000, "validation": 300, "test": 300}, "dropped_language_id": 120},
        "fertility": fertility,
        "bits_per_byte": {"source": 2.5, "fvt": 2.5 / ratio ** 0.3, "random": 4.0},
        "generation": {"source.characters_per_second": 10.0, "fvt.characters_per_second": 10.0 * ratio ** 0.5,
                       "speed_up.characters_per_second": ratio ** 0.5, "speed_up.equal_content": ratio * 0.8,
                       "source_over_target_tokens": ratio},
    }


def run_dashboard(tracking_uri: str, monkeypatch):
    """The dashboard app run once by Streamlit's test harness on ``tracking_uri``; asserts it raised nothing."""
    from streamlit.testing.v1 import AppTest

    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    app = AppTest.from_file(str(app_path()), default_timeout=120).run()
    assert not app.exception, app.exception
    return app
