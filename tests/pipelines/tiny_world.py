"""A tiny source model and byte-level BPE tokenizer built in the test, and a config that points at them."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_source_model(folder: Path, corpus_files: list[Path], vocab_size: int = 400, tied: bool = True) -> Path:
    """Train a byte-level BPE on ``corpus_files`` and save it with a random tiny Llama; returns the folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train([str(p) for p in corpus_files], trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<|endoftext|>",
        pad_token="<|im_end|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=tied,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config_overrides(model_dir: Path, corpora: dict[str, Path], workdir: Path, **extra: str) -> list[str]:
    """Dotted overrides for a fast `adapt` on the tiny model and the fixture corpora."""
    overrides = {
        "name": "tiny",
        "target.language": "it",
        "output_dir": str(workdir / "runs"),
        "source.model": str(model_dir),
        "corpus.train": f"[{corpora['it.train']}]",
        "corpus.validation": f"[{corpora['it.validation']}]",
        "corpus.source_language_train": f"[{corpora['en.train']}]",
        "corpus.source_language_validation": f"[{corpora['en.validation']}]",
        "corpus.min_lines": "20",
        "corpus.min_language_share": "0.6",
        "tokenizer.vocab_size": "600",
        "init.methods": "[random, fvt]",
        "evaluation.max_documents": "16",
        "evaluation.max_length": "64",
        "evaluation.side_by_side_items": "6",
        "evaluation.max_new_tokens": "8",
        # the equal-content decode is token by token, teacher-forced, for the source and every method: at its
        # default (400 characters, three turns) it was a large part of a tiny adapt on a family's real vocabulary
        "evaluation.equal_content_characters": "80",
        "evaluation.equal_content_repeats": "1",
        "evaluation.out_of_domain": "false",
        "lapt.max_steps": "2",
        "lapt.batch_size": "2",
        "lapt.sequence_length": "32",
        "lapt.warmup_steps": "0",
        # in this process: a tiny adapt's two steps take a second, a Ray Train worker group tens of seconds to start;
        # the tests of Ray's part pass lapt.runner=ray (test_adapt_console.py, tests/training/test_ray_lapt*.py)
        "lapt.runner": "in_process",
        "tracking.experiment": "tiny-e2e",
        **extra,
    }
    return [f"{key}={value}" for key, value in overrides.items()]


# Out-of-domain paragraphs no fixture corpus holds (the run refuses text that overlaps its training text)
OUT_OF_DOMAIN = {
    "it": ["Il faro della scogliera lampeggia due volte ogni dieci secondi sopra le onde grigie.",
           "Una volpe rossa attraversa il ghiacciaio al tramonto senza lasciare impronte profonde.",
           "Il violinista accorda lo strumento mentre la sala dei concerti resta in silenzio.",
           "Sotto il ponte di ferro passano chiatte cariche di sale e di legname scuro.",
           "La cometa apparve a mezzanotte e gli astronomi restarono svegli fino all'alba."],
    "en": ["The lighthouse on the cliff flashes twice every ten seconds above the grey waves.",
           "A red fox crosses the glacier at dusk without leaving deep footprints behind.",
           "The violinist tunes his instrument while the concert hall stays completely silent.",
           "Barges loaded with salt and dark timber pass slowly under the iron bridge.",
           "The comet appeared at midnight and the astronomers stayed awake until dawn."],
}


def out_of_domain_overrides(folder: Path) -> dict[str, str]:
    """``evaluation.out_of_domain_text`` as files in ``folder``, so the run logs out-of-domain bits per byte."""
    files = {}
    for language, lines in OUT_OF_DOMAIN.items():
        files[language] = folder / f"out-of-domain.{language}.txt"
        files[language].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"evaluation.out_of_domain": "true",
            **{f"evaluation.out_of_domain_text.{lang}": f"[{path}]" for lang, path in files.items()}}


@contextmanager
def adapt_over_http(folder: Path, corpora: dict[str, Path]):
    """One `vocadapt adapt` (two methods, LAPT on Ray, side-by-side and out-of-domain scores, the best registered
    as candidate) of a tiny model built here, tracked by a real MLflow server in ``folder`` and run from
    ``folder``: yields (tracking URL, the --json report, the folder) while the server is up."""
    import json
    import os

    from typer.testing import CliRunner

    from tests.mlflow_server import mlflow_server
    from vocadapt.cli.app import app

    model = build_source_model(folder / "tiny-source", [corpora["en.train"]])
    with mlflow_server(folder) as url:
        summary = folder / "summary.json"
        overrides = tiny_config_overrides(model, corpora, folder, **{"tracking.country_iso_code": "FRA"},
                                          **out_of_domain_overrides(folder))
        args = [arg for override in overrides for arg in ("--set", override)]
        previous, old_uri = Path.cwd(), os.environ.get("MLFLOW_TRACKING_URI")
        os.chdir(folder)
        os.environ["MLFLOW_TRACKING_URI"] = url
        try:
            result = CliRunner().invoke(app, ["adapt", *args, "--json", str(summary)], catch_exceptions=False)
        finally:
            os.chdir(previous)
            if old_uri is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = old_uri
        assert result.exit_code == 0, result.output
        yield url, json.loads(summary.read_text()), folder
