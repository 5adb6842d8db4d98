"""The training losses on a causal LM's logits: SFT and the spec's DPO variants.

They compute what the reference trainer's losses.py computes. Token log-probabilities come from
one fused cross entropy over the logits as they are (the targets shifted instead of the logits),
so no second batch x length x vocabulary tensor is made for a log-softmax.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(ids[:, t+1] | ids[:, :t+1]) for t < T-1: shape [batch, T-1]."""
    batch, length, vocab = logits.shape
    # The prediction at position t is scored against the token at t+1; the last position has none.
    targets = F.pad(ids[:, 1:], (0, 1), value=-100)
    nll = F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1), ignore_index=-100, reduction="none")
    return -nll.view(batch, length)[:, :-1]


def sft_loss(logits, ids, mask, weight):
    """Mean negative log-likelihood of the masked (trained) tokens, each row weighted."""
    m = mask[:, 1:].float() * weight[:, None]
    return -(token_logprobs(logits, ids) * m).sum() / m.sum().clamp(min=1.0)


def sequence_logprob(logits, ids, mask):
    return (token_logprobs(logits, ids) * mask[:, 1:].float()).sum(-1)


def dpo_loss(policy, ref, lengths, n, beta, weight, normalize, reference_free, rpo_alpha, simpo_gamma):
    """The spec's DPO variants, as the reference trainer's losses.dpo_loss computes them.

    `policy`/`ref` hold the chosen rows' sequence log-probabilities, then the rejected rows'
    (`n` each). Returns (loss, the batch's mean reward margin).
    """
    simpo = simpo_gamma is not None
    if reference_free or simpo:
        ref = torch.zeros_like(policy)
    pc, pr, rc, rr = policy[:n], policy[n:], ref[:n], ref[n:]
    if normalize or simpo:
        pc, pr, rc, rr = pc / lengths[:n], pr / lengths[n:], rc / lengths[:n], rr / lengths[n:]
    margin = beta * ((pc - rc) - (pr - rr)) - (simpo_gamma if simpo else 0.0)
    total = weight.sum().clamp(min=1.0)
    loss = -(weight * F.logsigmoid(margin)).sum() / total
    if rpo_alpha:
        loss = loss + rpo_alpha * (weight * (-policy[:n] / lengths[:n])).sum() / total
    return loss, float((weight * margin.detach()).sum() / total)
