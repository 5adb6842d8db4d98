"""Training objectives: supervised next-token loss and DPO."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def token_logprobs(logits: jax.Array, ids: jax.Array) -> jax.Array:
    """log p(ids[t+1] | ids[:t+1]) for every position, shape [batch, seq-1]."""
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]


def sft_loss(logits: jax.Array, ids: jax.Array, mask: jax.Array, weight: jax.Array) -> jax.Array:
    """Mean negative log-likelihood over the trained tokens (mask), each row scaled by its sample weight."""
    m = mask[:, 1:].astype(jnp.float32) * weight[:, None]
    return -(token_logprobs(logits, ids) * m).sum() / jnp.maximum(m.sum(), 1.0)


def sequence_logprob(logits: jax.Array, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return (token_logprobs(logits, ids) * mask[:, 1:].astype(jnp.float32)).sum(-1)


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float, weight) -> tuple[jax.Array, jax.Array]:
    """Direct Preference Optimization: -log sigmoid(beta * (policy margin - reference margin)).

    Returns the weighted mean loss and the weighted mean reward margin (how
    much more the policy prefers the chosen answer than the reference does).
    Rows of weight 0 (batch padding) count for nothing.
    """
    margin = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
    total = jnp.maximum(weight.sum(), 1.0)
    return -(weight * jax.nn.log_sigmoid(margin)).sum() / total, (weight * margin).sum() / total
