"""The language matrix's report: a row's numbers as MLflow metrics, the markdown table with its legend, and the
two output files (``languages.md``, ``languages.json``) written atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vocadapt.pipelines.languages import MatrixSettings


def row_metrics(row: dict[str, Any]) -> dict[str, float]:
    """A row's numbers as flat MLflow metric names (corpus.*, fertility.<tokenizer>.*, bpb.*, generation.*)."""
    metrics = {f"corpus.{split}_lines": float(n) for split, n in row["corpus"].get("lines", {}).items()}
    metrics |= {f"corpus.{key}": float(value) for key, value in row["corpus"].items() if isinstance(value, int)}
    for label, report in row["fertility"].items():
        metrics |= {f"fertility.{label}.{key}": float(value) for key, value in report.items()
                    if isinstance(value, (int, float)) and not isinstance(value, bool)}
    metrics |= {f"bpb.{key}": value for key, value in row["bits_per_byte"].items()}
    metrics |= {f"generation.{key}": value for key, value in row["generation"].items()}
    return metrics


def markdown_table(rows: list[dict[str, Any]], settings: MatrixSettings) -> str:
    """The matrix as a markdown table with a legend (tokens per word only where words are delimited)."""
    head = ("| lang | script | words | train lines | dropped (lang-id) | tokens/char src / tgt / exp "
            "| tokens/word src / tgt | parity src / tgt / exp | bpb source / fvt / random | src/tgt tokens "
            "| speed-up chars/s | speed-up equal content |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        fert, bpb, gen = row["fertility"], row["bits_per_byte"], row["generation"]
        per_char = " / ".join(f"{fert[k]['tokens_per_character']:.3f}" for k in ("source", "target", "expanded"))
        parity = " / ".join(f"{fert[k]['parity']:.2f}" for k in ("source", "target", "expanded"))
        words = "delimited" if row["words_delimited"] else "not delimited"
        per_word = (f"{fert['source']['tokens_per_word']:.2f} / {fert['target']['tokens_per_word']:.2f}"
                    if row["words_delimited"] else "n/a")
        lines.append(
            f"| {row['language']} | {row['script']} | {words} | {row['corpus'].get('lines', {}).get('train', 0):,} "
            f"| {row['corpus'].get('dropped_language_id', 0):,} "
            f"| {per_char} | {per_word} | {parity} "
            f"| {bpb['source']:.3f} / {bpb['fvt']:.3f} / {bpb['random']:.3f} "
            f"| {gen['source_over_target_tokens']:.2f}x | {gen['speed_up.characters_per_second']:.2f}x "
            f"| {gen['speed_up.equal_content']:.2f}x |"
        )
    legend = (
        f"\nsrc: SmolLM2's tokenizer; tgt: a {settings.vocab_size:,}-token target tokenizer replacing it (kind by "
        f"script); exp: SmolLM2's expanded with k = {settings.expansion_k:,} tokens, "
        f"{_protection_legend(rows[-1]['protection'] if rows else {})}. Fertility and parity on up to "
        f"{settings.fertility_documents} held-out paragraphs; parity = tokens for the paragraphs / SmolLM2's tokens "
        f"for their English side. Bits per byte zero-shot on {settings.bpb_documents} paragraphs (max_length "
        f"{settings.max_length}). Speed-up of the fvt model over SmolLM2 on {settings.generation_prompts} "
        f"target-language prompts ({settings.max_new_tokens} new tokens): measured characters per second, and at "
        f"equal content (both decode the same {settings.equal_content_characters} held-out characters token by token "
        f"with their KV cache, teacher-forced, batch 1, in turn; median of {settings.equal_content_repeats}).\n"
    )
    return "\n".join(lines) + "\n" + legend


def _protection_legend(protection: dict[str, Any]) -> str:
    """What the expansion kept as it was, for the legend (the same for every row of one run)."""
    lines = f"keeping the tokenization of {protection.get('english_lines', 0)} English held-out lines"
    if protection.get("word_list"):
        return (f"{lines} and of the {protection['word_list_words']:,} words of the English word list "
                f"{protection['word_list']} (every casing, alone and after a space)")
    return f"{lines} ({protection['note']})" if protection.get("note") else lines


def write_outputs(output_dir: Path, rows: list[dict[str, Any]], markdown: str) -> None:
    """Both files written under temporary names, then renamed: a failed run leaves the old table intact."""
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("languages.json", json.dumps(rows, indent=2, ensure_ascii=False)),
                       ("languages.md", markdown)):
        staging = output_dir / f".{name}.tmp"
        staging.write_text(text, encoding="utf-8")
        staging.replace(output_dir / name)
