"""The torch trainer bench's reference (bench/torch-trainer.ts): a bare PEFT loop on the same base
model, LoRA configuration, batches and threads as the PyTorch trainer, with none of the trainer
around it (no events, schedule, evaluation or checkpoints), and transformers' own loss.

    python bare_peft_step.py <config.json>   (the config the trainer gets; SFT, LoRA)

Prints one JSON line: the steps run and the trained tokens per second from the end of the first
step to the end of the last.
"""
import json
import os
import sys
import time

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from gantry_trainer.data import batches, epoch_order, load_rows, trained_tokens  # noqa: E402


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg["training_method"] != "sft" or cfg["training_type"] != "lora":
        raise SystemExit("the bare loop runs SFT with LoRA only")
    # The threads the trainer uses (trainers/torch use_host_cores).
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(int(cfg.get("seed", 0)))
    base = AutoModelForCausalLM.from_pretrained(
        os.path.join(os.environ["GANTRY_MODEL_DIR"], cfg["hf_repo"]), dtype=torch.float32, local_files_only=True)
    lora = cfg["lora"]
    model = get_peft_model(base, LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                                            target_modules=lora["target_modules"], task_type="CAUSAL_LM"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(cfg["learning_rate"]))
    rows = load_rows(cfg["train_file"])
    seed, seq_len, batch_size = int(cfg.get("seed", 0)), int(cfg["max_seq_length"]), int(cfg["batch_size"])
    step, tokens, first_done = 0, 0, None
    for epoch in range(int(cfg["n_epochs"])):
        for batch in batches(rows, batch_size, seq_len, "sft", epoch_order(len(rows), seed, epoch)):
            ids = torch.as_tensor(np.asarray(batch["ids"])).long()
            # transformers shifts the labels itself; -100 marks what is not trained on (prompt, padding).
            labels = ids.masked_fill(torch.as_tensor(np.asarray(batch["mask"])) == 0, -100)
            loss = model(input_ids=ids, labels=labels, use_cache=False).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            float(loss)
            step += 1
            if first_done is None:
                first_done = time.perf_counter()
            else:
                tokens += trained_tokens(batch, "sft")
    print(json.dumps({"steps": step, "trained_tokens_per_second": tokens / (time.perf_counter() - first_done)}))


if __name__ == "__main__":
    main()
