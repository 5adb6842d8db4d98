"""A small decoder-only transformer as pure functions over a dict of arrays.

Parameters are a flat dict name -> array (the names are the safetensors keys),
so weights, LoRA adapters and merges need no framework beyond jax.numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]

# Linear layers LoRA may adapt, by the names used in target_modules.
LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    max_seq_len: int

    @staticmethod
    def from_dict(d: dict) -> ModelConfig:
        return ModelConfig(**{k: int(d[k]) for k in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len")})


def linear_shapes(cfg: ModelConfig) -> dict[str, tuple[int, int]]:
    """(in, out) of every adaptable linear layer, by parameter name."""
    shapes = {}
    for i in range(cfg.n_layers):
        for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"layers.{i}.{m}"] = (cfg.d_model, cfg.d_model)
        shapes[f"layers.{i}.up_proj"] = (cfg.d_model, cfg.d_ff)
        shapes[f"layers.{i}.down_proj"] = (cfg.d_ff, cfg.d_model)
    return shapes


def init_params(cfg: ModelConfig, seed: int) -> Params:
    """Deterministic initial weights: the same seed gives the same base model."""
    rng = np.random.default_rng(seed)
    p: dict[str, np.ndarray] = {
        "embed": rng.normal(0, 0.02, (cfg.vocab_size, cfg.d_model)),
        "pos": rng.normal(0, 0.01, (cfg.max_seq_len, cfg.d_model)),
        "final_norm.g": np.ones(cfg.d_model),
        "final_norm.b": np.zeros(cfg.d_model),
        "lm_head": rng.normal(0, 0.02, (cfg.d_model, cfg.vocab_size)),
    }
    for name, (fan_in, fan_out) in linear_shapes(cfg).items():
        p[name] = rng.normal(0, fan_in**-0.5, (fan_in, fan_out))
    for i in range(cfg.n_layers):
        for n in ("attn_norm", "mlp_norm"):
            p[f"layers.{i}.{n}.g"] = np.ones(cfg.d_model)
            p[f"layers.{i}.{n}.b"] = np.zeros(cfg.d_model)
        p[f"layers.{i}.up_bias"] = np.zeros(cfg.d_ff)
        p[f"layers.{i}.down_bias"] = np.zeros(cfg.d_model)
    return {k: jnp.asarray(v, dtype=jnp.float32) for k, v in p.items()}


def _layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * g + b


def forward(params: Params, ids: jax.Array, cfg: ModelConfig, linear) -> jax.Array:
    """Logits [batch, seq, vocab] for token ids [batch, seq].

    `linear(name, x)` applies the linear layer `name` (the base weight, plus a
    LoRA update when one is attached), so LoRA stays out of the model code.
    """
    _, t = ids.shape
    x = params["embed"][ids] + params["pos"][:t]
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    hd = cfg.d_model // cfg.n_heads
    for i in range(cfg.n_layers):
        pre = f"layers.{i}"
        h = _layer_norm(x, params[f"{pre}.attn_norm.g"], params[f"{pre}.attn_norm.b"])

        def heads(name, pre=pre, h=h):
            y = linear(f"{pre}.{name}", h)
            return y.reshape(y.shape[0], t, cfg.n_heads, hd).transpose(0, 2, 1, 3)

        q, k, v = heads("q_proj"), heads("k_proj"), heads("v_proj")
        att = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(hd)
        att = jnp.where(causal, att, -1e9)
        att = jax.nn.softmax(att, axis=-1)
        out = (att @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + linear(f"{pre}.o_proj", out)
        h = _layer_norm(x, params[f"{pre}.mlp_norm.g"], params[f"{pre}.mlp_norm.b"])
        h = jax.nn.gelu(linear(f"{pre}.up_proj", h) + params[f"{pre}.up_bias"])
        x = x + linear(f"{pre}.down_proj", h) + params[f"{pre}.down_bias"]
    x = _layer_norm(x, params["final_norm.g"], params["final_norm.b"])
    return x @ params["lm_head"]
