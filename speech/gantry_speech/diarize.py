"""Who spoke when: energy VAD + Resemblyzer d-vectors + agglomerative clustering.

    python -m gantry_speech.diarize --input WAV16K [--min-speakers N] [--max-speakers M]
        [--threshold D]

stdout: {"turns": [{"start": s, "end": e, "speaker": "SPEAKER_00"}], "speakers": k}
exit 2: bad arguments or input not 16 kHz mono WAV    {"error": ...}
exit 1: anything else (e.g. speaker encoder weights missing)

Pipeline, and why:
1. Energy VAD (vad.py, 10 ms frames) finds speech regions; gaps shorter than 0.3 s are
   bridged so word pauses do not split a region.
2. Regions longer than 3 s are cut into equal windows of 1.5-3 s, so a speaker change inside
   one region (no pause between speakers) can still be found, at window resolution.
3. One 256-d d-vector per window (speaker_encoder, numpy port of Resemblyzer).
4. Agglomerative clustering, cosine distance, average linkage, cut at --threshold when the
   speaker count is free; if that count is outside [min, max] it is re-clustered with the
   bound as n_clusters.
5. Speaker ids are numbered by first appearance; consecutive windows of the same speaker
   separated by at most 0.5 s are merged into one turn.
Silence produces no turns ({"turns": [], "speakers": 0}); nothing is guessed.
"""
import numpy as np

from . import _cli
from .audio import SAMPLE_RATE, BadAudio, read_wav16k
from .vad import speech_regions

MAX_WINDOW_S = 3.0  # longer regions are split into windows of 1.5-3 s
MERGE_GAP_S = 0.5  # same-speaker windows closer than this become one turn
DEFAULT_THRESHOLD = 0.3  # cosine distance at which clusters stop merging


def windows(regions):
    """Split each region into equal windows no longer than MAX_WINDOW_S (>= half of it)."""
    max_len = int(MAX_WINDOW_S * SAMPLE_RATE)
    out = []
    for a, b in regions:
        k = max(1, int(np.ceil((b - a) / max_len)))
        edges = np.linspace(a, b, k + 1).astype(int)
        out += list(zip(edges[:-1], edges[1:], strict=True))
    return out


def cluster(emb, min_speakers, max_speakers, threshold):
    from sklearn.cluster import AgglomerativeClustering

    n = len(emb)
    if n == 1:
        return np.zeros(1, int)

    def fit(**kw):
        return AgglomerativeClustering(metric="cosine", linkage="average", **kw).fit_predict(emb)

    labels = fit(n_clusters=None, distance_threshold=threshold)
    k = len(set(labels))
    want = k
    if min_speakers is not None and k < min_speakers:
        want = min(min_speakers, n)
    if max_speakers is not None and k > max_speakers:
        want = max_speakers
    return labels if want == k else fit(n_clusters=want)


def turns_from(wins, labels):
    ids, turns = {}, []
    for (a, b), lab in zip(wins, labels, strict=True):
        spk = ids.setdefault(int(lab), f"SPEAKER_{len(ids):02d}")
        start, end = a / SAMPLE_RATE, b / SAMPLE_RATE
        if turns and turns[-1]["speaker"] == spk and start - turns[-1]["end"] <= MERGE_GAP_S:
            turns[-1]["end"] = end
        else:
            turns.append({"start": start, "end": end, "speaker": spk})
    for t in turns:
        t["start"], t["end"] = round(t["start"], 3), round(t["end"], 3)
    return turns, len(ids)


def diarize(x, min_speakers=None, max_speakers=None, threshold=DEFAULT_THRESHOLD, encoder=None):
    wins = windows(speech_regions(x))
    if not wins:
        return {"turns": [], "speakers": 0}
    if encoder is None:
        from .speaker_encoder import VoiceEncoder

        encoder = VoiceEncoder()
    emb = encoder.embed_utterances([x[a:b] for a, b in wins])
    turns, k = turns_from(wins, cluster(emb, min_speakers, max_speakers, threshold))
    return {"turns": turns, "speakers": k}


def main():
    p = _cli.Parser(prog="python -m gantry_speech.diarize", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="16 kHz mono s16le WAV (from gantry_speech.decode)")
    p.add_argument("--min-speakers", type=int, default=None)
    p.add_argument("--max-speakers", type=int, default=None)
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help=f"cosine distance cut when the count is free (default {DEFAULT_THRESHOLD})")
    a = p.parse_args()
    if a.min_speakers is not None and a.min_speakers < 1:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--min-speakers must be >= 1")
    if a.max_speakers is not None and a.max_speakers < 1:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--max-speakers must be >= 1")
    if a.min_speakers is not None and a.max_speakers is not None and a.min_speakers > a.max_speakers:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--min-speakers must be <= --max-speakers")
    if not 0.0 < a.threshold < 2.0:
        _cli.fail(_cli.EXIT_BAD_REQUEST, "--threshold must be in (0, 2)")
    try:
        x = read_wav16k(a.input)
    except BadAudio as e:
        _cli.fail(_cli.EXIT_BAD_REQUEST, str(e))
    _cli.emit(diarize(x, a.min_speakers, a.max_speakers, a.threshold))


if __name__ == "__main__":
    _cli.run(main)
