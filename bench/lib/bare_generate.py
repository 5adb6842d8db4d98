"""The reference for bench/model-server.ts: transformers generating greedily in a bare loop.

Loads the model as the PyTorch model server does (float32, torch's default threads), then for each
line on stdin ({"prompt": ..., "max_tokens": N}) runs `model.generate` and answers one line:
{"tokens": generated, "seconds": time in generate, "threads": torch's threads}.
"""
import json
import os
import sys
import time

os.environ["HF_HUB_OFFLINE"] = "1"

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

base = sys.argv[1]
tok = AutoTokenizer.from_pretrained(base)
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    ids = tok(req["prompt"], return_tensors="pt")["input_ids"]
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=req["max_tokens"], do_sample=False)
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens": out.shape[1] - ids.shape[1], "seconds": seconds,
                      "threads": torch.get_num_threads()}), flush=True)
