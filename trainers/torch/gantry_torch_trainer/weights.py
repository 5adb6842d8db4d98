"""Base weights from the host's model directory, and the trainer's weight files.

Base weights are read only from $GANTRY_MODEL_DIR/<hf_repo> (installed there ahead of time, e.g.
by install_model.py); nothing is ever downloaded from a hub at run time.
"""
from __future__ import annotations

import os

# Before transformers is imported: it must not reach for a hub, even for a file it could not find.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def base_model_dir(repo: str) -> str:
    root = os.environ.get("GANTRY_MODEL_DIR")
    if not root:
        raise FileNotFoundError("GANTRY_MODEL_DIR is not set: the trainer reads base weights only from the model directory")
    local = os.path.join(root, repo)
    if not os.path.isfile(os.path.join(local, "config.json")):
        raise FileNotFoundError(f"the base weights of {repo} are not installed in the model directory ({local})")
    return local


def load_base(repo: str, dtype: torch.dtype, device: str):
    return AutoModelForCausalLM.from_pretrained(base_model_dir(repo), dtype=dtype, local_files_only=True).to(device)


def weights_of(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's tensors as a safetensors file holds them: on the CPU, each stored once.

    A tied tensor (SmolLM2's lm_head.weight is its embedding matrix) is kept under its first name
    only, as save_pretrained writes it; safetensors refuses tensors that share memory.
    """
    out, seen = {}, set()
    for name, tensor in module.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out[name] = tensor.detach().to("cpu", copy=True).contiguous()
    return out


def load_weights(module: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Loads a weights_of() file: every tensor but the tied copies weights_of() left out must be there."""
    missing, unexpected = module.load_state_dict(tensors, strict=False)
    state = module.state_dict()
    loaded = {state[k].data_ptr() for k in tensors if k in state}
    untied = [k for k in missing if state[k].data_ptr() not in loaded]
    if untied or unexpected:
        raise ValueError(f"the weights do not match the model: missing {untied[:5]}, unexpected {unexpected[:5]}")
