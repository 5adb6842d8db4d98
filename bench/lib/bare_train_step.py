"""The trainer bench's reference (bench/trainer.ts): the reference trainer's own jitted SFT step
(gantry_trainer: the same model, LoRA, loss, optimizer and batches) in a bare loop, with none of
the trainer process around it (no events, schedule, evaluation or checkpoints).

    python bare_train_step.py <config.json>   (the config the trainer gets; SFT, LoRA)

Prints one JSON line: the steps run and the trained tokens per second from the end of the first
step (which includes JIT compilation) to the end of the last, each step waited for like the
trainer waits for its loss.
"""
import json
import sys
import time

import jax
import jax.numpy as jnp
import optax

from gantry_trainer.data import batches, epoch_order, load_rows, trained_tokens
from gantry_trainer.lora import init_lora, make_linear
from gantry_trainer.losses import sft_loss
from gantry_trainer.model import ModelConfig, forward, init_params


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg["training_method"] != "sft" or cfg["training_type"] != "lora":
        raise SystemExit("the bare loop runs SFT with LoRA only")
    mc = ModelConfig.from_dict(cfg["model"])
    seq_len = min(int(cfg["max_seq_length"]), mc.max_seq_len)
    batch_size = int(cfg["batch_size"])
    seed = int(cfg.get("seed", 0))
    lora_cfg = cfg["lora"]
    scale = float(lora_cfg["alpha"]) / float(lora_cfg["r"])
    base = init_params(mc, int(cfg.get("base_seed", 0)))
    trainable = init_lora(mc, list(lora_cfg["target_modules"]), int(lora_cfg["r"]), seed)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam(), optax.add_decayed_weights(0.0))
    opt_state = opt.init(trainable)

    def loss_fn(tr, batch, key):
        logits = forward(base, batch["ids"], mc, make_linear(base, tr, scale, 0.0, key))
        return sft_loss(logits, batch["ids"], batch["mask"], batch["weight"])

    @jax.jit
    def train_step(tr, opt_state, batch, key, lr):
        loss, grads = jax.value_and_grad(loss_fn)(tr, batch, key)
        updates, opt_state = opt.update(grads, opt_state, tr)
        tr = jax.tree_util.tree_map(lambda p, u: p - lr * u, tr, updates)
        return tr, opt_state, loss, optax.global_norm(grads)

    rows = load_rows(cfg["train_file"])
    key = jax.random.PRNGKey(seed)
    lr = jnp.float32(cfg["learning_rate"])
    step, tokens, first_done = 0, 0, None
    for epoch in range(int(cfg["n_epochs"])):
        for batch in batches(rows, batch_size, seq_len, "sft", epoch_order(len(rows), seed, epoch)):
            arrays = {k: jnp.asarray(v) for k, v in batch.items()}
            trainable, opt_state, loss, _ = train_step(trainable, opt_state, arrays, jax.random.fold_in(key, step), lr)
            loss.block_until_ready()
            step += 1
            if first_done is None:
                first_done = time.perf_counter()
            else:
                tokens += trained_tokens(batch, "sft")
    seconds = time.perf_counter() - first_done
    print(json.dumps({"steps": step, "trained_tokens_per_second": tokens / seconds}))


if __name__ == "__main__":
    main()
