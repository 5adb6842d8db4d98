"""Low-rank adapters: W x + (alpha / r) * B(A(dropout(x))), base weights frozen."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .model import LINEAR_MODULES, ModelConfig, Params, linear_shapes


def target_layers(cfg: ModelConfig, target_modules: list[str]) -> list[str]:
    unknown = sorted(set(target_modules) - set(LINEAR_MODULES))
    if unknown:
        raise ValueError(f"unknown LoRA target modules {unknown}; this model has {list(LINEAR_MODULES)}")
    return [name for name in linear_shapes(cfg) if name.rsplit(".", 1)[1] in target_modules]


def init_lora(cfg: ModelConfig, target_modules: list[str], rank: int, seed: int) -> Params:
    """A starts small and random, B at zero: training starts exactly at the base model."""
    rng = np.random.default_rng(seed)
    shapes = linear_shapes(cfg)
    lora = {}
    for name in target_layers(cfg, target_modules):
        fan_in, fan_out = shapes[name]
        lora[f"{name}.lora_A"] = jnp.asarray(rng.normal(0, fan_in**-0.5, (fan_in, rank)), jnp.float32)
        lora[f"{name}.lora_B"] = jnp.zeros((rank, fan_out), jnp.float32)
    return lora


def make_linear(base: Params, lora: Params | None, scale: float, dropout: float, key: jax.Array | None):
    """The `linear` function the model calls, with or without adapters."""

    def linear(name: str, x: jax.Array) -> jax.Array:
        y = x @ base[name]
        if lora is not None and f"{name}.lora_A" in lora:
            xin = x
            if dropout > 0 and key is not None:
                keep = jax.random.bernoulli(jax.random.fold_in(key, hash(name) % (2**31)), 1 - dropout, x.shape)
                xin = jnp.where(keep, x / (1 - dropout), 0)
            y = y + scale * (xin @ lora[f"{name}.lora_A"] @ lora[f"{name}.lora_B"])
        return y

    return linear


def merge(base: Params, lora: Params, scale: float) -> Params:
    """The base model with the adapters folded in (the `merged` checkpoint)."""
    merged = dict(base)
    for key in lora:
        if key.endswith(".lora_A"):
            name = key[: -len(".lora_A")]
            merged[name] = base[name] + scale * (lora[key] @ lora[f"{name}.lora_B"])
    return merged
