"""Synthetic speech for tests, with the libespeak-ng bundled in the PyPI package espeakng-loader.

    python -m gantry_speech.synth --out OUT.wav --text TEXT [--voice en-us] [--rate WPM] [--pitch 0..100]
    python -m gantry_speech.synth --out OUT.wav --script FILE.json

--script is a JSON list of {"text", "voice", "pause_after": seconds} (optional "rate", "pitch"),
rendered into one WAV with silence between utterances: a multi-speaker file with known truth.
Voices are espeak-ng names: en-us, en-us+f3 (female variant), en-gb+m3, de, fr, ...
stdout: {"duration": s, "sample_rate": 22050,
         "utterances": [{"text", "voice", "start", "end"}]}   (one utterance for --text)
start/end are where the voice is audible (espeak's own leading/trailing silence trimmed).
exit 2: bad arguments, bad script, unknown voice   {"error": ...}

Why espeak: it needs no model download and no root, is deterministic, and its voices differ
enough to exercise diarization. It is robotic, so it tests plumbing, not accuracy on humans.
"""
import ctypes
import json
import wave

import numpy as np

from . import _cli

AUDIO_OUTPUT_SYNCHRONOUS = 2
espeakCHARS_UTF8 = 1
espeakRATE, espeakPITCH = 1, 3
DEFAULT_RATE = 160
AUDIBLE = 32  # |sample| above this (about -60 dBFS) counts as audible when trimming

_SYNTH_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
_lib = None
_rate = None
_buf = []


class UnknownVoice(ValueError):
    pass


@_SYNTH_CB
def _cb(wav, numsamples, events):
    if numsamples > 0 and wav:
        _buf.append(ctypes.string_at(wav, numsamples * 2))
    return 0


def _init():
    global _lib, _rate
    if _lib is None:
        import espeakng_loader

        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0)
        if rate <= 0:
            raise RuntimeError("espeak_Initialize failed")
        lib.espeak_SetSynthCallback(_cb)
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                     ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        _lib, _rate = lib, rate
    return _lib, _rate


def synth(text, voice="en-us", rate=DEFAULT_RATE, pitch=None):
    """Return (int16 samples, sample_rate)."""
    lib, sr = _init()
    if lib.espeak_SetVoiceByName(voice.encode()) != 0:
        raise UnknownVoice(f"unknown espeak voice {voice!r}")
    lib.espeak_SetParameter(espeakRATE, int(rate), 0)
    lib.espeak_SetParameter(espeakPITCH, 50 if pitch is None else int(pitch), 0)
    _buf.clear()
    b = text.encode("utf-8") + b"\0"
    lib.espeak_Synth(b, len(b), 0, 0, 0, espeakCHARS_UTF8, None, None)
    lib.espeak_Synchronize()
    pcm = np.frombuffer(b"".join(_buf), dtype="<i2")
    if not len(pcm):
        raise RuntimeError(f"espeak produced no audio for {text!r}")
    return pcm, sr


def _trim(pcm):
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > AUDIBLE)
    return pcm[loud[0]:loud[-1] + 1] if len(loud) else pcm


def render(items):
    """items: [{"text", "voice", "pause_after", "rate"?, "pitch"?}] -> (int16 pcm, sr, utterances)."""
    chunks, utts, pos, sr = [], [], 0, None
    for it in items:
        pcm, sr = synth(it["text"], it.get("voice", "en-us"), it.get("rate", DEFAULT_RATE), it.get("pitch"))
        pcm = _trim(pcm)
        utts.append({"text": it["text"], "voice": it.get("voice", "en-us"),
                     "start": round(pos / sr, 3), "end": round((pos + len(pcm)) / sr, 3)})
        gap = np.zeros(int(round(float(it.get("pause_after", 0)) * sr)), np.int16)
        chunks += [pcm, gap]
        pos += len(pcm) + len(gap)
    return np.concatenate(chunks), sr, utts


def write_wav(path, pcm, sr):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.astype("<i2").tobytes())


def _load_script(path):
    try:
        with open(path, encoding="utf-8") as f:
            items = json.load(f)
    except (OSError, ValueError) as e:
        _cli.fail(_cli.EXIT_BAD_REQUEST, f"cannot read script {path}: {e}")
    if not isinstance(items, list) or not items:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "script must be a non-empty JSON list")
    for i, it in enumerate(items):
        if not isinstance(it, dict) or not isinstance(it.get("text"), str) or not it["text"].strip():
            _cli.fail(_cli.EXIT_BAD_REQUEST, f"script item {i} needs a non-empty \"text\"")
        if not isinstance(it.get("pause_after", 0), (int, float)) or it.get("pause_after", 0) < 0:
            _cli.fail(_cli.EXIT_BAD_REQUEST, f"script item {i}: \"pause_after\" must be seconds >= 0")
    return items


def main():
    p = _cli.Parser(prog="python -m gantry_speech.synth", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text")
    src.add_argument("--script", help="JSON list of {text, voice, pause_after}")
    p.add_argument("--voice", default="en-us")
    p.add_argument("--rate", type=int, default=DEFAULT_RATE, help="words per minute")
    p.add_argument("--pitch", type=int, default=None, help="0..100 (espeak default 50)")
    a = p.parse_args()
    if a.pitch is not None and not 0 <= a.pitch <= 100:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--pitch must be 0..100")
    if not 80 <= a.rate <= 450:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--rate must be 80..450 words per minute")
    if a.script:
        items = _load_script(a.script)
    else:
        items = [{"text": a.text, "voice": a.voice, "rate": a.rate, "pitch": a.pitch, "pause_after": 0}]
    try:
        pcm, sr, utts = render(items)
    except UnknownVoice as e:
        _cli.fail(_cli.EXIT_BAD_REQUEST, str(e))
    write_wav(a.out, pcm, sr)
    _cli.emit({"duration": round(len(pcm) / sr, 3), "sample_rate": sr, "utterances": utts})


if __name__ == "__main__":
    _cli.run(main)
