"""One fine-tuning run of a Hugging Face causal LM: SFT or DPO, LoRA (peft) or full.

Configuration (the keys fine-tunes/trainer-config.ts writes): hf_repo, training_method,
training_type, lora {r, alpha, dropout, target_modules}, learning_rate, lr_scheduler,
warmup_ratio, max_grad_norm, weight_decay, n_epochs, batch_size, max_seq_length,
n_checkpoints, n_evals, early_stopping, dpo_beta, seed, train_file, validation_file,
output_dir, resume_from?, init_from?.

Base weights are read from $GANTRY_MODEL_DIR/<hf_repo> (weights.py); nothing is downloaded.
On CPU it uses every core this process may run on, unless OMP_NUM_THREADS says otherwise.

Output: checkpoints/step-<n>/ (the trainable weights, optimizer.pt, trainer_state.json) and
final/ = adapter.safetensors (LoRA: peft's state dict) + model.safetensors (the merged or fully
trained model, tied tensors once, as save_pretrained writes them) + config.json.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict

import numpy as np
import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file, save_file

from gantry_trainer.data import batches, epoch_order, load_rows, trained_tokens
from gantry_trainer.protocol import emit
from gantry_trainer.run_state import Cancelled, RunState
from gantry_trainer.schedule import step_plan

from .losses import dpo_loss, sequence_logprob, sft_loss
from .memory import needs_checkpointing
from .weights import load_base, load_weights, weights_of


def use_host_cores() -> None:
    """Intra-op threads = the cores this process may run on (an operator's OMP_NUM_THREADS wins)."""
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(len(os.sched_getaffinity(0)))


def load_lora(model, tensors: dict) -> None:
    result = set_peft_model_state_dict(model, tensors)
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"the adapter does not match this model: {result.unexpected_keys[:5]}")


def trimmed(batch: dict) -> dict:
    """The batch without its padding columns after the last trained token of any row.

    Rows come padded to max_seq_length (gantry_trainer.data); attention is causal, so no trained
    token reads a later column: the loss is exactly the same, and a step costs the batch's real
    length instead of max_seq_length (the SDKs' default max_seq_length is the model's context).
    """
    masks = [np.asarray(v) for k, v in batch.items() if k.endswith("mask")]
    used = np.logical_or.reduce([m.any(axis=0) for m in masks])
    end = int(np.nonzero(used)[0].max()) + 1 if used.any() else 1
    return {k: (np.asarray(v)[:, :end] if np.asarray(v).ndim == 2 else v) for k, v in batch.items()}


def run(cfg: dict) -> None:
    method, kind = cfg["training_method"], cfg["training_type"]
    if method not in ("sft", "dpo"):
        raise ValueError(f"unknown training_method {method!r}")
    if kind not in ("lora", "full"):
        raise ValueError(f"unknown training_type {kind!r}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        use_host_cores()
    torch.manual_seed(int(cfg.get("seed", 0)))
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    seq_len = int(cfg["max_seq_length"])
    batch_size = int(cfg["batch_size"])
    n_epochs = int(cfg["n_epochs"])
    max_grad_norm = float(cfg.get("max_grad_norm", 1.0))

    model = load_base(cfg["hf_repo"], dtype, device)
    # A DPO forward pass sees the chosen and the rejected rows together.
    rows_per_pass = batch_size * (2 if method == "dpo" else 1)
    checkpointing = needs_checkpointing(model.config, rows_per_pass, seq_len, dtype, device)
    print(f"activation checkpointing {'on' if checkpointing else 'off'}; {torch.get_num_threads()} threads on {device}",
          file=sys.stderr, flush=True)
    if checkpointing:
        model.activation_checkpointing_enable()
        # With frozen embeddings nothing entering a checkpointed layer needs a gradient; this makes
        # the embeddings' output need one, so the LoRA weights inside the layers get theirs.
        model.enable_input_require_grads()
    lora_cfg = cfg.get("lora") or {}

    def lora_config():
        return LoraConfig(
            r=int(lora_cfg.get("r", 8)), lora_alpha=float(lora_cfg.get("alpha", 16)),
            lora_dropout=float(lora_cfg.get("dropout", 0.0)), target_modules=list(lora_cfg["target_modules"]),
            task_type="CAUSAL_LM")

    if kind == "lora":
        model = get_peft_model(model, lora_config())
        trainable_file = "adapter.safetensors"

        def trainable_state():
            return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in get_peft_model_state_dict(model).items()}

        def load_trainable(sd):
            load_lora(model, sd)
    else:
        trainable_file = "model.safetensors"

        def trainable_state():
            return weights_of(model)

        def load_trainable(sd):
            load_weights(model, sd)
    if cfg.get("init_from"):
        load_trainable(load_file(os.path.join(cfg["init_from"], trainable_file)))

    # DPO's reference policy: the model before this run, frozen. For LoRA from the base alone that is
    # the base with the adapter switched off; a continued adapter (init_from) is part of it, merged.
    reference = None
    if method == "dpo" and (kind == "full" or cfg.get("init_from")):
        reference = load_base(cfg["hf_repo"], dtype, device)
        if kind == "lora":
            reference = get_peft_model(reference, lora_config())
            load_lora(reference, load_file(os.path.join(cfg["init_from"], trainable_file)))
            reference = reference.merge_and_unload()
        elif cfg.get("init_from"):
            load_weights(reference, load_file(os.path.join(cfg["init_from"], trainable_file)))
        reference.eval().requires_grad_(False)

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=float(cfg["learning_rate"]), weight_decay=float(cfg.get("weight_decay", 0.0)))
    beta = float(cfg.get("dpo_beta", 0.1))
    simpo_gamma = cfg.get("simpo_gamma")
    preference = {
        "normalize": bool(cfg.get("dpo_normalize_logratios_by_length", False)),
        "reference_free": bool(cfg.get("dpo_reference_free", False)),
        "rpo_alpha": float(cfg.get("rpo_alpha") or 0.0),
        "simpo_gamma": None if simpo_gamma is None else float(simpo_gamma),
    }
    needs_reference = not (preference["reference_free"] or preference["simpo_gamma"] is not None)

    def tensors(batch):
        return {k: torch.as_tensor(np.asarray(v), device=device) for k, v in trimmed(batch).items()}

    def ref_logprob(ids, mask):
        with torch.no_grad():
            if reference is not None:
                return sequence_logprob(reference(ids, use_cache=False).logits, ids, mask)
            with model.disable_adapter():
                return sequence_logprob(model(ids, use_cache=False).logits, ids, mask)

    def loss_of(b):
        if method == "sft":
            ids = b["ids"].long()
            return sft_loss(model(ids, use_cache=False).logits, ids, b["mask"], b["weight"]), 0.0
        ids = torch.cat([b["chosen_ids"], b["rejected_ids"]]).long()
        mask = torch.cat([b["chosen_mask"], b["rejected_mask"]])
        policy = sequence_logprob(model(ids, use_cache=False).logits, ids, mask)
        # Reference-free variants skip the reference policy's forward pass.
        ref = ref_logprob(ids, mask) if needs_reference else torch.zeros_like(policy)
        lengths = mask[:, 1:].float().sum(-1).clamp(min=1.0)
        return dpo_loss(policy, ref, lengths, b["chosen_ids"].shape[0], beta, b["weight"], **preference)

    train_rows = load_rows(cfg["train_file"])
    eval_rows = load_rows(cfg["validation_file"]) if cfg.get("validation_file") else []
    sp = step_plan(cfg, len(train_rows), bool(eval_rows))
    output_dir = cfg["output_dir"]
    os.makedirs(output_dir, exist_ok=True)

    state = RunState()
    resumed_from = None
    if cfg.get("resume_from"):
        load_trainable(load_file(os.path.join(cfg["resume_from"], trainable_file)))
        opt.load_state_dict(torch.load(os.path.join(cfg["resume_from"], "optimizer.pt"), map_location=device))
        with open(os.path.join(cfg["resume_from"], "trainer_state.json")) as f:
            state = RunState(**json.load(f))
        resumed_from = state.step
    # Early stopping's result is the best evaluated weights: a copy kept only where it can be needed.
    keep_best = bool(sp.early_stopping["enabled"])
    best = trainable_state() if keep_best else None

    cancelled = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: cancelled.__setitem__("flag", True))
    emit("start", total_steps=sp.total_steps, steps_per_epoch=sp.steps_per_epoch, n_epochs=n_epochs,
         trainable_params=int(sum(p.numel() for p in params)), resumed_from_step=resumed_from)

    def evaluate() -> float:
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for b in batches(eval_rows, batch_size, seq_len, method, np.arange(len(eval_rows))):
                real = int((b["weight"] > 0).sum())
                total += float(loss_of(tensors(b))[0]) * real
                count += real
        model.train()
        return total / max(count, 1)

    model.train()
    early_stopped = False
    for epoch in range(state.epochs_done, n_epochs):
        for batch in batches(train_rows, batch_size, seq_len, method, epoch_order(len(train_rows), int(cfg.get("seed", 0)), epoch)):
            if cancelled["flag"]:
                emit("cancelled", step=state.step)
                raise Cancelled()
            lr = sp.lr(state.step)
            for group in opt.param_groups:
                group["lr"] = lr
            loss, margin = loss_of(tensors(batch))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
            opt.step()
            state.step += 1
            fields = dict(step=state.step, epoch=epoch + 1, loss=float(loss.detach()), lr=lr, grad_norm=float(gnorm),
                          tokens=trained_tokens(batch, method))
            if method == "dpo":
                fields["reward_margin"] = margin
            emit("step", **fields)
            if state.step in sp.eval_steps:
                eval_loss = evaluate()
                emit("eval", step=state.step, eval_loss=eval_loss)
                improved, stop = state.record_eval(eval_loss, sp.early_stopping)
                if improved and keep_best:
                    best = trainable_state()
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
            tmp = path + ".partial"
            os.makedirs(tmp, exist_ok=True)
            save_file(trainable_state(), os.path.join(tmp, trainable_file))
            torch.save(opt.state_dict(), os.path.join(tmp, "optimizer.pt"))
            with open(os.path.join(tmp, "trainer_state.json"), "w") as f:
                json.dump(asdict(state), f)
            os.replace(tmp, path)
            emit("checkpoint", step=state.step, epoch=state.epochs_done, path=path, file=trainable_file)

    # With early stopping the best evaluated weights are the result; otherwise the last.
    if early_stopped:
        load_trainable(best)
    final_dir = os.path.join(output_dir, "final")
    os.makedirs(final_dir, exist_ok=True)
    if kind == "lora":
        save_file(trainable_state(), os.path.join(final_dir, "adapter.safetensors"))
        merged = model.merge_and_unload()
        save_file(weights_of(merged), os.path.join(final_dir, "model.safetensors"))
        files = ["adapter.safetensors", "model.safetensors"]
    else:
        save_file(trainable_state(), os.path.join(final_dir, "model.safetensors"))
        files = ["model.safetensors"]
    with open(os.path.join(final_dir, "config.json"), "w") as f:
        json.dump({"hf_repo": cfg["hf_repo"], "training_type": kind, "training_method": method,
                   "lora": lora_cfg if kind == "lora" else None}, f)
    files.append("config.json")
    done = dict(step=state.step, output_dir=final_dir, files=files, early_stopped=early_stopped)
    if state.best_step is not None:
        done.update(best_step=state.best_step, best_metric=state.best_metric)
    emit("done", **done)
