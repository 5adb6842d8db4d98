"""Learning-rate schedules with warmup (the fine-tuning API's lr_scheduler)."""
from __future__ import annotations

import math


def learning_rate(step: int, total_steps: int, peak: float, warmup_steps: int, kind: str, min_lr_ratio: float, num_cycles: float) -> float:
    """Learning rate for optimizer step `step` (0-based).

    Linear warmup from 0 to `peak`, then linear or cosine decay towards
    `peak * min_lr_ratio`. `num_cycles` is the number of cosine periods over
    the decay (0.5: one half-wave, the usual shape).
    """
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    if kind == "linear":
        factor = 1.0 - progress
    elif kind == "cosine":
        factor = 0.5 * (1.0 + math.cos(math.pi * 2.0 * num_cycles * progress))
    else:
        raise ValueError(f"unknown lr scheduler {kind!r}")
    return peak * (min_lr_ratio + (1.0 - min_lr_ratio) * factor)


def milestones(count: int, total: int) -> set[int]:
    """`count` points spread evenly over 1..total, always including total (evals, checkpoints)."""
    if count <= 0 or total <= 0:
        return set()
    return {max(1, round(k * total / count)) for k in range(1, count + 1)}
