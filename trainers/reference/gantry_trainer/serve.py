"""The reference model server: the model the reference trainer trains, served over HTTP.

Dedicated endpoints run it as their replicas' command. It loads real weights
(the trainer's model.safetensors and config.json, as the model registry holds
them; or the catalog base weights from their seed), applies LoRA adapters
loaded at run time, and generates with a real forward pass: greedy or
temperature sampling (with top_p), max_tokens, stop sequences, EOS.

    python -m gantry_trainer.serve --model-dir DIR      # registry weights
    python -m gantry_trainer.serve --base-config JSON --base-seed N

Routes (OpenAI-compatible where OpenAI has one):
    GET  /health                 200 once the weights are loaded
    POST /v1/completions         {model, prompt, max_tokens, temperature, top_p, stop, seed, stream}
    POST /v1/chat/completions    {model, messages, ...}; the reference chat template
    GET  /v1/models              the base model and loaded adapters
    POST /adapters               {name, dir}: load adapter.safetensors + config.json from dir
                                 (a mount path: under /gantry/adapters)
    DELETE /adapters/<name>
    GET  /metrics                Prometheus text: requests, tokens, in-flight requests

A deployment profile (config) adds `--dtype bfloat16` (weights held in
bfloat16) and `--max-tokens-limit N` (requests asking for more are refused).

`model` names an adapter to use it; anything else is the base model. The port
is $PORT and the address $HOST (Gantry's container runtime assigns both; the
address is the container host's, GANTRY_CONTAINER_HOST_ADDRESS).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jax
import jax.numpy as jnp
import numpy as np

from .checkpoint import load_params
from .lora import make_linear
from .model import ModelConfig, forward, init_params

# The byte-level tokenizer of the reference model (fine-tunes/tokenizer.ts): 4 specials, then bytes.
SPECIALS = 4
BOS, EOS = 1, 2


def encode(text: str) -> list[int]:
    return [SPECIALS + b for b in text.encode("utf-8")]


def decode(ids: list[int]) -> str:
    return bytes(i - SPECIALS for i in ids if i >= SPECIALS).decode("utf-8", errors="replace")


def chat_prompt(messages: list[dict]) -> str:
    """The reference chat template (one `role: text` line per message), then the assistant's turn."""
    text = ""
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text += f"{m.get('role', 'user')}: {content or ''}\n"
    return text + "assistant: "


class BadRequest(Exception):
    pass


class Engine:
    def __init__(self, cfg: ModelConfig, params: dict, name: str, max_tokens_limit: int | None = None):
        self.cfg = cfg
        self.params = params
        self.name = name
        self.max_tokens_limit = max_tokens_limit
        self.adapters: dict[str, tuple[dict, float]] = {}
        self.lock = threading.Lock()  # one forward pass at a time: JAX on CPU uses every core anyway

        def step(base, lora, scale, ids):
            linear = make_linear(base, lora, scale, 0.0, None)
            return forward(base, ids, cfg, linear)

        self._base_step = jax.jit(lambda base, ids: forward(base, ids, cfg, make_linear(base, None, 0.0, 0.0, None)))
        self._lora_step = jax.jit(step)

    def load_adapter(self, name: str, directory: str) -> None:
        directory = mounted(directory)
        with open(os.path.join(directory, "config.json")) as f:
            config = json.load(f)
        lora_cfg = config.get("lora") or {}
        if config.get("model") and ModelConfig.from_dict(config["model"]) != self.cfg:
            raise BadRequest(f"adapter {name} was trained on a different base model")
        r, alpha = lora_cfg.get("r"), lora_cfg.get("alpha")
        if not r or not alpha:
            raise BadRequest(f"adapter {name}: config.json has no lora rank and alpha")
        lora = load_params(os.path.join(directory, "adapter.safetensors"))
        for key, value in lora.items():
            layer = key.rsplit(".", 1)[0]
            if layer not in self.params:
                raise BadRequest(f"adapter {name}: {key} adapts no layer of this model")
            if key.endswith(".lora_A") and value.shape[0] != self.params[layer].shape[0]:
                raise BadRequest(f"adapter {name}: {key} has shape {tuple(value.shape)}, the layer {tuple(self.params[layer].shape)}")
        self.adapters[name] = (lora, float(alpha) / float(r))

    def logits(self, ids: list[int], adapter: str | None) -> np.ndarray:
        """Next-token logits after `ids` (padded to the model's length: the causal mask ignores the padding)."""
        padded = np.zeros((1, self.cfg.max_seq_len), dtype=np.int32)
        padded[0, : len(ids)] = ids
        if adapter:
            lora, scale = self.adapters[adapter]
            out = self._lora_step(self.params, lora, jnp.float32(scale), padded)
        else:
            out = self._base_step(self.params, padded)
        return np.asarray(out[0, len(ids) - 1], dtype=np.float64)

    def generate(self, prompt: str, max_tokens: int, temperature: float, top_p: float, stop: list[str], seed, adapter):
        """Yields (text piece, finish_reason or None, usage or None); the last item carries both."""
        ids = [BOS] + encode(prompt)
        if len(ids) >= self.cfg.max_seq_len:
            raise BadRequest(
                f"The prompt is {len(ids)} tokens; this model's context is {self.cfg.max_seq_len} tokens."
            )
        rng = np.random.default_rng(seed)
        generated: list[int] = []
        emitted = ""
        finish = "length"
        while len(generated) < max_tokens:
            if len(ids) >= self.cfg.max_seq_len:
                break
            with self.lock:
                logits = self.logits(ids, adapter)
            token = self._pick(logits, temperature, top_p, rng)
            ids.append(token)
            generated.append(token)
            if token == EOS:
                finish = "stop"
                break
            text = decode([t for t in generated if t != EOS])
            hit = min((text.find(s) for s in stop if s and s in text), default=-1)
            if hit >= 0:
                text, finish = text[:hit], "stop"
            # Hold back an incomplete UTF-8 character until its last byte arrives.
            if not text.endswith("\ufffd") or finish == "stop":
                if len(text) > len(emitted):
                    yield text[len(emitted):], None, None
                    emitted = text
            if finish == "stop":
                break
        prompt_tokens = len(encode(prompt)) + 1
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(generated),
                 "total_tokens": prompt_tokens + len(generated)}
        yield "", finish, usage

    @staticmethod
    def _pick(logits: np.ndarray, temperature: float, top_p: float, rng) -> int:
        if temperature <= 0:
            return int(np.argmax(logits))
        z = logits / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p < 1:
            order = np.argsort(-p)
            keep = order[: int(np.searchsorted(np.cumsum(p[order]), top_p) + 1)]
            mask = np.zeros_like(p)
            mask[keep] = p[keep]
            p = mask / mask.sum()
        return int(rng.choice(len(p), p=p))


class Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.tokens = 0
        self.inflight = 0

    def text(self) -> str:
        return (
            "# TYPE gantry_model_requests_total counter\n"
            f"gantry_model_requests_total {self.requests}\n"
            "# TYPE gantry_model_generated_tokens_total counter\n"
            f"gantry_model_generated_tokens_total {self.tokens}\n"
            "# TYPE gantry_model_requests_inflight gauge\n"
            f"gantry_model_requests_inflight {self.inflight}\n"
        )


def make_handler(engine: Engine, metrics: Metrics):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK hold every keep-alive response back by about 40 ms.
        disable_nagle_algorithm = True

        def log_message(self, fmt, *args):  # one line per request on stdout (the replica's log)
            print(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}", flush=True)

        def _json(self, status: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, code: str | None = None):
            self._json(status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}})

        def _body(self) -> dict:
            length = int(self.headers.get("content-length") or 0)
            try:
                return json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as e:
                raise BadRequest(f"the body is not JSON: {e}") from e

        def do_GET(self):
            if self.path == "/health":
                return self._json(200, {"status": "ok", "model": engine.name})
            if self.path == "/metrics":
                data = metrics.text().encode()
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                return self.wfile.write(data)
            if self.path == "/v1/models":
                names = [engine.name, *engine.adapters]
                return self._json(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})
            if self.path == "/adapters":
                return self._json(200, {"data": sorted(engine.adapters)})
            self._error(404, f"no route {self.path}")

        def do_DELETE(self):
            if self.path.startswith("/adapters/"):
                engine.adapters.pop(self.path[len("/adapters/"):], None)
                return self._json(200, {"deleted": True})
            self._error(404, f"no route {self.path}")

        def do_POST(self):
            try:
                body = self._body()
                if self.path == "/adapters":
                    engine.load_adapter(str(body["name"]), str(body["dir"]))
                    return self._json(200, {"loaded": body["name"]})
                if self.path in ("/v1/completions", "/v1/chat/completions"):
                    return self._complete(body, chat=self.path.endswith("chat/completions"))
                self._error(404, f"no route {self.path}")
            except BadRequest as e:
                self._error(400, str(e))
            except (KeyError, TypeError, ValueError) as e:
                self._error(400, f"bad request: {e}")

        def _complete(self, body: dict, chat: bool):
            if chat:
                if not isinstance(body.get("messages"), list) or not body["messages"]:
                    raise BadRequest("messages must be a non-empty array")
                prompt = chat_prompt(body["messages"])
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, list):
                    prompt = "".join(prompt)
                if not isinstance(prompt, str):
                    raise BadRequest("prompt must be a string")
            max_tokens = int(body.get("max_tokens") or 64)
            temperature = float(body.get("temperature", 0.7) if body.get("temperature") is not None else 0.7)
            top_p = float(body.get("top_p") if body.get("top_p") is not None else 1.0)
            if max_tokens < 1 or not 0 <= temperature <= 2 or not 0 < top_p <= 1:
                raise BadRequest("max_tokens >= 1, 0 <= temperature <= 2 and 0 < top_p <= 1")
            if engine.max_tokens_limit and max_tokens > engine.max_tokens_limit:
                raise BadRequest(
                    f"max_tokens is {max_tokens}; this deployment's profile allows at most {engine.max_tokens_limit}"
                )
            stop = body.get("stop") or []
            stop = [stop] if isinstance(stop, str) else list(stop)
            if chat:
                stop.append("\n")  # the reference template ends every message at a line end
            requested = str(body.get("model") or "")
            adapter = requested if requested in engine.adapters else None
            wanted = self.headers.get("x-gantry-adapter")
            if wanted and wanted not in engine.adapters:
                # Never answer with the base model when an adapter was asked for.
                return self._error(503, f"adapter {wanted} is not loaded on this replica yet; retry shortly", "adapter_not_loaded")
            if wanted:
                adapter = wanted
            stream = bool(body.get("stream"))
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
            created = int(time.time())
            obj = "chat.completion" if chat else "text_completion"
            with metrics.lock:
                metrics.requests += 1
                metrics.inflight += 1
            try:
                pieces = engine.generate(prompt, max_tokens, temperature, top_p, stop, body.get("seed"), adapter)
                if not stream:
                    text, finish, usage = "", "length", {}
                    for piece, reason, counted in pieces:
                        text += piece
                        if reason:
                            finish, usage = reason, counted
                    with metrics.lock:
                        metrics.tokens += usage["completion_tokens"]
                    choice = (
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                        if chat
                        else {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
                    )
                    return self._json(200, {"id": rid, "object": obj, "created": created, "model": requested or engine.name,
                                            "choices": [choice], "usage": usage})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                chunk_obj = "chat.completion.chunk" if chat else "text_completion"

                def send(payload: dict):
                    self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                    self.wfile.flush()

                first = True
                usage = {}
                for piece, reason, counted in pieces:
                    if counted:
                        usage = counted
                    if chat:
                        delta = {"content": piece} if piece else {}
                        if first:
                            delta = {"role": "assistant", **delta}
                        choice = {"index": 0, "delta": delta, "finish_reason": reason}
                    else:
                        choice = {"index": 0, "text": piece, "finish_reason": reason}
                    first = False
                    send({"id": rid, "object": chunk_obj, "created": created, "model": requested or engine.name,
                          "choices": [choice]})
                with metrics.lock:
                    metrics.tokens += usage.get("completion_tokens", 0)
                if include_usage:
                    send({"id": rid, "object": chunk_obj, "created": created, "model": requested or engine.name,
                          "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            finally:
                with metrics.lock:
                    metrics.inflight -= 1

    return Handler


def mounted(path: str) -> str:
    """Where a mount path (`/model`, an adapter under /gantry/adapters) is for this process.

    In a container, where it says; under Gantry's process runtime, which has no container
    filesystem, inside the replica's own root (GANTRY_MOUNT_ROOT).
    """
    root = os.environ.get("GANTRY_MOUNT_ROOT")
    return os.path.join(root, path.lstrip("/")) if root and os.path.isabs(path) else path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", help="a directory with model.safetensors and config.json (the trainer's output)")
    ap.add_argument("--base-config", help="JSON model configuration of a catalog base model (with --base-seed)")
    ap.add_argument("--base-seed", type=int, default=0)
    ap.add_argument("--name", default="model")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    ap.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    # Deployment profile (config) settings.
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="the weights' dtype in memory")
    ap.add_argument("--max-tokens-limit", type=int, default=None, help="refuse requests asking for more tokens")
    args = ap.parse_args(argv)
    if args.model_dir:
        model_dir = mounted(args.model_dir)
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = ModelConfig.from_dict(json.load(f)["model"])
        params = load_params(os.path.join(model_dir, "model.safetensors"))
    elif args.base_config:
        cfg = ModelConfig.from_dict(json.loads(args.base_config))
        params = init_params(cfg, args.base_seed)
    else:
        print("serve: give --model-dir or --base-config", file=sys.stderr)
        return 2
    if args.dtype == "bfloat16":
        params = jax.tree_util.tree_map(lambda x: x.astype(jnp.bfloat16), params)
    engine = Engine(cfg, params, args.name, args.max_tokens_limit)
    engine.logits([BOS], None)  # compile before reporting healthy
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine, Metrics()))
    print(f"serving {args.name} on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
