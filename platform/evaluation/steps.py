"""The steps of the ``evaluate`` pipeline, each returning flat metrics: parameter counts, lm-eval benchmarks,
bits per byte, side-by-side generation, embedding similarity."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from vocadapt.platform.evaluation.suites import SuiteConfig


def load_model(path: Path):
    """(model, tokenizer) from a folder: safetensors only, no remote code, eval mode, float32 on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, use_safetensors=True,
                                                 trust_remote_code=False)
    return model.eval(), tokenizer


def parameter_counts(model) -> dict[str, float]:
    """Total, embedding (input + untied head) and vocabulary rows, as SAVA Table 1 compares them."""
    total = sum(p.numel() for p in model.parameters())
    embeddings = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    embedding_parameters = embeddings.numel()
    if head is not None and head.weight.data_ptr() != embeddings.data_ptr():
        embedding_parameters += head.weight.numel()
    return {"parameters.total": float(total), "parameters.embeddings": float(embedding_parameters),
            "parameters.vocabulary_rows": float(embeddings.shape[0])}


def harness_step(suite: SuiteConfig, model, tokenizer, tasks) -> dict[str, float]:
    """lm-eval scores as ``benchmark.<task>.<metric>``."""
    from vocadapt.platform.evaluation.harness import flatten_results, run_harness

    # offline tasks carry their shots in the prompt; cluster tasks run once per number of shots
    groups = {None: tasks.tasks} if tasks is not None else suite.fewshot_groups()
    scores = {}
    for shots, names in groups.items():
        if not names:
            continue
        results = run_harness(
            model, tokenizer, names, include_path=tasks.path if tasks is not None else _cluster_include(),
            include_defaults=tasks is None, batch_size=suite.harness.batch_size,
            max_length=suite.harness.max_length, limit=suite.harness.limit, num_fewshot=shots, seed=suite.seed,
        )
        scores |= {f"benchmark.{key}": value for key, value in flatten_results(results).items()}
    return scores


def _cluster_include() -> Path | None:
    from vocadapt.platform.evaluation.suites import TASKS_DIR

    return TASKS_DIR if TASKS_DIR.is_dir() else None


def bits_per_byte_step(suite: SuiteConfig, model, tokenizer, held_out, tasks) -> dict[str, float]:
    """``bpb.<lang>`` on the first documents of each language's held-out test text."""
    if tasks is None:
        return {}
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte
    from vocadapt.platform.evaluation.offline_tasks import HeldOutData

    languages = suite.cloze.languages
    held_out = held_out or HeldOutData.from_embedded(languages)
    scores = {}
    for lang in languages:
        lines = Path(held_out.monolingual[lang]).read_text(encoding="utf-8").splitlines()
        documents = [line for line in lines if line.strip()][: suite.bits_per_byte.documents]
        scores[f"bpb.{lang}"] = bits_per_byte(model, tokenizer, documents, max_length=suite.bits_per_byte.max_length,
                                              batch_size=suite.bits_per_byte.batch_size)
    return scores


def generation_step(suite, tasks, model_dir, model, tokenizer, source_dir, source, work_dir: Path,
                    console: Console) -> dict[str, float]:
    """Generate every translation task's first prompts with the model and the source model, side by side.

    Both backends are open at once (with vLLM: two servers), each is warmed up, and for every task the two are
    timed in turn ``suite.generation.repeats`` times; the median time counts, so a burst of load on a shared
    machine does not decide the speed-up. Greedy decoding makes every repeat produce the same tokens.
    """
    from contextlib import ExitStack

    from vocadapt.components.evaluation.efficiency import generation_efficiency, speed_up
    from vocadapt.components.evaluation.prompts import first_line
    from vocadapt.components.evaluation.text_scores import chrf

    new_ids = _new_token_ids(source[1], tokenizer) if source else None
    prompts = {task: tasks.translation_items(task)[: suite.generation.examples] for task in tasks.translation_tasks}
    contenders = {"": (model_dir, model, tokenizer)}
    if source:
        contenders["source_model."] = (Path(source_dir), *source)
    metrics: dict[str, float] = {}
    records = {}
    with ExitStack() as stack:
        backends = {prefix: stack.enter_context(_backend(suite, *contender, work_dir))
                    for prefix, contender in contenders.items()}
        for backend in backends.values():
            backend.generate([prompts[tasks.translation_tasks[0]][0]["prompt"]], max_new_tokens=4)  # warm-up
        for task, items in prompts.items():
            for prefix, record in _timed_in_turn(backends, [item["prompt"] for item in items], suite).items():
                records[prefix, task] = record
                report = generation_efficiency(record, new_ids if not prefix else None)
                report["chrf"] = chrf([first_line(t) for t in record.texts], [item["reference"] for item in items])
                metrics |= {f"{prefix}generation.{task}.{key}": value for key, value in report.items()}
                console.print(f"  {prefix or 'model '}{task}: {report['characters_per_second']:.1f} chars/s, "
                              f"chrF {report['chrf']:.1f}")
    if source:
        for task in prompts:
            ratios = speed_up(_rates(metrics, "", task), _rates(metrics, "source_model.", task))
            metrics |= {f"speed_up.{task}.{rate}": value for rate, value in ratios.items()}
        totals = {prefix: _combined([records[prefix, task] for task in prompts]) for prefix in contenders}
        overall = speed_up(generation_efficiency(totals[""]), generation_efficiency(totals["source_model."]))
        metrics |= {f"speed_up.{rate}": value for rate, value in overall.items()}
    return metrics


def _timed_in_turn(backends: dict, prompts: list[str], suite: SuiteConfig) -> dict:
    """prefix -> the record of its median-time repeat, the backends taking turns on the same prompts."""
    import statistics

    from vocadapt.components.evaluation.efficiency import GenerationRecord

    runs: dict[str, list] = {prefix: [] for prefix in backends}
    for _ in range(suite.generation.repeats):
        for prefix, backend in backends.items():
            runs[prefix].append(backend.generate(prompts, max_new_tokens=suite.generation.max_new_tokens))
    chosen = {}
    for prefix, records in runs.items():
        seconds = statistics.median(record.seconds for record in records)
        chosen[prefix] = GenerationRecord(records[0].texts, records[0].token_ids, seconds)
    return chosen


def _rates(metrics: dict[str, float], prefix: str, task: str) -> dict[str, float]:
    head = f"{prefix}generation.{task}."
    return {key[len(head):]: value for key, value in metrics.items() if key.startswith(head)}


def _combined(records):
    from vocadapt.components.evaluation.efficiency import GenerationRecord

    return GenerationRecord([t for r in records for t in r.texts], [i for r in records for i in r.token_ids],
                            sum(r.seconds for r in records))


def _new_token_ids(source_tokenizer, tokenizer) -> set[int]:
    """Ids of ``tokenizer`` whose canonical form the source tokenizer lacks: the new vocabulary (%Gen)."""
    from vocadapt.components.tokenizers.overlap import token_overlap

    overlap = token_overlap(source_tokenizer, tokenizer)
    return set(range(len(tokenizer))) - set(overlap.target_to_source)


class _backend:
    """The suite's backend for one model, as a context manager (a vLLM server lives only inside it)."""

    def __init__(self, suite: SuiteConfig, folder: Path, model, tokenizer, work_dir: Path) -> None:
        self.suite, self.folder, self.model, self.tokenizer, self.work_dir = suite, folder, model, tokenizer, work_dir
        self.server = None

    def __enter__(self):
        from vocadapt.platform.evaluation.generation import TransformersBackend, VllmBackend

        if self.suite.generation.backend == "transformers":
            return TransformersBackend(self.model, self.tokenizer, batch_size=self.suite.generation.batch_size)
        from vocadapt.platform.evaluation.serving import VllmServer

        self.server = VllmServer(Path(self.folder), log_file=self.work_dir / f"vllm-{Path(self.folder).name}.log")
        self.server.__enter__()
        return VllmBackend(self.server.base_url, self.server.model_name)

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.__exit__(*exc)


def similarity_step(suite: SuiteConfig, name: str, model, tokenizer, peers: dict[str, str], work_dir: Path):
    """Pairwise similarity of the model and its peers; metrics and the two artifact files."""
    from vocadapt.platform.evaluation.similarity import compare_embeddings, input_embeddings, write_similarity_artifacts

    spaces = {name: (input_embeddings(model), tokenizer)}
    for peer_name, folder in peers.items():
        peer_model, peer_tokenizer = load_model(Path(folder))
        spaces[peer_name] = (input_embeddings(peer_model), peer_tokenizer)
        del peer_model
    try:
        table = compare_embeddings(spaces, anchors_per_kind=suite.similarity.anchors_per_kind, seed=suite.seed)
    except ValueError as error:
        from vocadapt.platform.commands._errors import UserError

        raise UserError(f"embedding similarity: {error} (suite field similarity.anchors_per_kind)") from error
    metrics = {f"similarity.{pair}": value for pair, value in table.pairs().items()}
    return metrics, list(write_similarity_artifacts(table, work_dir / "similarity"))


def score_model(model, tokenizer, suite: SuiteConfig | str = "offline", *, held_out=None,
                work_dir: Path | None = None, overrides: dict | None = None) -> dict[str, float]:
    """Benchmarks and bits per byte of an in-memory model (e.g. during LAPT), without MLflow or generation.

    Returns ``benchmark.<task>.<metric>``, ``bpb.<lang>`` and ``parameters.*``; tasks are built in ``work_dir``
    (default: a temporary folder, removed afterwards).
    """
    import shutil
    import tempfile

    from vocadapt.platform.evaluation.offline_tasks import HeldOutData, build_offline_tasks
    from vocadapt.platform.evaluation.suites import load_suite

    if isinstance(suite, str):
        suite = load_suite(suite, overrides)
    scratch = Path(work_dir or tempfile.mkdtemp(prefix="vocadapt-score-"))
    try:
        tasks = None
        if suite.kind == "offline":
            directions = suite.translation.directions
            languages = sorted({*suite.cloze.languages, *(lang for pair in directions for lang in pair)})
            held_out = held_out or HeldOutData.from_embedded(languages)
            tasks = build_offline_tasks(suite, held_out, scratch / "tasks")
        metrics = parameter_counts(model) | harness_step(suite, model, tokenizer, tasks)
        return metrics | bits_per_byte_step(suite, model, tokenizer, held_out, tasks)
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
