"""The vLLM half of the serve check's decoding, as a process: ``vllm_decode_probe.py --serve`` run by the serving
environment's Python, one per serving Python in this process, started on the first request and kept for the later
ones (the probe forks a child per request after importing vLLM once); and the cache of its answers, keyed by the
tokenizer files, the probe cases, the probe script and the serving environment. ``serve_check.py`` compares the
answers with transformers'.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

VLLM_TIMEOUT_S = 600
PROBE_SCRIPT = Path(__file__).with_name("vllm_decode_probe.py")
# Files that decide how a checkpoint tokenizes and decodes (the vLLM answer's cache key).
TOKENIZER_FILE_PREFIXES = ("tokenizer", "special_tokens_map", "added_tokens", "vocab", "merges", "config",
                           "generation_config", "chat_template")


def _cache_key_bytes(path: Path) -> bytes:
    """A file's bytes as the vLLM answer's cache key sees them: config.json without vocadapt's own records
    (``vocadapt_init`` holds the initialiser's timings, different on every run, and nothing vLLM reads), so the same
    tokenizer and config meet their cached answer again."""
    if path.name != "config.json":
        return path.read_bytes()
    config = json.loads(path.read_text(encoding="utf-8"))
    return json.dumps({key: value for key, value in config.items() if not key.startswith("vocadapt")},
                      sort_keys=True).encode()


def vllm_cache_file(model_dir: Path, cases, python: Path) -> Path:
    """Where vLLM's answer for this tokenizer is kept: it is a function of the tokenizer files, the probe cases, the
    probe script and the serving environment only, and starting vLLM's Python costs about a minute on 2 cores."""
    import hashlib

    from vocadapt.platform.assets.embedded import vocadapt_home

    digest = hashlib.sha256()
    for path in sorted(Path(model_dir).iterdir()):
        if path.is_file() and path.suffix != ".safetensors" and path.name.startswith(TOKENIZER_FILE_PREFIXES):
            digest.update(path.name.encode() + b"\0" + _cache_key_bytes(path))
    python_file = Path(python)
    stamp = python_file.parent.parent / "pyvenv.cfg"
    digest.update(json.dumps([cases, str(python_file.resolve()), stamp.stat().st_mtime_ns if stamp.is_file() else 0])
                  .encode() + PROBE_SCRIPT.read_bytes())
    return vocadapt_home() / "serve-check-cache" / f"{digest.hexdigest()}.json"


class VllmProbe:
    """``vllm_decode_probe.py --serve`` in the serving environment, started on the first request and kept for the
    process's later ones (one per serving Python): a run that registers several models (a sweep, the family twins'
    adapts in one process) imports vLLM once, not once per model. Each request is one JSON line each way; a probe
    that dies or passes ``VLLM_TIMEOUT_S`` is dropped and the next request starts a fresh one."""

    _running: dict[str, VllmProbe] = {}
    _lock = threading.Lock()

    def __init__(self, python: Path) -> None:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # nothing of this venv leaks
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [str(python), str(PROBE_SCRIPT), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, encoding="utf-8", start_new_session=True,  # its forked children too
            env={**env, "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"})

    @classmethod
    def ask(cls, python: Path, request: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """(vLLM's report, "") or (None, what went wrong: the probe's error or its stderr)."""
        with cls._lock:
            probe = cls._running.get(str(python))
            if probe is None or probe.process.poll() is not None:
                probe = cls._running[str(python)] = cls(python)
            answer = probe._exchange(json.dumps(request))
            if answer is None:  # dead or stuck: the next request starts another
                cls._running.pop(str(python), None)
                stuck = probe.process.poll() is None
                text = probe.close()
                return None, (f"no answer in {VLLM_TIMEOUT_S} s; " if stuck else "") + (
                    text or "the vLLM probe stopped without a message")
        report = json.loads(answer)
        return (None, report["error"]) if "error" in report else (report, "")

    def _exchange(self, line: str) -> str | None:
        import select

        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], VLLM_TIMEOUT_S)
            answer = self.process.stdout.readline() if ready else ""
            while answer and not answer.startswith("{"):  # a line some library printed: not the answer
                answer = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            return None
        return answer or None

    def close(self) -> str:
        """Stop the probe (it ends when its stdin closes; killed with its children after 10 s); returns what it
        wrote on stderr."""
        import signal

        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.stderr.seek(0)
        text = self.stderr.read().decode("utf-8", errors="replace")
        self.stderr.close()
        return text

    @classmethod
    def close_all(cls) -> None:
        with cls._lock:
            while cls._running:
                cls._running.popitem()[1].close()


atexit.register(VllmProbe.close_all)
