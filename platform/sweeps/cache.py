"""Artefacts every trial of a sweep would otherwise recompute (the corpus expectation suite's results, the source
model's held-out bits per byte, the trained target tokenizer, a trained helper), stored under the sweep's output
folder and keyed by exactly their inputs. The folder is local or in object storage (``s3://...``, see
``platform/data/storage.py``), so trials on every node of a cluster share one cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.data.storage import StorageLocation, local_mirror, locate

CACHE_FOLDER = "cache"  # under the sweep's output folder: <storage_path>/<name>/cache/<kind>/<key>/
CACHE_VERSION = 1  # bump when what an artefact holds (or how it is computed) changes
COMPUTED, REUSED = "computed", "reused"


def source_model_identity(config: ExperimentConfig, model: str) -> dict[str, Any]:
    """What fixes the source model's bytes: a local folder's content sha256, else the hub name and revision."""
    from vocadapt.platform.tracking import sha256_tree

    name = sha256_tree(Path(model)) if Path(model).is_dir() else model
    return {"model": name, "revision": config.source.revision, "dtype": config.source.dtype,
            "trust_remote_code": config.source.trust_remote_code}


def _file_digests(paths) -> list[str]:
    from vocadapt.platform.tracking import sha256_files

    return [sha256_files([Path(p)]) for p in paths]


def source_bpb_inputs(config: ExperimentConfig, inputs, source_model: dict[str, Any]) -> dict[str, Any]:
    """The source model's held-out bits per byte depend on the model, the held-out text and how it is scored."""
    key = {"source_model": source_model, "target_validation": _file_digests(inputs.target_validation),
           "source_validation": _file_digests(inputs.source_validation),
           "evaluation": config.evaluation.model_dump(mode="json")}
    if inputs.further_languages:  # target.languages after the first: their held-out streams are scored too
        key["further_validation"] = {language: _file_digests(validation)
                                     for language, (_, validation) in inputs.further_languages.items()}
    return key


def tokenizer_inputs(config: ExperimentConfig, inputs, source_model: dict[str, Any]) -> dict[str, Any]:
    """The trained target tokenizer (before replace or expand) depends on its settings, the language (which picks
    the kind under 'auto'), the training text, the seed and the source tokenizer it copies special tokens from."""
    settings = config.tokenizer
    return {"source_model": source_model, "language": config.target.language, "seed": config.seed,
            "target_train": _file_digests(inputs.target_train),
            "tokenizer": {"kind": settings.kind, "vocab_size": settings.vocab_size,
                          "min_frequency": settings.min_frequency, "max_training_lines": settings.max_training_lines}}


def helper_inputs(config: ExperimentConfig, inputs, adapted_tokenizer_sha256: str) -> dict[str, Any]:
    """A trained helper (fastText) depends on the adapted tokenizer's files, its spec, the training text, the seed."""
    return {"helper": config.init.helper, "tokenizer_sha256": adapted_tokenizer_sha256, "seed": config.seed,
            "target_train": _file_digests(inputs.target_train)}


def expectation_inputs(config: ExperimentConfig, inputs) -> dict[str, Any]:
    """The corpus expectation suite's results depend on the corpora, their languages, the corpus section's bounds
    and the seed (which picks the sample of a corpus longer than ``corpus.expectation_lines``)."""
    corpus = config.corpus
    return {"languages": [config.target.language, config.target.source_language], "seed": config.seed,
            "bounds": {key: getattr(corpus, key) for key in ("min_lines", "min_language_share", "max_duplicate_share",
                                                              "max_line_chars", "expectation_lines")},
            "files": {role: _file_digests(getattr(inputs, role)) for role in
                      ("target_train", "target_validation", "source_train", "source_validation")}}


def _upload_entry(folder: Path, location: StorageLocation) -> None:
    """Upload an entry's files, ``inputs.json`` last: its presence says the entry is complete."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "inputs.json"):
        target = location / path.relative_to(folder).as_posix()
        with path.open("rb") as source, location.filesystem.open_output_stream(target.path) as stream:
            shutil.copyfileobj(source, stream)
    (location / "inputs.json").write_text((folder / "inputs.json").read_text(encoding="utf-8"))


def cache_key(kind: str, inputs: dict[str, Any]) -> str:
    text = json.dumps({"kind": kind, "version": CACHE_VERSION, "inputs": inputs}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ArtefactCache:
    """Artefacts every trial of a sweep would otherwise recompute: the source model's held-out bits per byte, the
    trained target tokenizer and a trained helper, each in ``root/<kind>/<key>`` where the key hashes exactly the
    inputs that determine it (written next to it as ``inputs.json``).

    An entry is built in a private temporary folder and renamed into place; ``rename`` of a folder onto an existing
    one fails, so when two trials race one wins and the other drops its copy and reads the winner's. Every reader,
    the builder included, loads the artefact from the entry, so a trial that reused it gets the same bytes as the
    trial that built it. ``on_event(kind, status, key)`` is told whether each artefact was computed or reused.

    ``root`` may be a storage URI: an entry is then complete once its ``inputs.json`` object exists (uploaded
    last, after the artefact's files); it is built locally, uploaded, and read from a local copy. Two trials that
    race both upload the same bytes (the key fixes the inputs), so either copy is the entry.
    """

    root: Path | str
    on_event: Callable[[str, str, str], None] | None = None
    events: dict[str, str] = field(default_factory=dict)
    _source_model: dict[str, Any] | None = field(default=None, repr=False)

    def entry(self, kind: str, inputs: dict[str, Any], build: Callable[[Path], None]) -> Path:
        """The entry folder for ``inputs``, built with ``build(folder)`` if it is not there yet."""
        key = cache_key(kind, inputs)
        location = locate(self.root, field="sweep cache") / kind / key
        if location.local is None:
            return self._remote_entry(kind, key, location, inputs, build)
        final = location.local
        status = REUSED
        if not final.is_dir():
            status = COMPUTED
            final.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", dir=final.parent))
            try:
                build(staging)
                (staging / "inputs.json").write_text(json.dumps(inputs, indent=2, sort_keys=True), encoding="utf-8")
                os.rename(staging, final)
            except OSError:
                if not final.is_dir():  # not a lost race: a real failure
                    raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        self._tell(kind, status, key)
        return final

    def _tell(self, kind: str, status: str, key: str) -> None:
        self.events[kind] = status
        if self.on_event is not None:
            self.on_event(kind, status, key)

    def _remote_entry(self, kind: str, key: str, location: StorageLocation, inputs: dict[str, Any],
                      build: Callable[[Path], None]) -> Path:
        """The entry in object storage, used from a local copy (``local_mirror``) on this machine."""
        copy = local_mirror(location)
        stored = (location / "inputs.json").is_file()
        if stored and (copy / "inputs.json").is_file():
            self._tell(kind, REUSED, key)
            return copy
        copy.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", dir=copy.parent))
        try:
            if stored:
                location.download(staging)
            else:
                build(staging)
                (staging / "inputs.json").write_text(json.dumps(inputs, indent=2, sort_keys=True), encoding="utf-8")
                _upload_entry(staging, location)
            os.rename(staging, copy)  # a copy already there (another trial's) holds the same bytes: the key says so
        except OSError:
            if not (copy / "inputs.json").is_file():  # not a lost race between two trials of this machine
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        status = REUSED if stored else COMPUTED
        self._tell(kind, status, key)
        return copy

    def source_model(self, config: ExperimentConfig, inputs) -> dict[str, Any]:
        """The source model's identity, hashed once per cache (a 135M model's files take a second or two)."""
        if self._source_model is None:
            self._source_model = source_model_identity(config, inputs.source_model)
        return self._source_model

    def source_bits_per_byte(self, config: ExperimentConfig, inputs,
                             compute: Callable[[], dict[str, float]]) -> dict[str, float]:
        def build(folder: Path) -> None:
            (folder / "bits_per_byte.json").write_text(json.dumps(compute(), sort_keys=True), encoding="utf-8")

        entry = self.entry("source_bpb", source_bpb_inputs(config, inputs, self.source_model(config, inputs)), build)
        return json.loads((entry / "bits_per_byte.json").read_text(encoding="utf-8"))

    def trained_tokenizer(self, config: ExperimentConfig, inputs, train: Callable[[Path], Any]):
        """``train(folder)`` trains and saves the tokenizer into a folder; returns it loaded from the entry."""
        from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

        key_inputs = tokenizer_inputs(config, inputs, self.source_model(config, inputs))
        entry = self.entry("tokenizer", key_inputs, lambda folder: train(folder / "tokenizer"))
        return load_pretrained_tokenizer(str(entry / "tokenizer"))

    def corpus_expectations(self, config: ExperimentConfig, inputs,
                            compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The corpus expectation suite's results (JSON), validated once per sweep for the same corpora and bounds."""
        def build(folder: Path) -> None:
            (folder / "expectations.json").write_text(json.dumps(compute(), sort_keys=True), encoding="utf-8")

        entry = self.entry("corpus_expectations", expectation_inputs(config, inputs), build)
        return json.loads((entry / "expectations.json").read_text(encoding="utf-8"))

    def helper(self, config: ExperimentConfig, inputs, adapted_tokenizer_sha256: str, build: Callable[[], Any]):
        """The helper ``build()`` makes, from the entry when it is a trained (fastText) one. The run asks only when
        one of its methods uses a helper."""
        spec = (config.init.helper or "").strip()
        if not (spec == "fasttext" or spec.startswith("fasttext:")):
            return build()  # none, or one that is read (a model, a vectors file) rather than trained
        from safetensors.torch import load_file, save_file

        from vocadapt.components.helpers import TokenVectors

        def store(folder: Path) -> None:
            vectors = build()
            save_file({"vectors": vectors.vectors.contiguous(), "known": vectors.known.contiguous()},
                      str(folder / "vectors.safetensors"))
            (folder / "helper.json").write_text(json.dumps({"kind": vectors.kind,
                                                            "description": vectors.description}), encoding="utf-8")

        entry = self.entry("helper", helper_inputs(config, inputs, adapted_tokenizer_sha256), store)
        tensors = load_file(str(entry / "vectors.safetensors"))
        meta = json.loads((entry / "helper.json").read_text(encoding="utf-8"))
        return TokenVectors(tensors["vectors"], tensors["known"], meta["kind"], meta["description"])
