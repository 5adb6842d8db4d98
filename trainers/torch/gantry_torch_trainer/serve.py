"""The PyTorch model server: real model families (transformers) served over HTTP.

Dedicated endpoints of a torch catalog base (HuggingFaceTB/SmolLM2-135M-Instruct), of registry
models fine-tuned from it and of the base with LoRA adapters attached run it as their replicas'
command, with the same HTTP contract as the reference model server
(trainers/reference/gantry_trainer/serve.py), so the gateway, the adapter loads and the
autoscaler's metric treat both alike. A GPU host can run vLLM's OpenAI-compatible server in its
place (README, providers/containers/KUBERNETES.md).

    python -m gantry_torch_trainer.serve --base-dir /base                      # the catalog base
    python -m gantry_torch_trainer.serve --base-dir /base --model-dir /model   # a full fine-tune

`--base-dir` holds the catalog entry as GANTRY_MODEL_DIR has it (config.json, model.safetensors,
tokenizer, chat_template.jinja); `--model-dir` the torch trainer's full weights (model.safetensors
and config.json {hf_repo, training_type, ...}), loaded over the base's architecture, tokenizer and
chat template.

Routes (OpenAI-compatible where OpenAI has one):
    GET  /health                 200 once the weights are loaded
    POST /v1/completions         {model, prompt, max_tokens, temperature, top_p, stop, seed, stream,
                                  stream_options, logprobs (an integer)}
    POST /v1/chat/completions    {model, messages, ..., logprobs (boolean), top_logprobs}; the
                                  model's own chat template
    GET  /v1/models              the model and loaded adapters
    POST /adapters               {name, dir}: load adapter.safetensors (a peft state dict) and
                                  config.json {lora: {r, alpha, dropout, target_modules}} from dir
    DELETE /adapters/<name>
    GET  /metrics                Prometheus text: requests, tokens, in-flight requests

`model` (or the gateway's x-gantry-adapter header) names an adapter to use it; anything else is
the model itself. A deployment profile adds `--dtype bfloat16` and `--max-tokens-limit N`. The
port is $PORT and the address $HOST, as for the reference server.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded at run time

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

# Chat answers without max_tokens stop at EOS, the context's end, or this many tokens (a CPU
# replica spends seconds per hundred tokens; a looping answer should not hold it for minutes).
DEFAULT_CHAT_MAX_TOKENS = 1024
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's documented default for /v1/completions
MAX_STOP_SEQUENCES = 4
MAX_TOP_LOGPROBS_CHAT = 20
MAX_LOGPROBS_COMPLETION = 5


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


def mounted(path: str) -> str:
    """Where a mount path is for this process: as it says in a container, under GANTRY_MOUNT_ROOT
    on Gantry's process runtime (which links each mount into the replica's own root)."""
    root = os.environ.get("GANTRY_MOUNT_ROOT")
    return os.path.join(root, path.lstrip("/")) if root and os.path.isabs(path) else path


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the characters byte-level BPE tokens are spelled in."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


@dataclass
class Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    stop: list[str]
    seed: int | None
    logprobs: bool
    top_logprobs: int


@dataclass
class Step:
    """One generated token: its id, text, log probability and the most likely alternatives."""
    token: int
    logprob: float | None = None
    top: list[tuple[int, float]] = field(default_factory=list)


class Engine:
    def __init__(self, model, tokenizer, name: str, max_tokens_limit: int | None, hf_repo: str | None):
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.hf_repo = hf_repo
        self.max_tokens_limit = max_tokens_limit
        self.context = int(getattr(model.config, "max_position_embeddings", 2048))
        eos = model.generation_config.eos_token_id
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        self.peft = None  # the peft wrapper, once an adapter is loaded (LoRA layers go into `model` itself)
        # adapter name -> {lora, dir (its revision's directory), slot (its name inside peft)}
        self.adapters: dict[str, dict] = {}
        self._slots = 0
        self.active: str | None = None
        # One forward pass at a time: torch on CPU uses every thread for one already, and the
        # active adapter is the model's state. Requests interleave token by token.
        self.lock = threading.Lock()
        # Forward passes run on one long-lived thread, not on each request's own: torch's CPU
        # thread pool (OpenMP) belongs to the thread that calls it, and a fresh request thread
        # builds a new one (measured here: about 15% slower generation).
        self._forward_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")
        self._bytes = _byte_decoder()

    # --- adapters -------------------------------------------------------------------------

    def load_adapter(self, name: str, directory: str) -> None:
        from peft import LoraConfig, get_peft_model, set_peft_model_state_dict

        directory = mounted(directory)
        try:
            with open(os.path.join(directory, "config.json")) as f:
                config = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise BadRequest(f"adapter {name}: no readable config.json in {directory}: {e}", "dir") from e
        lora = config.get("lora") or {}
        if config.get("hf_repo") and self.hf_repo and config["hf_repo"] != self.hf_repo:
            raise BadRequest(f"adapter {name} was trained on {config['hf_repo']}, not {self.hf_repo}", "dir")
        if not lora.get("r") or not lora.get("alpha") or not lora.get("target_modules"):
            raise BadRequest(f"adapter {name}: config.json has no lora rank, alpha and target_modules", "dir")
        try:
            state = load_file(os.path.join(directory, "adapter.safetensors"))
        except (OSError, ValueError) as e:
            raise BadRequest(f"adapter {name}: no readable adapter.safetensors: {e}", "dir") from e
        lora_config = LoraConfig(r=int(lora["r"]), lora_alpha=float(lora["alpha"]), lora_dropout=0.0,
                                 target_modules=list(lora["target_modules"]), task_type="CAUSAL_LM")
        with self.lock:
            current = self.adapters.get(name)
            if current and current["dir"] == directory:
                return  # the host's resync of a loaded revision: nothing to do
            # Each revision gets its own peft slot, and the name moves to it only once it is loaded,
            # so requests for the adapter never see it missing while a new revision loads.
            self._slots += 1
            slot = f"{name}-r{self._slots}"
            try:
                if self.peft is None:
                    self.peft = get_peft_model(self.model, lora_config, adapter_name=slot)
                else:
                    self.peft.add_adapter(slot, lora_config)
                result = set_peft_model_state_dict(self.peft, state, adapter_name=slot)
                unexpected = [k for k in result.unexpected_keys if "lora_" in k]
                if unexpected:
                    raise BadRequest(f"adapter {name}: {unexpected[0]} adapts no layer of this model", "dir")
            except (RuntimeError, ValueError) as e:  # shapes of another model, unknown modules
                if slot in self.peft.peft_config:
                    self.peft.delete_adapter(slot)
                raise BadRequest(f"adapter {name} does not fit this model: {str(e).splitlines()[0]}", "dir") from e
            except BadRequest:
                self.peft.delete_adapter(slot)
                raise
            self.peft.eval()
            self.adapters[name] = {"lora": lora, "dir": directory, "slot": slot}
            if current:
                self.peft.delete_adapter(current["slot"])  # the revision it replaces
            self.active = "\0"  # unknown: set on the next forward pass

    def unload_adapter(self, name: str) -> None:
        with self.lock:
            current = self.adapters.pop(name, None)
            if current:
                self.peft.delete_adapter(current["slot"])
                self.active = "\0"

    def _activate(self, adapter: str | None) -> None:
        """Makes the named adapter's current revision (or the base, for None) the model's state."""
        if adapter is not None and adapter not in self.adapters:
            raise RuntimeError(f"adapter {adapter} was unloaded while a request used it")
        slot = self.adapters[adapter]["slot"] if adapter is not None else None
        if self.peft is None or slot == self.active:
            return
        if slot is None:
            self.peft.base_model.disable_adapter_layers()
        else:
            self.peft.base_model.enable_adapter_layers()
            self.peft.base_model.set_adapter(slot)
        self.active = slot

    # --- tokens ---------------------------------------------------------------------------

    def chat_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            return self.tokenizer(prompt)["input_ids"]
        return list(prompt)  # token ids, checked by the caller

    def token_text(self, token: int) -> str:
        return self.tokenizer.decode([token])

    def token_bytes(self, token: int) -> list[int]:
        """The token's own bytes (a byte-level BPE token may be part of one UTF-8 character)."""
        piece = self.tokenizer.convert_ids_to_tokens(token)
        if piece and all(c in self._bytes for c in piece):
            return [self._bytes[c] for c in piece]
        return list(self.token_text(token).encode("utf-8"))

    # --- generation -----------------------------------------------------------------------

    def _forward(self, ids: list[int], past, adapter: str | None):
        return self._forward_thread.submit(self._forward_here, ids, past, adapter).result()

    def _forward_here(self, ids: list[int], past, adapter: str | None):
        with self.lock, torch.inference_mode():
            self._activate(adapter)
            out = self.model(input_ids=torch.tensor([ids]), past_key_values=past, use_cache=True)
        return out.logits[0, -1].float(), out.past_key_values

    @staticmethod
    def _pick(logits: torch.Tensor, s: Sampling, gen: torch.Generator) -> int:
        if s.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / s.temperature, dim=-1)
        if s.top_p < 1:
            sorted_p, order = torch.sort(probs, descending=True)
            # Keep the most likely tokens up to top_p of the mass, and always the first.
            drop = (torch.cumsum(sorted_p, dim=-1) - sorted_p) >= s.top_p
            sorted_p[drop] = 0
            return int(order[torch.multinomial(sorted_p, 1, generator=gen)])
        return int(torch.multinomial(probs, 1, generator=gen))

    def generate(self, ids: list[int], s: Sampling, adapter: str | None):
        """Yields (text piece, steps behind it, finish_reason or None, usage or None); the last
        item carries the finish reason and usage."""
        gen = torch.Generator()
        gen.manual_seed(s.seed if s.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1)
        prompt_tokens = len(ids)
        logits, past = self._forward(ids, None, adapter)
        generated: list[int] = []
        pending: list[Step] = []
        emitted = ""
        finish = "length"
        at_stop = False  # a stop sequence ended the answer (it and what follows are not sent)
        hold = max((len(x) for x in s.stop), default=1) - 1
        while len(generated) < s.max_tokens:
            token = self._pick(logits, s, gen)
            step = Step(token)
            if s.logprobs:
                logp = torch.log_softmax(logits, dim=-1)
                step.logprob = float(logp[token])
                if s.top_logprobs:
                    values, indices = torch.topk(logp, s.top_logprobs)
                    step.top = list(zip(indices.tolist(), values.tolist(), strict=True))
            generated.append(token)
            if token in self.eos:
                finish = "stop"
                break
            pending.append(step)
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            hit = min((i for i in (text.find(x) for x in s.stop) if i >= 0), default=-1)
            if hit >= 0:
                text, finish, at_stop = text[:hit], "stop", True
            # Hold back an incomplete UTF-8 character, and what may be the start of a stop sequence.
            ready = len(text) if at_stop else len(text) - hold
            if text.endswith("\ufffd") and not at_stop:
                ready = min(ready, len(text) - 1)
            if ready > len(emitted):
                yield text[len(emitted):ready], pending, None, None
                emitted, pending = text[:ready], []
            if at_stop or len(generated) >= s.max_tokens or prompt_tokens + len(generated) >= self.context:
                break
            logits, past = self._forward([token], past, adapter)
        if not at_stop:  # what was held back
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            if len(text) > len(emitted):
                yield text[len(emitted):], pending, None, None
                pending = []
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(generated),
                 "total_tokens": prompt_tokens + len(generated)}
        yield "", pending, finish, usage


# --- requests -------------------------------------------------------------------------------

def _number(body: dict, key: str, default, low, high, integer=False):
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        raise BadRequest(f"{key} must be {'an integer' if integer else 'a number'}", key)
    if not low <= value <= high:
        raise BadRequest(f"{key} must be between {low} and {high} (got {value})", key)
    return int(value) if integer else float(value)


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty array", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}] must be an object", f"messages[{i}]")
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise BadRequest(f"messages[{i}].role must be system, developer, user, assistant or tool", f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for j, p in enumerate(content):
                if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                    raise BadRequest("only text content parts are accepted", f"messages[{i}].content[{j}]")
                parts.append(p["text"])
            content = "".join(parts)
        if content is None and role == "assistant":
            content = ""
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be a string or text parts", f"messages[{i}].content")
        out.append({"role": "system" if role == "developer" else role, "content": content})
    return out


def _prompt(body: dict, vocab: int):
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if any(not 0 <= t < vocab for t in prompt):
            raise BadRequest(f"prompt token ids must be between 0 and {vocab - 1}", "prompt")
        return prompt
    raise BadRequest("prompt must be a string, or one array of token ids (one prompt per request)", "prompt")


def parse(body: dict, chat: bool, engine: Engine) -> tuple[list[int], Sampling]:
    """The prompt's token ids and how to sample, or BadRequest naming the field."""
    ids = engine.chat_ids(_messages(body)) if chat else engine.prompt_ids(_prompt(body, len(engine.tokenizer)))
    if not ids:
        raise BadRequest("the prompt is empty", "prompt")
    field_name = "messages" if chat else "prompt"
    if len(ids) >= engine.context:
        raise BadRequest(f"The prompt is {len(ids)} tokens; this model's context is {engine.context} tokens.", field_name,
                         "context_length_exceeded")
    room = engine.context - len(ids)
    limit = engine.max_tokens_limit or engine.context
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    default = min(room, DEFAULT_CHAT_MAX_TOKENS if chat else DEFAULT_COMPLETION_MAX_TOKENS, limit)
    max_tokens = _number(body, key, default, 1, 10**9, integer=True)
    if engine.max_tokens_limit and max_tokens > engine.max_tokens_limit:
        raise BadRequest(f"{key} is {max_tokens}; this deployment's profile allows at most {engine.max_tokens_limit}", key)
    if max_tokens > room:
        raise BadRequest(f"{key} is {max_tokens}, but the prompt ({len(ids)} tokens) leaves {room} of this model's "
                         f"{engine.context}-token context", key, "context_length_exceeded")
    stop = body.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > MAX_STOP_SEQUENCES or not all(isinstance(x, str) and x for x in stop):
        raise BadRequest(f"stop must be a string or up to {MAX_STOP_SEQUENCES} non-empty strings", "stop")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise BadRequest("seed must be a non-negative integer", "seed")
    if chat:
        logprobs = body.get("logprobs")
        if logprobs is not None and not isinstance(logprobs, bool):
            raise BadRequest("logprobs must be a boolean", "logprobs")
        top = _number(body, "top_logprobs", 0, 0, MAX_TOP_LOGPROBS_CHAT, integer=True)
        if top and not logprobs:
            raise BadRequest("top_logprobs needs logprobs: true", "top_logprobs")
        want_logprobs = bool(logprobs)
    else:
        top = _number(body, "logprobs", None, 0, MAX_LOGPROBS_COMPLETION, integer=True)
        want_logprobs = top is not None
        top = top or 0
        if body.get("echo"):
            raise BadRequest("echo is not supported by this model server", "echo")
        if _number(body, "best_of", 1, 1, 1, integer=True) != 1:
            raise BadRequest("best_of must be 1", "best_of")
    if _number(body, "n", 1, 1, 1, integer=True) != 1:
        raise BadRequest("n must be 1: this model server answers one choice per request", "n")
    for penalty in ("presence_penalty", "frequency_penalty"):
        if _number(body, penalty, 0.0, -2, 2):
            raise BadRequest(f"{penalty} is not supported by this model server (send 0 or leave it out)", penalty)
    if body.get("logit_bias"):
        raise BadRequest("logit_bias is not supported by this model server", "logit_bias")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise BadRequest("stream must be a boolean", "stream")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool)):
        raise BadRequest("stream_options must be an object with a boolean include_usage", "stream_options")
    return ids, Sampling(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, 0, 2),
        top_p=_number(body, "top_p", 1.0, 0, 1) or 1e-9,  # 0: only the most likely token
        stop=stop,
        seed=seed,
        logprobs=want_logprobs,
        top_logprobs=top,
    )


# --- answers --------------------------------------------------------------------------------

def chat_logprobs(engine: Engine, steps: list[Step]) -> dict:
    def entry(token: int, logprob: float) -> dict:
        return {"token": engine.token_text(token), "logprob": logprob, "bytes": engine.token_bytes(token)}

    return {"content": [{**entry(s.token, s.logprob), "top_logprobs": [entry(t, lp) for t, lp in s.top]} for s in steps],
            "refusal": None}


def completion_logprobs(engine: Engine, steps: list[Step], offset: int) -> dict:
    tokens, offsets = [], []
    for s in steps:
        tokens.append(engine.token_text(s.token))
        offsets.append(offset)
        offset += len(tokens[-1])
    return {"tokens": tokens, "token_logprobs": [s.logprob for s in steps],
            "top_logprobs": [{engine.token_text(t): lp for t, lp in s.top} for s in steps], "text_offset": offsets}


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

        def _error(self, status: int, message: str, param: str | None = None, code: str | None = None):
            kind = "invalid_request_error" if status < 500 else "service_unavailable"
            self._json(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})

        def _body(self) -> dict:
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BadRequest(f"the body is not JSON: {e}", None, "invalid_json") from e
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object", None, "invalid_json")
            return body

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
                return self._json(200, {"object": "list", "data": [
                    {"id": n, "object": "model", "owned_by": "gantry", "max_model_len": engine.context} for n in names]})
            if self.path == "/adapters":
                return self._json(200, {"data": sorted(engine.adapters)})
            self._error(404, f"no route {self.path}")

        def do_DELETE(self):
            if self.path.startswith("/adapters/"):
                engine.unload_adapter(self.path[len("/adapters/"):])
                return self._json(200, {"deleted": True})
            self._error(404, f"no route {self.path}")

        def do_POST(self):
            try:
                body = self._body()
                if self.path == "/adapters":
                    if not isinstance(body.get("name"), str) or not body["name"]:
                        raise BadRequest("name must be the adapter's name", "name")
                    if not isinstance(body.get("dir"), str) or not body["dir"]:
                        raise BadRequest("dir must be the adapter's directory", "dir")
                    engine.load_adapter(body["name"], body["dir"])
                    return self._json(200, {"loaded": body["name"]})
                if self.path in ("/v1/completions", "/v1/chat/completions"):
                    return self._complete(body, chat=self.path.endswith("chat/completions"))
                self._error(404, f"no route {self.path}")
            except BadRequest as e:
                self._error(400, str(e), e.param, e.code)

        def _complete(self, body: dict, chat: bool):
            ids, sampling = parse(body, chat, engine)
            requested = body.get("model") if isinstance(body.get("model"), str) else ""
            adapter = requested if requested in engine.adapters else None
            wanted = self.headers.get("x-gantry-adapter")
            if wanted and wanted not in engine.adapters:
                # Never answer with the model itself when an adapter was asked for.
                return self._error(503, f"adapter {wanted} is not loaded on this replica yet; retry shortly",
                                   None, "adapter_not_loaded")
            if wanted:
                adapter = wanted
            stream = bool(body.get("stream"))
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
            created = int(time.time())
            model_name = requested or engine.name
            with metrics.lock:
                metrics.requests += 1
                metrics.inflight += 1
            try:
                pieces = engine.generate(ids, sampling, adapter)
                if stream:
                    return self._stream(pieces, chat, sampling, rid, created, model_name, include_usage)
                text, steps, finish, usage = "", [], "length", {}
                for piece, behind, reason, counted in pieces:
                    text += piece
                    steps += behind
                    if reason:
                        finish, usage = reason, counted
                with metrics.lock:
                    metrics.tokens += usage["completion_tokens"]
                if chat:
                    choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                              "logprobs": chat_logprobs(engine, steps) if sampling.logprobs else None,
                              "finish_reason": finish}
                else:
                    choice = {"index": 0, "text": text, "finish_reason": finish,
                              "logprobs": completion_logprobs(engine, steps, 0) if sampling.logprobs else None}
                self._json(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                                 "created": created, "model": model_name, "choices": [choice], "usage": usage})
            finally:
                with metrics.lock:
                    metrics.inflight -= 1

        def _stream(self, pieces, chat, sampling, rid, created, model_name, include_usage):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            obj = "chat.completion.chunk" if chat else "text_completion"

            def send(payload: dict):
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

            def chunk(choices: list, **extra) -> dict:
                return {"id": rid, "object": obj, "created": created, "model": model_name, "choices": choices,
                        **({"usage": None} if include_usage else {}), **extra}

            usage, offset = {}, 0
            if chat:  # the role first, as OpenAI sends it
                send(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}]))
            for piece, steps, reason, counted in pieces:
                if counted:
                    usage = counted
                if not piece and not steps and not reason:
                    continue
                if chat:
                    logprobs = chat_logprobs(engine, steps) if sampling.logprobs and steps else None
                    choice = {"index": 0, "delta": {"content": piece} if piece else {}, "logprobs": logprobs,
                              "finish_reason": reason}
                else:
                    logprobs = completion_logprobs(engine, steps, offset) if sampling.logprobs and steps else None
                    choice = {"index": 0, "text": piece, "logprobs": logprobs, "finish_reason": reason}
                offset += len(piece)
                send(chunk([choice]))
            with metrics.lock:
                metrics.tokens += usage.get("completion_tokens", 0)
            if include_usage:
                send(chunk([], usage=usage))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def load_model(base_dir: str, model_dir: str | None, dtype: torch.dtype):
    """The base's architecture and weights, then the fine-tune's full weights over them."""
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype)
    hf_repo = None
    if model_dir:
        with open(os.path.join(model_dir, "config.json")) as f:
            hf_repo = json.load(f).get("hf_repo")
        state = load_file(os.path.join(model_dir, "model.safetensors"))
        if model.config.tie_word_embeddings:
            # Tied embeddings are one tensor saved under either name (safetensors' save_model keeps
            # one of them): whichever is there stands for both.
            names = {n for n, p in model.named_parameters(remove_duplicate=False)
                     if p is model.get_input_embeddings().weight}
            saved = [n for n in names if n in state]
            if saved:
                state.update({n: state[saved[0]] for n in names})
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise SystemExit(f"serve: {model_dir}/model.safetensors does not fit {base_dir}: "
                             f"missing {result.missing_keys[:3]}, unexpected {result.unexpected_keys[:3]}")
        model.tie_weights()
        model.to(dtype)
    return model.eval(), hf_repo


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-dir", required=True, help="the catalog base: config, weights, tokenizer, chat template")
    ap.add_argument("--model-dir", help="a full fine-tune of it: model.safetensors and config.json (the trainer's output)")
    ap.add_argument("--hf-repo", help="the base's catalog name, which adapters and fine-tunes must name")
    ap.add_argument("--name", default="model")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    ap.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    ap.add_argument("--threads", type=int, default=None, help="torch's intra-op threads (default: torch's own)")
    # Deployment profile (config) settings.
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="the weights' dtype in memory")
    ap.add_argument("--max-tokens-limit", type=int, default=None, help="refuse requests asking for more tokens")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    base_dir = mounted(args.base_dir)
    model_dir = mounted(args.model_dir) if args.model_dir else None
    model, trained_on = load_model(base_dir, model_dir, getattr(torch, args.dtype))
    if trained_on and args.hf_repo and trained_on != args.hf_repo:
        print(f"serve: {model_dir} was trained on {trained_on}, not {args.hf_repo}", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    engine = Engine(model, tokenizer, args.name, args.max_tokens_limit, args.hf_repo or trained_on)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine, Metrics()))
    print(f"serving {args.name} on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
