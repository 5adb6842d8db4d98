"""Convert any audio input to the canonical 16 kHz mono s16le WAV with ffmpeg.

    python -m gantry_speech.decode --input ANY_AUDIO --output OUT.wav [--max-seconds N]

stdout: {"duration": seconds, "sample_rate": 16000}
exit 2: bad arguments / input file missing          {"error": ...}
exit 3: ffmpeg cannot decode it (or no audio in it)  {"error": "<ffmpeg's reason>"}
exit 4: longer than --max-seconds                    {"error": "too_long", "duration_at_least": s}

Inputs are the audio containers of INPUT_FORMATS (tested: wav mp3 m4a webm flac ogg opus aac); the container is
detected from content, not from the extension. For --max-seconds, a duration the container's
header states (WAV, MP4, Ogg, FLAC...) longer than the limit is refused before decoding; then
ffmpeg gets `-t N+1`, so audio whose header says nothing (or understates) is refused after
decoding N+1 seconds instead of all of it. The output is
written to a temporary name and renamed, so OUT.wav exists only if decoding succeeded.
"""
import os
import re
import subprocess
import wave
from pathlib import Path

from . import _cli
from .models import ffmpeg_exe

SAMPLE_RATE = 16000
EXIT_UNDECODABLE = 3
EXIT_TOO_LONG = 4


def _reason(stderr, input_path):
    """Short, user-facing reason from ffmpeg's stderr: its distinct messages without the
    "[in#0 @ 0x...]" prefixes or the input path, e.g. "Failed to find two consecutive MPEG
    audio frames; Invalid data found when processing input"."""
    text = stderr.decode("utf-8", "replace").replace(str(input_path), "<input>")
    if "matches no streams" in text or "does not contain any stream" in text:
        return "input has no audio stream"
    reasons = []
    for raw in text.splitlines():
        ln = re.sub(r"^\[[^\]]*\]\s*", "", raw.strip())
        ln = re.sub(r"^(Error opening input( files?)?|<input>):\s*", "", ln)
        ln = ln.rstrip(".")
        if ln and not ln.startswith("Error opening input file") and ln not in reasons:
            reasons.append(ln)
    return "; ".join(reasons[:3])[:300] or "ffmpeg failed without a message"


# The containers a tenant's audio may be, by ffmpeg demuxer name. Without this list ffmpeg also
# reads playlists and manifests (HLS, DASH, concat, image sequences), which open other paths of the
# speech host: an uploaded DASH manifest naming a local file would have decoded that file.
INPUT_FORMATS = "wav,w64,mp3,mov,matroska,flac,ogg,aac,aiff,caf,amr,wv"
INPUT_OPTIONS = ["-format_whitelist", INPUT_FORMATS, "-protocol_whitelist", "file"]


_DURATION = re.compile(rb"Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)")


def header_duration(input_path):
    """The duration the container's header states, in seconds (None when it states none): ffmpeg
    reads only the header when given no output."""
    proc = subprocess.run([ffmpeg_exe(), "-nostdin", "-hide_banner", *INPUT_OPTIONS, "-i", str(input_path)],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    m = _DURATION.search(proc.stderr)
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def decode(input_path, output_path, max_seconds=None):
    """Returns the decoded duration in seconds; calls _cli.fail on any failure."""
    output_path = Path(output_path)
    if max_seconds is not None:
        stated = header_duration(input_path)
        if stated is not None and stated > max_seconds:
            _cli.fail(EXIT_TOO_LONG, "too_long", duration_at_least=round(stated, 3))
    tmp = output_path.with_name(f".{output_path.name}.{os.getpid()}.tmp.wav")
    cmd = [ffmpeg_exe(), "-nostdin", "-hide_banner", "-v", "error", "-y", *INPUT_OPTIONS, "-i", str(input_path)]
    if max_seconds is not None:
        cmd += ["-t", f"{max_seconds + 1:g}"]
    cmd += ["-map", "0:a:0", "-vn", "-sn", "-dn", "-ac", "1", "-ar", str(SAMPLE_RATE),
            "-c:a", "pcm_s16le", "-f", "wav", str(tmp)]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        if proc.returncode != 0:
            _cli.fail(EXIT_UNDECODABLE, _reason(proc.stderr, input_path))
        with wave.open(str(tmp), "rb") as w:
            frames = w.getnframes()
        if frames == 0:
            _cli.fail(EXIT_UNDECODABLE, "no audio samples could be decoded")
        duration = frames / SAMPLE_RATE
        if max_seconds is not None and duration > max_seconds:
            _cli.fail(EXIT_TOO_LONG, "too_long", duration_at_least=round(duration, 3))
        os.replace(tmp, output_path)
        return duration
    finally:
        if tmp.exists():
            tmp.unlink()


def main():
    p = _cli.Parser(prog="python -m gantry_speech.decode", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--max-seconds", type=float, default=None)
    a = p.parse_args()
    if not Path(a.input).is_file():
        _cli.fail(_cli.EXIT_BAD_REQUEST, f"input file not found: {a.input}")
    if a.max_seconds is not None and a.max_seconds <= 0:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--max-seconds must be > 0")
    duration = decode(a.input, a.output, a.max_seconds)
    _cli.emit({"duration": round(duration, 3), "sample_rate": SAMPLE_RATE})


if __name__ == "__main__":
    _cli.run(main)
