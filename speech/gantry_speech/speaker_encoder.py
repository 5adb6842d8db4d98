"""Resemblyzer speaker encoder (GE2E d-vector, 256-d) in pure numpy: no torch, no librosa.

Why: diarization needs a speaker embedding, torch is far too heavy for this CPU-only venv, and
the only pretrained speaker model reachable through a package registry is Resemblyzer's
pretrained.pt, shipped in the PyPI wheel resemblyzer==0.1.4 (installed with --no-deps: we use
the file, never the package's code). The .pt is in torch's legacy (pre-1.6) serialization,
parsed here with a restricted unpickler; the 3-layer LSTM + linear + ReLU + L2 norm runs in
numpy. Mel features replicate librosa.feature.melspectrogram as Resemblyzer calls it
(n_fft=400, hop=160, 40 Slaney mels, power 2, periodic hann, centered with zero padding).
"""
import collections
import importlib.util
import os
import pickle
import struct

import numpy as np

SR = 16000
N_FFT, HOP, N_MELS = 400, 160, 40
PARTIAL = 160  # frames per partial utterance (1.6 s), as in Resemblyzer


def weights_path():
    """pretrained.pt inside the installed resemblyzer package, located without importing it."""
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.origin:
        raise RuntimeError("resemblyzer is not installed; run: pip install --no-deps resemblyzer==0.1.4")
    path = os.path.join(os.path.dirname(spec.origin), "pretrained.pt")
    if not os.path.isfile(path):
        raise RuntimeError(f"speaker encoder weights missing: {path}")
    return path


# ---------- weight loading (legacy torch format, no torch needed) ----------
_STORAGE_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64,
                   "LongStorage": np.int64, "IntStorage": np.int32}


class _Unpickler(pickle.Unpickler):
    """Resolves only the few globals a tensor state dict needs; anything else is refused."""

    def __init__(self, f, storages):
        super().__init__(f)
        self.storages = storages

    def find_class(self, module, name):
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return lambda storage, offset, size, stride, *a: ("tensor", storage, offset, size, stride)
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise pickle.UnpicklingError(f"unexpected global {module}.{name} in speaker encoder weights")

    def persistent_load(self, pid):
        # ('storage', storage_type, key, location, numel[, view_metadata])
        _, dtype, key, _loc, _numel = pid[:5]
        self.storages.setdefault(key, dtype)
        return key


def load_legacy_pt(path):
    with open(path, "rb") as f:
        for _ in range(3):  # magic number, protocol version, sys_info (plain data)
            pickle.load(f)
        storages = {}
        obj = _Unpickler(f, storages).load()
        keys = pickle.load(f)
        data = {}
        for k in keys:
            (n,) = struct.unpack("<q", f.read(8))
            dt = np.dtype(storages[k])
            data[k] = np.frombuffer(f.read(n * dt.itemsize), dtype=dt)

    def build(x):
        if isinstance(x, tuple) and x and x[0] == "tensor":
            _, key, off, size, stride = x
            arr = data[key]
            it = arr.itemsize
            return np.lib.stride_tricks.as_strided(arr[off:], shape=tuple(size),
                                                   strides=tuple(s * it for s in stride)).copy()
        if isinstance(x, dict):
            return {k: build(v) for k, v in x.items()}
        return x

    return build(obj)


# ---------- features ----------
def _mel_filters():
    def hz_to_mel(f):
        f = np.asanyarray(f, dtype=np.float64)
        lin = f >= 1000.0
        return np.where(lin, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), f / (200.0 / 3))

    def mel_to_hz(m):
        m = np.asanyarray(m, dtype=np.float64)
        lin = m >= 15.0
        return np.where(lin, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), m * (200.0 / 3))

    fftfreqs = np.linspace(0, SR / 2, 1 + N_FFT // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2), N_MELS + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:N_MELS + 2] - mel_f[:N_MELS]))[:, None]
    return w.astype(np.float32)


_MEL = _mel_filters()
_WIN = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)  # periodic hann


def mel_spectrogram(wav):
    y = np.pad(wav.astype(np.float32), (N_FFT // 2, N_FFT // 2))
    n = 1 + (len(y) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n)[:, None]
    spec = np.abs(np.fft.rfft(y[idx] * _WIN, axis=1)) ** 2
    return (spec @ _MEL.T).astype(np.float32)  # (frames, 40)


def normalize_volume(wav, target_dbfs=-30):
    """Resemblyzer's preprocessing: only ever increase volume, up to -30 dBFS RMS."""
    rms = np.sqrt(np.mean((wav * 32767) ** 2)) + 1e-9
    change = target_dbfs - 20 * np.log10(rms / 32767)
    return wav * (10 ** (change / 20)) if change > 0 else wav


def _sig(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


class VoiceEncoder:
    def __init__(self, weights=None):
        sd = load_legacy_pt(weights or weights_path())["model_state"]
        self.layers = [(sd[f"lstm.weight_ih_l{k}"], sd[f"lstm.weight_hh_l{k}"],
                        sd[f"lstm.bias_ih_l{k}"] + sd[f"lstm.bias_hh_l{k}"]) for k in range(3)]
        self.lin_w, self.lin_b = sd["linear.weight"], sd["linear.bias"]

    def _forward(self, mels):  # (B, T, 40) -> (B, 256), L2-normalized
        x = mels
        h = None
        for wih, whh, b in self.layers:
            B, T, _ = x.shape
            H = whh.shape[1]
            h = np.zeros((B, H), np.float32)
            c = np.zeros((B, H), np.float32)
            xin = x @ wih.T + b  # (B, T, 4H)
            out = np.empty((B, T, H), np.float32)
            for t in range(T):
                i, f, g, o = np.split(xin[:, t] + h @ whh.T, 4, axis=1)
                c = _sig(f) * c + _sig(i) * np.tanh(g)
                h = _sig(o) * np.tanh(c)
                out[:, t] = h
            x = out
        e = np.maximum(0, h @ self.lin_w.T + self.lin_b)
        return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-9)

    @staticmethod
    def _partials(wav, rate=1.3, min_coverage=0.75):
        """Mel slices of 1.6 s partial utterances, as Resemblyzer's embed_utterance cuts them."""
        wav = normalize_volume(wav)
        n_frames = int(np.ceil((len(wav) + 1) / HOP))
        step = int(np.round((SR / rate) / HOP))
        starts = list(range(0, max(1, n_frames - PARTIAL + step + 1), step))
        last = starts[-1] * HOP
        if (len(wav) - last) / (PARTIAL * HOP) < min_coverage and len(starts) > 1:
            starts = starts[:-1]
        need = (starts[-1] + PARTIAL) * HOP
        if need >= len(wav):
            wav = np.pad(wav, (0, need - len(wav)))
        mel = mel_spectrogram(wav)
        return np.stack([mel[s:s + PARTIAL] for s in starts])

    def embed_utterances(self, wavs, batch=256):
        """Embed many float32 16 kHz clips at once (one LSTM pass over all partials: the
        per-timestep loop dominates, so batching across clips is what makes this fast)."""
        if not wavs:
            return np.zeros((0, 256), np.float32)
        parts = [self._partials(w) for w in wavs]
        owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
        allp = np.concatenate(parts)
        emb = np.concatenate([self._forward(allp[i:i + batch]) for i in range(0, len(allp), batch)])
        out = np.stack([emb[owner == i].mean(0) for i in range(len(wavs))])
        return out / (np.linalg.norm(out, axis=1, keepdims=True) + 1e-9)

    def embed_utterance(self, wav):
        return self.embed_utterances([wav])[0]
