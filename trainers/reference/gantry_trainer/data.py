"""Tokenized datasets (JSONL of token ids and loss masks) into fixed-shape batches.

SFT rows:  {"input_ids": [...], "loss_mask": [...], "weight"?: number}
DPO rows:  {"chosen_ids", "chosen_mask", "rejected_ids", "rejected_mask"}
Masks mark the tokens that are trained on (the prompt is masked out unless
train_on_inputs). Every batch has the same shape, so JAX compiles once;
padding rows carry weight 0.
"""
from __future__ import annotations

import json

import numpy as np


def load_rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise ValueError(f"{path} holds no rows")
    return rows


def _pad(seqs: list[list[int]], length: int) -> np.ndarray:
    out = np.zeros((len(seqs), length), dtype=np.int32)
    for i, seq in enumerate(seqs):
        s = seq[:length]
        out[i, : len(s)] = s
    return out


def batches(rows: list[dict], batch_size: int, seq_len: int, method: str, order: np.ndarray):
    """Yields dicts of arrays, `batch_size` rows each, in `order`."""
    for start in range(0, len(order), batch_size):
        chosen = [rows[i] for i in order[start : start + batch_size]]
        n_real = len(chosen)
        chosen += [None] * (batch_size - n_real)  # padding rows
        weight = np.array([float(r.get("weight", 1.0)) if r else 0.0 for r in chosen], dtype=np.float32)
        if method == "sft":
            yield {
                "ids": _pad([r["input_ids"] if r else [] for r in chosen], seq_len),
                "mask": _pad([r["loss_mask"] if r else [] for r in chosen], seq_len),
                "weight": weight,
            }
        else:
            yield {
                "chosen_ids": _pad([r["chosen_ids"] if r else [] for r in chosen], seq_len),
                "chosen_mask": _pad([r["chosen_mask"] if r else [] for r in chosen], seq_len),
                "rejected_ids": _pad([r["rejected_ids"] if r else [] for r in chosen], seq_len),
                "rejected_mask": _pad([r["rejected_mask"] if r else [] for r in chosen], seq_len),
                "weight": weight,
            }


def epoch_order(n_rows: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffle of one epoch, a function of (seed, epoch) alone: a resumed run sees the same order."""
    return np.random.default_rng([seed, epoch]).permutation(n_rows)


def trained_tokens(batch: dict, method: str) -> int:
    if method == "sft":
        return int((batch["mask"][:, 1:] * (batch["weight"][:, None] > 0)).sum())
    return int(batch["chosen_mask"][:, 1:].sum() + batch["rejected_mask"][:, 1:].sum())
