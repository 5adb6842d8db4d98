"""Checkpoints as safetensors files, plus what a resumed run needs."""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file, save_file


def save_params(path: str, params: dict) -> None:
    save_file({k: np.asarray(v, dtype=np.float32) for k, v in params.items()}, path)


def load_params(path: str) -> dict:
    return {k: jnp.asarray(v) for k, v in load_file(path).items()}


def save_checkpoint(directory: str, trainable: dict, opt_state, state: dict, trainable_file: str) -> None:
    """Weights, optimizer state and trainer state; written under a temporary name, then renamed."""
    tmp = directory + ".partial"
    os.makedirs(tmp, exist_ok=True)
    save_params(os.path.join(tmp, trainable_file), trainable)
    leaves = jax.tree_util.tree_leaves(opt_state)
    save_file({f"opt.{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}, os.path.join(tmp, "optimizer.safetensors"))
    with open(os.path.join(tmp, "trainer_state.json"), "w") as f:
        json.dump(state, f)
    os.replace(tmp, directory)


def load_checkpoint(directory: str, opt_state_template, trainable_file: str):
    trainable = load_params(os.path.join(directory, trainable_file))
    saved = load_file(os.path.join(directory, "optimizer.safetensors"))
    leaves, treedef = jax.tree_util.tree_flatten(opt_state_template)
    restored = [jnp.asarray(saved[f"opt.{i}"], dtype=leaf.dtype) for i, leaf in enumerate(leaves)]
    with open(os.path.join(directory, "trainer_state.json")) as f:
        state = json.load(f)
    return trainable, jax.tree_util.tree_unflatten(treedef, restored), state
