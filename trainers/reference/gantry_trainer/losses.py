"""Training objectives: supervised next-token loss and DPO (with its variants)."""
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


def sequence_length(mask: jax.Array) -> jax.Array:
    """Tokens scored per row (at least 1)."""
    return jnp.maximum(mask[:, 1:].astype(jnp.float32).sum(-1), 1.0)


def dpo_loss(
    policy_chosen,
    policy_rejected,
    ref_chosen,
    ref_rejected,
    beta: float,
    weight,
    *,
    len_chosen=1.0,
    len_rejected=1.0,
    normalize: bool = False,
    reference_free: bool = False,
    rpo_alpha: float = 0.0,
    simpo_gamma: float | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Direct Preference Optimization: -log sigmoid(beta * (policy margin - reference margin)).

    The spec's variants: `normalize` divides each log-probability by its answer's token count;
    `reference_free` takes the reference policy's log-probabilities as 0; `simpo_gamma` is SimPO
    (length-normalized and reference-free, with the margin gamma subtracted: beta * (mean chosen
    log-prob - mean rejected log-prob) - gamma); `rpo_alpha` is RPO, adding alpha times the chosen
    answer's per-token negative log-likelihood.

    Returns the weighted mean loss and the weighted mean reward margin (how much more the policy
    prefers the chosen answer than the reference does). Rows of weight 0 (batch padding) count for nothing.
    """
    pc, pr, rc, rr = policy_chosen, policy_rejected, ref_chosen, ref_rejected
    simpo = simpo_gamma is not None
    if normalize or simpo:
        pc, pr, rc, rr = pc / len_chosen, pr / len_rejected, rc / len_chosen, rr / len_rejected
    if reference_free or simpo:
        rc, rr = 0.0, 0.0
    margin = beta * ((pc - rc) - (pr - rr)) - (simpo_gamma if simpo else 0.0)
    total = jnp.maximum(weight.sum(), 1.0)
    loss = -(weight * jax.nn.log_sigmoid(margin)).sum() / total
    if rpo_alpha:
        loss = loss + rpo_alpha * (weight * (-policy_chosen / len_chosen)).sum() / total
    return loss, (weight * margin).sum() / total
