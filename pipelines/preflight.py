"""The checks ``vocadapt adapt`` runs before any run or folder exists, in one place: ``adapt`` calls
:func:`preflight` in its setup, and ``vocadapt config`` calls the same function (``--check-files`` to include the
file checks), so a config that ``config`` accepts is one that ``adapt`` starts.

Two levels:

- config checks (no file is read): every listed initialiser exists and takes its options, a method that needs a
  helper has one, the energy grid is known, storage and tracking URIs are well formed;
- file checks (``check_files``): the output folder (refused when it exists, unless ``overwrite``), the source model
  folder (safetensors only, no custom code, an embedding row for every id of its tokenizer), the distillation
  teacher, ``tokenizer.pretrained``, the helper's files, the protected word list, and every corpus (present,
  non-empty, UTF-8, naming the file and line of a bad byte, enough lines, in the right language, then the
  great-expectations suite).

Last, the out-of-domain text the bits-per-byte gates read is checked against the training text (exact and
near-duplicate paragraphs refuse the run: ``check_out_of_domain_unseen``).

Each problem is a ``UserError`` naming the field and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rich.console import Console

from vocadapt.components.errors import UserError
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.assets.sources import ResolvedInputs
from vocadapt.platform.lapt.resources import check_lapt_resources

if TYPE_CHECKING:
    from vocadapt.components.initializers import ConfiguredInitializer

# Schemes a storage path may use (pyarrow's and the common fsspec ones); a plain path is a local folder.
STORAGE_SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "hdfs", "viewfs", "abfs", "az", "memory")
# Schemes MLflow takes as a tracking store; a plain path is a local file store.
TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "file", "databricks")


@dataclass
class Preflight:
    """What the checks resolved, handed to the run so nothing is looked up twice."""

    methods: dict[str, ConfiguredInitializer]
    output_dir: Path
    inputs: ResolvedInputs | None = None  # None without the file checks
    expectations: dict[str, Any] | None = None  # the great-expectations suite's results, logged by the run
    pretrained_tokenizer: Any = None  # tokenizer.pretrained, loaded
    source_tokenizer: Any = None  # the source model's tokenizer, loaded by the checks (None for a hub name)


def preflight(config: ExperimentConfig, *, check_files: bool = True, overwrite: bool = False,
              console: Console | None = None, cache: Any = None) -> Preflight:
    """Every check of ``adapt``'s setup; raises UserError on the first problem. ``cache``: a sweep's
    ``ArtefactCache``, which runs the corpus suite once per sweep."""
    from vocadapt.platform.energy import check_country

    methods = resolve_methods(config)
    if config.tracking.energy:
        check_country(config.tracking.country_iso_code)
    check_storage_uri(config.lapt.storage_path, "lapt.storage_path")
    check_tracking_uri(config.tracking.tracking_uri, "tracking.tracking_uri")
    check_every_language_has_out_of_domain(config)
    check_scoring_device(config)
    output_dir = Path(config.output_dir) / config.name / config.target.language
    checked = Preflight(methods, output_dir)
    if not check_files:
        return checked
    if config.lapt.runs:  # this machine's cluster (a GPU config is checked where it runs, not where it is written)
        check_lapt_resources(config.lapt)
    check_output_folder(output_dir, config, overwrite)
    from vocadapt.platform.model_loading import check_model_folder, check_teacher, load_target_tokenizer
    from vocadapt.platform.assets.sources import resolve_inputs

    checked.inputs = inputs = resolve_inputs(config)  # corpora exist, assets built, source model is a folder
    check_output_not_an_input(output_dir, config, inputs)
    check_model_folder(inputs.source_model, what="source.model", trust_remote_code=config.source.trust_remote_code)
    checked.source_tokenizer = check_source_tokenizer_fits(config, inputs.source_model)
    if config.lapt.runs:
        check_teacher(config.lapt, inputs.source_model)
    if any(method.needs_helper for method in methods.values()):
        check_helper_files(config.init.helper)
    checked.expectations = check_corpora(config, inputs, console or Console(), cache)
    check_out_of_domain_unseen(config, inputs, console or Console())
    if inputs.target_tokenizer:
        if Path(inputs.target_tokenizer).is_dir():
            from vocadapt.components.model_folder_checks import check_tokenizer_folder

            check_tokenizer_folder(Path(inputs.target_tokenizer), "tokenizer.pretrained")
        checked.pretrained_tokenizer = load_target_tokenizer(inputs.target_tokenizer)
    return checked


def check_source_tokenizer_fits(config: ExperimentConfig, source_model: str | Path) -> Any:
    """The source model's tokenizer must have a row for every id: ``len(tokenizer)`` (its highest id + 1) at most
    config.json's ``vocab_size`` (a multimodal config's ``text_config.vocab_size``). Padding rows past the
    tokenizer (Qwen3's 151,669 ids in 151,936 rows) are fine. A hub name is left to the run. Returns the tokenizer
    it loaded (the run uses it instead of loading it again: seconds for a 128k-262k vocabulary), or None."""
    import json

    from vocadapt.components.surgery.plan import check_tokenizer_fits
    from vocadapt.platform.model_loading import load_source_tokenizer

    config_file = Path(source_model) / "config.json"
    if not config_file.is_file():
        return None
    model_config = json.loads(config_file.read_text(encoding="utf-8"))  # check_model_folder has read it already
    if not isinstance(model_config, dict):
        return None
    rows = model_config.get("vocab_size") or (model_config.get("text_config") or {}).get("vocab_size")
    if not isinstance(rows, int):
        return None
    source_tokenizer = load_source_tokenizer(config, str(source_model))
    check_tokenizer_fits(source_tokenizer, rows,
                         what=f"source.model {source_model}: its tokenizer", rows_from="config.json vocab_size")
    check_target_vocab_size(config, source_tokenizer)
    return source_tokenizer


def check_target_vocab_size(config: ExperimentConfig, source_tokenizer) -> None:
    """The target tokenizer is trained ``like`` the source, so it carries the source's special and added tokens
    (Gemma-3: 6,415): ``tokenizer.vocab_size`` must exceed them, or training would stop after the run started."""
    from vocadapt.components.tokenizers._wrap import plan_special_tokens
    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
    from vocadapt.components.tokenizers.train import vocabulary_floor

    if config.tokenizer.pretrained:
        return
    kind = tokenizer_settings_for(config.target.language, config.tokenizer.kind)["kind"]
    floor = vocabulary_floor(kind, plan_special_tokens(source_tokenizer, kind, None))
    if config.tokenizer.vocab_size <= floor:
        raise UserError(f"tokenizer.vocab_size: {config.tokenizer.vocab_size:,} is too small for a {kind} tokenizer "
                        f"trained like the source model's, which carries {floor:,} tokens before training any "
                        f"(its special and added tokens{', and 256 byte pieces' if kind.startswith('spm') else ''}); "
                        f"set tokenizer.vocab_size above {floor:,}")


def check_output_folder(output_dir: Path, config: ExperimentConfig, overwrite: bool) -> None:
    """``<output_dir>/<name>/<language>`` must not exist (unless ``overwrite``), and ``output_dir`` must be a folder."""
    for parent in (Path(config.output_dir), Path(config.output_dir) / config.name):
        if parent.exists() and not parent.is_dir():
            raise UserError(f"output_dir: {parent} is a file, not a folder; set output_dir (or name) to a folder")
    if output_dir.exists() and not overwrite:
        raise UserError(f"name: {output_dir} already exists (an earlier run named {config.name!r}); nothing was "
                        "changed. Pick a new name (--set name=...) or pass --overwrite to replace it once the new "
                        "run has finished")


def check_output_not_an_input(output_dir: Path, config: ExperimentConfig, inputs: ResolvedInputs) -> None:
    """The run's folder (``<output_dir>/<name>/<language>``, replaced under ``--overwrite``) must not be, hold or
    lie inside any input: the source model, the corpora, tokenizer.pretrained, the helper, LAPT's files or
    teacher."""
    from vocadapt.components.input_files import refuse_output_over_inputs

    helper = (config.init.helper or "").partition(":")
    named = [("source.model", inputs.source_model), ("tokenizer.pretrained", inputs.target_tokenizer),
             ("init.helper", helper[2] if helper[0] in ("model", "vectors") else config.init.helper),
             ("lapt.teacher", config.lapt.teacher), ("tokenizer.protect_lexicon", inputs.source_lexicon),
             *[("corpus", path) for path in inputs.corpus_files],
             *[("lapt.train_files", path) for paths in (config.lapt.train_files or {}).values() for path in paths]]
    refuse_output_over_inputs(output_dir, "the run folder (output_dir/name/language)", named)


def check_storage_uri(value: str | Path | None, field: str) -> None:
    """A local path or ``scheme://...`` with a scheme in ``STORAGE_SCHEMES`` and, for object stores, a bucket."""
    if value is None or "://" not in str(value):
        return
    parts = urlsplit(str(value))
    scheme = parts.scheme.lower()
    from vocadapt.platform.tracking import redact_value

    shown = redact_value(str(value))
    if scheme not in STORAGE_SCHEMES:
        raise UserError(f"{field} {shown}: unknown storage scheme {scheme!r}; use a local folder or one of "
                        f"{', '.join(s + '://' for s in STORAGE_SCHEMES)}")
    if scheme not in ("file", "memory") and not parts.hostname:
        raise UserError(f"{field} {shown}: no bucket; write it as {scheme}://BUCKET/PREFIX")


def check_tracking_uri(value: str | None, field: str) -> None:
    """Empty (the default store), a local path, or a URI MLflow accepts: ``http(s)://HOST``, ``sqlite:///FILE``..."""
    if not value or ":" not in value or len(urlsplit(value).scheme) <= 1:  # a path (or a Windows drive)
        return
    parts = urlsplit(value)
    scheme = parts.scheme.lower().split("+")[0]  # postgresql+psycopg2 -> postgresql
    from vocadapt.platform.tracking import redact_value

    shown = redact_value(value)
    if scheme not in TRACKING_SCHEMES:
        raise UserError(f"{field} {shown}: unknown tracking scheme {scheme!r}; use http(s)://HOST:PORT, "
                        "sqlite:///PATH/mlflow.db, a database URI or a local folder")
    if scheme in ("http", "https") and not parts.hostname:
        raise UserError(f"{field} {shown}: no host; write it as {scheme}://HOST:PORT")
    if scheme == "sqlite" and not value.startswith("sqlite:///"):
        raise UserError(f"{field} {shown}: write a SQLite store as sqlite:///PATH (three slashes, then the file)")


def check_helper_files(helper: str | None, what: str = "init.helper") -> None:
    """``init.helper`` naming a folder or a vectors file: it must exist, a vectors file must hold finite vectors of
    one dimension, and a model folder must pass the model-folder checks (fasttext is trained, nothing to check)."""
    if not helper or helper.strip().lower() in ("none", "fasttext") or helper.startswith("fasttext:"):
        return
    kind, _, location = helper.strip().partition(":")
    if kind not in ("model", "vectors"):
        location = helper.strip()
        kind = "vectors" if location.endswith(".vec") else ""
    path = Path(location).expanduser()
    looks_local = location.startswith((".", "/", "~")) or location.endswith(".vec") or kind in ("model", "vectors")
    if looks_local and not path.exists():
        raise UserError(f"{what} {helper!r}: {path} does not exist; give 'fasttext', 'model:DIR' (a model using "
                        "the target tokenizer) or 'vectors:FILE.vec'")
    if kind == "vectors":
        from vocadapt.components.model_folder_checks import check_vectors_file

        check_vectors_file(path, what)
    elif path.is_dir():
        from vocadapt.platform.model_loading import check_model_folder

        check_model_folder(path, what=what)


def resolve_methods(config: ExperimentConfig) -> dict[str, ConfiguredInitializer]:
    """Each listed initialiser looked up in the registry once, its options checked once; unknown methods, unknown
    options and missing helpers fail here, before any work. The run hands the result down to the surgery."""
    from vocadapt.components.initializers import configure_initializer

    methods = {}
    for method in config.init.methods:
        try:
            methods[method] = configure_initializer(method, config.init.options.get(method, {}))
        except KeyError as error:
            raise UserError(f"init.methods: {error.args[0]}") from error
        except ValueError as error:
            raise UserError(f"init.options.{method}: {error}") from error
        if methods[method].initializer.name == "wechsel":  # its fastText models and dictionary: 'embedded' or files
            from vocadapt.platform.assets.embedded import resolve_wechsel_options

            options = resolve_wechsel_options(config.init.options.get(method, {}), config.target.source_language,
                                              config.target.language)
            methods[method] = configure_initializer(method, options)
        if methods[method].needs_helper and not config.init.helper:
            raise UserError(
                f"init.methods: {method!r} needs a helper and init.helper is not set; it accepts "
                f"{', '.join(methods[method].initializer.helpers) or 'a helper'} (set init.helper: fasttext to "
                "train one on the corpus)"
            )
    unknown_options = set(config.init.options) - set(config.init.methods)
    if unknown_options:
        raise UserError(f"init.options names methods not in init.methods: {sorted(unknown_options)}")
    return methods


def check_corpora(config: ExperimentConfig, inputs: ResolvedInputs, console: Console, cache: Any = None
                  ) -> dict[str, Any]:
    """Step 1: each corpus file's checks, then the great-expectations suite over every corpus; raises on a failure
    (naming the file or the expectation, and the fix) before any run or file exists. Returns the suite's results,
    which the caller logs once its run is open (``log_expectations``). ``cache`` (a sweep's ``ArtefactCache``)
    validates the same corpora under the same settings once per sweep."""
    from vocadapt.platform.data.corpus_checks import CorpusSplit, check_corpus, raise_for_failed_expectations

    console.rule("[bold]1. corpus checks")
    checks = [
        ("target training", inputs.target_train, config.target.language, config.corpus.min_lines),
        ("target held-out", inputs.target_validation, config.target.language, 1),
        ("source-language training", inputs.source_train, config.target.source_language, 1),
        ("source-language held-out", inputs.source_validation, config.target.source_language, 1),
    ]
    for language, (train, validation) in inputs.further_languages.items():  # target.languages after the first
        checks += [(f"target training {language}", train, language, config.corpus.min_lines),
                   (f"target held-out {language}", validation, language, 1)]
    for role, files, language, min_lines in checks:
        if not files:
            continue
        report = check_corpus(
            list(files), language=language, min_share=config.corpus.min_language_share, min_lines=min_lines,
            sample_lines=config.corpus.language_check_lines, seed=config.seed,
        )
        for checked in report.files:
            console.print(f"  {role} {checked.path}: {checked.lines:,} lines, "
                          f"{checked.language_share:.1%} labelled {report.expected_label} (bound {report.min_share:.0%})")
    splits = [CorpusSplit(role, tuple(files), language, min_lines) for role, files, language, min_lines in checks
              if files]
    if cache is None:
        results = corpus_expectations(config, splits)
    else:
        results = cache.corpus_expectations(config, inputs, lambda: corpus_expectations(config, splits))
    passed = sum(record["success"] for record in results["expectations"])
    console.print(f"  expectation suite: {passed} of {len(results['expectations'])} expectations met on "
                  f"{len(splits)} corpora ({results['seconds']:.1f} s)", highlight=False)
    raise_for_failed_expectations(results)
    return results


def check_scoring_device(config: ExperimentConfig) -> None:
    """``evaluation.device: cuda`` needs a CUDA device where the driver runs (the models are scored there)."""
    if config.evaluation.device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise UserError(f"evaluation.device is cuda and torch {torch.__version__} sees no CUDA device here; set "
                        "evaluation.device: auto (the GPU when there is one, else the CPU) or cpu")


def check_every_language_has_out_of_domain(config: ExperimentConfig) -> None:
    """With several target languages, the registered candidate is gated on every language's out-of-domain bits per
    byte (``platform/registry/gates.py``), so each target language needs out-of-domain text: Debian's fortunes where
    vocadapt reads them, else files declared in ``evaluation.out_of_domain_text.<code>``. Nothing is gated (and
    nothing refused) when the run scores no out-of-domain text or registers nothing. One target language keeps its
    older behaviour: the gate reports the metric missing."""
    from vocadapt.platform.assets.out_of_domain import SOURCES, languages_without_out_of_domain

    evaluation = config.evaluation
    if not (config.target.multilingual and evaluation.out_of_domain and evaluation.side_by_side_items
            and config.tracking.register_best):
        return
    missing = languages_without_out_of_domain(config)
    if missing:
        first = missing[0]
        raise UserError(
            f"no out-of-domain text for target language(s) {', '.join(missing)}: the default promotion gates read "
            f"every target language's out-of-domain bits per byte, and vocadapt has Debian's fortunes only for "
            f"{', '.join(sorted(SOURCES))}. Declare text no training saw, one paragraph per line: "
            f"evaluation.out_of_domain_text: {{{first}: [path/to/{first}-text.txt]}}; or set "
            "tracking.register_best: false (nothing gated), or evaluation.out_of_domain: false (no language's "
            "out-of-domain gate can then pass)")


def check_out_of_domain_unseen(config: ExperimentConfig, inputs: ResolvedInputs, console: Console) -> None:
    """The out-of-domain text the bits-per-byte gates read must be text no training saw: each of its paragraphs
    is compared with every paragraph of the training text (the corpus training files, which the tokenizer trains
    on too, and ``lapt.train_files``), exact after normalising case, whitespace and punctuation, and by character
    5-gram Jaccard (``evaluation.out_of_domain_max_jaccard``; ``components/corpora/overlap.py``). Any overlap
    refuses the run. Hugging Face ``lapt.datasets`` and a ``tokenizer.pretrained``'s training text cannot be
    read here: a note says so."""
    from vocadapt.components.corpora.overlap import find_overlaps
    from vocadapt.platform.assets.out_of_domain import out_of_domain_for_config

    if config.evaluation.side_by_side_items == 0:
        return  # nothing is scored out of domain
    documents = out_of_domain_for_config(config)
    if not documents:
        return
    further = [path for train, _ in inputs.further_languages.values() for path in train]
    files = list(dict.fromkeys([*inputs.target_train, *further, *inputs.source_train,
                                *(Path(name) for names in ((config.lapt.train_files or {}).values()
                                                           if config.lapt.runs else ()) for name in names)]))
    paragraphs = [(stream, text) for stream, texts in documents.items() for text in texts]

    def training():
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as handle:
                yield str(path), (line.rstrip("\n") for line in handle)

    matches = find_overlaps([text for _, text in paragraphs], training(),
                            threshold=config.evaluation.out_of_domain_max_jaccard)
    unchecked = [what for what, present in (("lapt.datasets", config.lapt.runs and config.lapt.datasets),
                                            ("tokenizer.pretrained's training text", inputs.target_tokenizer))
                 if present]
    console.print(f"  out-of-domain text: {len(paragraphs)} paragraphs against {len(files)} training files, "
                  f"{len(matches)} overlapping" + (f" (not checked: {', '.join(unchecked)})" if unchecked else ""),
                  highlight=False)
    if matches:
        shown = "\n".join(
            f"  - {paragraphs[m.evaluation_index][0]} paragraph {m.evaluation_text[:70]!r} "
            f"{'equals' if m.exact else f'nearly duplicates (Jaccard {m.jaccard:.2f})'} {m.training_source} line "
            f"{m.training_line}: {m.training_text[:70]!r}" for m in matches[:5])
        more = f"\n  ... and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise UserError(
            f"the out-of-domain text overlaps the training text in {len(matches)} paragraph(s), so the "
            f"bits-per-byte gates would not measure unseen text:\n{shown}{more}\nRemove those paragraphs from the "
            "training files, or declare other text in evaluation.out_of_domain_text.<language>")


def corpus_expectations(config: ExperimentConfig, splits) -> dict[str, Any]:
    """The great-expectations suite on ``splits`` (``CorpusSplit``s) with the bounds of the config's corpus section."""
    from vocadapt.platform.data.corpus_checks import LineBounds, run_expectation_suite

    corpus = config.corpus
    bounds = LineBounds(corpus.min_language_share, corpus.max_line_chars, corpus.max_duplicate_share)
    return run_expectation_suite(splits, bounds, max_rows=corpus.expectation_lines, seed=config.seed)
