"""Reading the canonical intermediate format: 16 kHz mono s16le WAV (what decode.py writes).

transcribe.py and diarize.py accept only this format so that decoding (and its failure modes)
happens in exactly one place, decode.py.
"""
import wave

import numpy as np

SAMPLE_RATE = 16000


class BadAudio(ValueError):
    pass


def read_wav16k(path):
    """Return float32 samples in [-1, 1]. Raises BadAudio if not 16 kHz mono 16-bit PCM WAV."""
    try:
        with wave.open(str(path), "rb") as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (SAMPLE_RATE, 1, 2):
                raise BadAudio(
                    f"{path}: expected 16 kHz mono 16-bit WAV, got {w.getframerate()} Hz, "
                    f"{w.getnchannels()} channel(s), {8 * w.getsampwidth()}-bit; convert it with gantry_speech.decode"
                )
            pcm = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as e:
        raise BadAudio(f"{path}: not a PCM WAV file ({e}); convert it with gantry_speech.decode") from e
    except FileNotFoundError as e:
        raise BadAudio(f"{path}: no such file") from e
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
