"""Weights and expected answers for the PyTorch model server's tests, with transformers and peft
directly (what a user's own fine-tune outside Gantry would be; what the server must agree with).

    python torch_weights.py train  '{"base": DIR, "out": DIR, "kind": "full"|"lora", "question": Q,
                                     "answer": A, "target_modules": [...], "max_steps": N}'
        -> {"steps": n}; out/ has model.safetensors or adapter.safetensors, and config.json as the
           torch trainer writes them
    python torch_weights.py answer '{"base": DIR, "weights": DIR|null, "messages": [...], "max_tokens": N}'
        -> {"text": greedy answer of transformers' generate, "prompt_tokens": the templated prompt's count}
    python torch_weights.py prepare '{"base": DIR, "train": [train's arguments...],
                                      "answers": {NAME: answer's arguments, ...}}'
        -> {"steps": [n...], "answers": {NAME: answer's result}}: every training, then every answer,
           in one process (importing torch and transformers costs seconds of CPU each time)
"""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict  # noqa: E402
from safetensors.torch import load_file, save_file, save_model  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

HF_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"


def load(base: str, weights: str | None):
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if weights and os.path.exists(os.path.join(weights, "adapter.safetensors")):
        lora = json.load(open(os.path.join(weights, "config.json")))["lora"]
        model = get_peft_model(model, LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=0.0,
                                                 target_modules=lora["target_modules"], task_type="CAUSAL_LM"))
        set_peft_model_state_dict(model, load_file(os.path.join(weights, "adapter.safetensors")))
    elif weights:
        model.load_state_dict(load_file(os.path.join(weights, "model.safetensors")), strict=False)
        model.tie_weights()
    return model.eval()


def answer(tok, model, messages, max_tokens):
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(ids, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=max_tokens, do_sample=False)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True), ids.shape[1]


def train(a):
    tok = AutoTokenizer.from_pretrained(a["base"])
    torch.manual_seed(0)
    model = load(a["base"], None)
    lora = None
    if a["kind"] == "lora":
        lora = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": a["target_modules"]}
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                 target_modules=a["target_modules"], task_type="CAUSAL_LM"))
    messages = [{"role": "user", "content": a["question"]}]
    prompt = tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                 add_special_tokens=False)["input_ids"]
    target = tok(a["answer"] + "<|im_end|>", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + target])
    labels = torch.tensor([[-100] * len(prompt) + target])
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-3 if lora else 5e-5)
    steps = 0
    while steps < a["max_steps"]:
        steps += 1
        model.train()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        model.eval()
        if answer(tok, model, messages, len(target))[0].startswith(a["answer"]):
            break
    os.makedirs(a["out"], exist_ok=True)
    if lora:
        save_file({k: v.detach().contiguous() for k, v in get_peft_model_state_dict(model).items()},
                  os.path.join(a["out"], "adapter.safetensors"))
    else:
        save_model(model, os.path.join(a["out"], "model.safetensors"))  # tied embeddings saved once
    with open(os.path.join(a["out"], "config.json"), "w") as f:
        json.dump({"hf_repo": HF_REPO, "training_type": a["kind"], "training_method": "sft", "lora": lora}, f)
    return {"steps": steps}


def main():
    mode, args = sys.argv[1], json.loads(sys.argv[2])
    if mode == "train":
        result = train(args)
    elif mode == "answer":
        result = answer_with(args["base"], args)
    else:
        steps = [train({"base": args["base"], **one})["steps"] for one in args["train"]]
        result = {"steps": steps,
                  "answers": {name: answer_with(args["base"], one) for name, one in args["answers"].items()}}
    print(json.dumps(result))


def answer_with(base: str, a: dict) -> dict:
    tok = AutoTokenizer.from_pretrained(base)
    text, prompt_tokens = answer(tok, load(base, a.get("weights")), a["messages"], a["max_tokens"])
    return {"text": text, "prompt_tokens": prompt_tokens}


if __name__ == "__main__":
    main()
