"""Learning-rate schedules with warmup (the fine-tuning API's lr_scheduler)."""
from __future__ import annotations

import math
from dataclasses import dataclass


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


@dataclass(frozen=True)
class StepPlan:
    """When a run steps, evaluates and checkpoints, from its configuration and row count."""

    steps_per_epoch: int
    total_steps: int
    warmup_steps: int
    eval_steps: set
    checkpoint_epochs: set
    #: the early_stopping configuration, with "enabled" false when there are no evaluations
    early_stopping: dict
    peak_lr: float
    lr_scheduler: dict

    def lr(self, step: int) -> float:
        s = self.lr_scheduler
        return learning_rate(step, self.total_steps, self.peak_lr, self.warmup_steps, s.get("type", "linear"),
                             float(s.get("min_lr_ratio", 0.0)), float(s.get("num_cycles", 0.5)))


def step_plan(cfg: dict, n_train_rows: int, has_eval: bool) -> StepPlan:
    n_epochs = int(cfg["n_epochs"])
    steps_per_epoch = -(-n_train_rows // int(cfg["batch_size"]))
    total_steps = steps_per_epoch * n_epochs
    eval_steps = milestones(int(cfg.get("n_evals", 0)) if has_eval else 0, total_steps)
    es = dict(cfg.get("early_stopping") or {})
    es["enabled"] = bool(es.get("enabled")) and bool(eval_steps)
    return StepPlan(
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        warmup_steps=int(float(cfg.get("warmup_ratio", 0.0)) * total_steps),
        eval_steps=eval_steps,
        checkpoint_epochs=milestones(int(cfg.get("n_checkpoints", 1)), n_epochs),
        early_stopping=es,
        peak_lr=float(cfg["learning_rate"]),
        lr_scheduler=cfg.get("lr_scheduler") or {},
    )
