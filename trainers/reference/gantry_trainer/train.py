"""The training loop: SFT or DPO, LoRA or full, evaluations, early stopping,
checkpoints, resume and cancellation. Configuration comes as one JSON file
(see README.md beside this package); progress goes out as protocol lines."""
from __future__ import annotations

import json
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import checkpoint as ckpt
from .data import batches, epoch_order, load_rows, trained_tokens
from .lora import init_lora, make_linear, merge
from .losses import dpo_loss, sequence_length, sequence_logprob, sft_loss
from .model import ModelConfig, forward, init_params
from .protocol import emit
from .run_state import Cancelled, RunState
from .schedule import step_plan


def preference_options(cfg: dict) -> dict:
    """The DPO variant options of the job's config (dpo_loss's keyword arguments)."""
    simpo = cfg.get("simpo_gamma")
    return {
        "normalize": bool(cfg.get("dpo_normalize_logratios_by_length", False)),
        "reference_free": bool(cfg.get("dpo_reference_free", False)),
        "rpo_alpha": float(cfg.get("rpo_alpha") or 0.0),
        "simpo_gamma": None if simpo is None else float(simpo),
    }


def run(cfg: dict) -> None:
    mc = ModelConfig.from_dict(cfg["model"])
    method, kind = cfg["training_method"], cfg["training_type"]
    if method not in ("sft", "dpo"):
        raise ValueError(f"unknown training_method {method!r}")
    if kind not in ("lora", "full"):
        raise ValueError(f"unknown training_type {kind!r}")
    seed = int(cfg.get("seed", 0))
    seq_len = min(int(cfg.get("max_seq_length", mc.max_seq_len)), mc.max_seq_len)
    batch_size = int(cfg["batch_size"])
    n_epochs = int(cfg["n_epochs"])

    base = ckpt.load_params(cfg["base_weights"]) if cfg.get("base_weights") else init_params(mc, int(cfg.get("base_seed", 0)))
    lora_cfg = cfg.get("lora") or {}
    scale = float(lora_cfg.get("alpha", 16)) / float(lora_cfg.get("r", 8)) if kind == "lora" else 0.0
    dropout = float(lora_cfg.get("dropout", 0.0)) if kind == "lora" else 0.0
    if kind == "lora":
        trainable = init_lora(mc, list(lora_cfg.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"])), int(lora_cfg.get("r", 8)), seed)
        trainable_file = "adapter.safetensors"
    else:
        trainable = dict(base)
        trainable_file = "model.safetensors"
    if cfg.get("init_from"):
        # from_checkpoint: continue from a previous job's weights (a fresh optimizer and schedule).
        loaded = ckpt.load_params(os.path.join(cfg["init_from"], trainable_file))
        if set(loaded) != set(trainable) or any(loaded[k].shape != trainable[k].shape for k in trainable):
            raise ValueError("init_from: the checkpoint's tensors do not match this model and training type")
        trainable = loaded
        if kind == "full":
            base = dict(trainable)
    # DPO's reference policy: the model before this run (with a continued adapter merged in).
    reference = merge(base, trainable, scale) if kind == "lora" and cfg.get("init_from") else base

    def logits_of(tr, ids, key):
        if kind == "lora":
            return forward(base, ids, mc, make_linear(base, tr, scale, dropout, key))
        return forward(tr, ids, mc, make_linear(tr, None, 0.0, 0.0, None))

    def ref_logits(ids):
        return forward(reference, ids, mc, make_linear(reference, None, 0.0, 0.0, None))

    beta = float(cfg.get("dpo_beta", 0.1))
    preference = preference_options(cfg)
    needs_reference = not (preference["reference_free"] or preference["simpo_gamma"] is not None)

    def loss_fn(tr, batch, key):
        if method == "sft":
            logits = logits_of(tr, batch["ids"], key)
            return sft_loss(logits, batch["ids"], batch["mask"], batch["weight"]), jnp.float32(0)
        ids = jnp.concatenate([batch["chosen_ids"], batch["rejected_ids"]])
        mask = jnp.concatenate([batch["chosen_mask"], batch["rejected_mask"]])
        n = batch["chosen_ids"].shape[0]
        policy = sequence_logprob(logits_of(tr, ids, key), ids, mask)
        # Reference-free variants skip the reference policy's forward pass.
        ref = jax.lax.stop_gradient(sequence_logprob(ref_logits(ids), ids, mask)) if needs_reference else jnp.zeros_like(policy)
        lengths = sequence_length(mask)
        return dpo_loss(
            policy[:n], policy[n:], ref[:n], ref[n:], beta, batch["weight"],
            len_chosen=lengths[:n], len_rejected=lengths[n:], **preference,
        )

    # AdamW with decoupled weight decay; the learning rate is applied per step
    # from the schedule, so one compiled step serves every step.
    opt = optax.chain(
        optax.clip_by_global_norm(float(cfg.get("max_grad_norm", 1.0)) or float("inf")),
        optax.scale_by_adam(),
        optax.add_decayed_weights(float(cfg.get("weight_decay", 0.0))),
    )
    opt_state = opt.init(trainable)

    @jax.jit
    def train_step(tr, opt_state, batch, key, lr):
        (loss, margin), grads = jax.value_and_grad(loss_fn, has_aux=True)(tr, batch, key)
        updates, opt_state = opt.update(grads, opt_state, tr)
        tr = jax.tree_util.tree_map(lambda p, u: p - lr * u, tr, updates)
        return tr, opt_state, loss, margin, optax.global_norm(grads)

    @jax.jit
    def eval_batch(tr, batch):
        loss, _ = loss_fn(tr, batch, None)
        return loss

    train_rows = load_rows(cfg["train_file"])
    eval_rows = load_rows(cfg["validation_file"]) if cfg.get("validation_file") else []
    sp = step_plan(cfg, len(train_rows), bool(eval_rows))
    output_dir = cfg["output_dir"]
    os.makedirs(output_dir, exist_ok=True)

    state = RunState()
    resumed_from = None
    if cfg.get("resume_from"):
        trainable, opt_state, saved = ckpt.load_checkpoint(cfg["resume_from"], opt_state, trainable_file)
        state = RunState(**saved)
        resumed_from = state.step
    best_trainable = trainable

    cancelled = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: cancelled.__setitem__("flag", True))

    emit("start", total_steps=sp.total_steps, steps_per_epoch=sp.steps_per_epoch, n_epochs=n_epochs,
         trainable_params=int(sum(np.prod(v.shape) for v in trainable.values())), resumed_from_step=resumed_from)

    def evaluate() -> float:
        total, count = 0.0, 0
        for b in batches(eval_rows, batch_size, seq_len, method, np.arange(len(eval_rows))):
            real = int((b["weight"] > 0).sum())
            total += float(eval_batch(trainable, {k: jnp.asarray(v) for k, v in b.items()})) * real
            count += real
        return total / max(count, 1)

    key = jax.random.PRNGKey(seed)
    early_stopped = False
    for epoch in range(state.epochs_done, n_epochs):
        order = epoch_order(len(train_rows), seed, epoch)
        for batch in batches(train_rows, batch_size, seq_len, method, order):
            if cancelled["flag"]:
                emit("cancelled", step=state.step)
                raise Cancelled()
            lr = sp.lr(state.step)
            step_key = jax.random.fold_in(key, state.step)
            trainable, opt_state, loss, margin, gnorm = train_step(
                trainable, opt_state, {k: jnp.asarray(v) for k, v in batch.items()}, step_key, jnp.float32(lr))
            state.step += 1
            fields = dict(step=state.step, epoch=epoch + 1, loss=float(loss), lr=lr, grad_norm=float(gnorm),
                          tokens=trained_tokens(batch, method))
            if method == "dpo":
                fields["reward_margin"] = float(margin)
            emit("step", **fields)

            if state.step in sp.eval_steps:
                eval_loss = evaluate()
                emit("eval", step=state.step, eval_loss=eval_loss)
                improved, stop = state.record_eval(eval_loss, sp.early_stopping)
                if improved:
                    best_trainable = trainable
                if stop:
                    early_stopped = True
                    emit("early_stopped", step=state.step, best_step=state.best_step, best_metric=state.best_metric)
                    break
        if early_stopped:
            break
        state.epochs_done = epoch + 1
        emit("epoch", epoch=state.epochs_done, step=state.step)
        if state.epochs_done in sp.checkpoint_epochs:
            path = os.path.join(output_dir, "checkpoints", f"step-{state.step}")
            ckpt.save_checkpoint(path, trainable, opt_state, state.__dict__, trainable_file)
            emit("checkpoint", step=state.step, epoch=state.epochs_done, path=path, file=trainable_file)

    # With early stopping the best evaluated weights are the result; otherwise the last.
    final = best_trainable if early_stopped else trainable
    final_dir = os.path.join(output_dir, "final")
    os.makedirs(final_dir, exist_ok=True)
    files = []
    if kind == "lora":
        ckpt.save_params(os.path.join(final_dir, "adapter.safetensors"), final)
        ckpt.save_params(os.path.join(final_dir, "model.safetensors"), merge(base, final, scale))
        files = ["adapter.safetensors", "model.safetensors"]
    else:
        ckpt.save_params(os.path.join(final_dir, "model.safetensors"), final)
        files = ["model.safetensors"]
    with open(os.path.join(final_dir, "config.json"), "w") as f:
        json.dump({"model": cfg["model"], "training_type": kind, "training_method": method,
                   "lora": {"r": lora_cfg.get("r"), "alpha": lora_cfg.get("alpha"),
                            "target_modules": lora_cfg.get("target_modules")} if kind == "lora" else None}, f)
    files.append("config.json")
    done = dict(step=state.step, output_dir=final_dir, files=files, early_stopped=early_stopped)
    if state.best_step is not None:
        done.update(best_step=state.best_step, best_metric=state.best_metric)
    emit("done", **done)
