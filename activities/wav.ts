/**
 * The decoded audio the recognizer reads: 16 kHz mono 16-bit PCM WAV. Its
 * layout is read from the RIFF chunks (ffmpeg may write a LIST chunk before
 * `data`), so a slice of it (a recognition chunk) is a byte range plus a new
 * header, and its loudness per 100 ms frame is read by streaming.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';

export interface WavLayout {
  dataOffset: number;
  dataBytes: number;
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
}

export async function readWavLayout(path: string): Promise<WavLayout> {
  const fh = await open(path, 'r');
  try {
    const head = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead < 12 || head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE')
      throw new Error('not a RIFF/WAVE file');
    let at = 12;
    let fmt: Omit<WavLayout, 'dataOffset' | 'dataBytes'> | null = null;
    while (at + 8 <= bytesRead) {
      const id = head.toString('ascii', at, at + 4);
      const size = head.readUInt32LE(at + 4);
      if (id === 'fmt ') {
        fmt = {
          channels: head.readUInt16LE(at + 10),
          sampleRate: head.readUInt32LE(at + 12),
          bitsPerSample: head.readUInt16LE(at + 22),
        };
      } else if (id === 'data') {
        if (!fmt) throw new Error('WAVE data before its format');
        const { size: fileBytes } = await fh.stat();
        // Streamed WAVs may carry a placeholder size: the data runs to the end of the file.
        return { ...fmt, dataOffset: at + 8, dataBytes: Math.min(size, fileBytes - at - 8) };
      }
      at += 8 + size + (size % 2);
    }
    throw new Error('no WAVE data chunk');
  } finally {
    await fh.close();
  }
}

function header(layout: WavLayout, dataBytes: number): Buffer {
  const h = Buffer.alloc(44);
  const blockAlign = (layout.channels * layout.bitsPerSample) / 8;
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(layout.channels, 22);
  h.writeUInt32LE(layout.sampleRate, 24);
  h.writeUInt32LE(layout.sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(layout.bitsPerSample, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Writes [startSec, endSec) of `src` as its own WAV file. */
export async function writeWavSlice(src: string, layout: WavLayout, startSec: number, endSec: number, out: string) {
  const blockAlign = (layout.channels * layout.bitsPerSample) / 8;
  const byteAt = (s: number) => Math.min(layout.dataBytes, Math.round(s * layout.sampleRate) * blockAlign);
  const from = byteAt(startSec);
  const to = byteAt(endSec);
  const sink = createWriteStream(out);
  sink.write(header(layout, to - from));
  if (to > from)
    await pipeline(createReadStream(src, { start: layout.dataOffset + from, end: layout.dataOffset + to - 1 }), sink);
  else await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

/** Root-mean-square loudness of each 100 ms frame (16-bit mono). */
export async function frameLoudness(src: string, layout: WavLayout): Promise<number[]> {
  const frameBytes = Math.round(layout.sampleRate / 10) * 2;
  const out: number[] = [];
  let carry: Buffer = Buffer.alloc(0);
  const stream = createReadStream(src, {
    start: layout.dataOffset,
    end: layout.dataOffset + layout.dataBytes - 1,
    highWaterMark: 1 << 20,
  });
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    const buf: Buffer = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    let at = 0;
    for (; at + frameBytes <= buf.length; at += frameBytes) {
      let sum = 0;
      for (let i = at; i < at + frameBytes; i += 2) {
        const s = buf.readInt16LE(i);
        sum += s * s;
      }
      out.push(Math.sqrt(sum / (frameBytes / 2)));
    }
    carry = Buffer.from(buf.subarray(at));
  }
  return out;
}

/**
 * Where to cut long audio into recognition chunks of about `chunkSeconds`:
 * at the quietest 100 ms frame in the last fifth of each chunk, so a cut
 * falls in a pause rather than through a word. Returns [start, end) pairs in
 * seconds covering the whole audio.
 */
export function planChunks(loudness: number[], durationSeconds: number, chunkSeconds: number): Array<[number, number]> {
  const chunks: Array<[number, number]> = [];
  let start = 0;
  while (durationSeconds - start > chunkSeconds) {
    const latest = start + chunkSeconds;
    const earliest = latest - chunkSeconds / 5;
    let cut = latest;
    let quietest = Infinity;
    for (let f = Math.ceil(earliest * 10); f < Math.floor(latest * 10) && f < loudness.length; f++) {
      if (loudness[f] < quietest) {
        quietest = loudness[f];
        cut = (f + 0.5) / 10;
      }
    }
    chunks.push([start, cut]);
    start = cut;
  }
  chunks.push([start, durationSeconds]);
  return chunks;
}
