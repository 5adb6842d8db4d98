"""Energy voice activity detection: where in a 16 kHz signal there is sound loud enough to be speech.

Used by diarize.py (regions to embed) and by transcribe.py as a guard against Whisper's
habit of inventing text ("You", "Thanks for watching") for silence: a chunk with no regions
is not sent to Whisper at all. Energy cannot tell speech from steady noise, so the threshold
adapts to the file (noise floor, loudness) and the guard only ever removes text, never adds.
"""
import numpy as np

SAMPLE_RATE = 16000
FRAME = 160  # 10 ms
MIN_GAP_S = 0.3  # pauses shorter than this stay inside a region
MIN_REGION_S = 0.25  # shorter blips (clicks, breaths) are ignored
ABS_FLOOR_DB = -60.0  # frames below -60 dBFS are silence whatever the file's level


def speech_regions(x):
    """[(start_sample, end_sample)] of speech in float32 samples x, by 10 ms frame energy."""
    n = len(x) // FRAME
    if n == 0:
        return []
    frames = x[: n * FRAME].reshape(n, FRAME)
    db = 10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1) + 1e-12)
    loud, quiet = np.percentile(db, 95), np.percentile(db, 10)
    # silence is below loud-35 dB, or below a noise floor of quiet+10 dB (kept at least 15 dB
    # under the loud level, for files that are nearly all speech), or below -60 dBFS
    thr = max(loud - 35.0, min(quiet + 10.0, loud - 15.0), ABS_FLOOR_DB)
    speech = db > thr
    regions, start, silent = [], None, 0
    gap_frames = int(MIN_GAP_S * SAMPLE_RATE / FRAME)
    for i, s in enumerate(speech):
        if s:
            if start is None:
                start = i
            silent = 0
        elif start is not None:
            silent += 1
            if silent >= gap_frames:
                regions.append((start, i - silent + 1))
                start, silent = None, 0
    if start is not None:
        regions.append((start, n - silent))
    min_frames = int(MIN_REGION_S * SAMPLE_RATE / FRAME)
    return [(a * FRAME, b * FRAME) for a, b in regions if b - a >= min_frames]
