"""The trainer line protocol: one JSON object per line on stdout.

  {"event": "start", "total_steps", "steps_per_epoch", "n_epochs", "trainable_params", "resumed_from_step"}
  {"event": "step", "step", "epoch", "loss", "lr", "grad_norm", "tokens"[, "reward_margin"]}
  {"event": "eval", "step", "eval_loss"}
  {"event": "epoch", "epoch", "step"}  (an epoch completed)
  {"event": "checkpoint", "step", "epoch", "path", "file"}
  {"event": "early_stopped", "step", "best_step", "best_metric"}
  {"event": "cancelled", "step"}
  {"event": "done", "step", "output_dir", "files", "early_stopped"[, "best_step", "best_metric"]}
  {"event": "error", "message"}

Steps count from 1. Anything else the trainer prints goes to stderr.
"""
from __future__ import annotations

import json
import math
import sys


def emit(event: str, **fields) -> None:
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fields.items()}
    sys.stdout.write(json.dumps({"event": event, **clean}) + "\n")
    sys.stdout.flush()
