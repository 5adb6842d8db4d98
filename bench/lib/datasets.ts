/** Synthetic datasets for benchmarks: generated here, never downloaded. */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';

/** Writes conversational fine-tuning JSONL of about `bytes` bytes; returns the line count. */
export async function writeConversationalJsonl(file: string, bytes: number): Promise<number> {
  const out = createWriteStream(file, { highWaterMark: 1 << 20 });
  let written = 0;
  let lines = 0;
  while (written < bytes) {
    const i = lines++;
    const line =
      JSON.stringify({
        messages: [
          { role: 'system', content: 'You are a careful assistant who shows its working.' },
          { role: 'user', content: `Question ${i}: what is ${i} plus ${i * 7}? Explain step by step.` },
          { role: 'assistant', content: `Start from ${i}, add ${i * 7}, and the sum is ${i * 8}.`, weight: 1 },
        ],
      }) + '\n';
    written += Buffer.byteLength(line);
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return lines;
}

export function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = require('node:fs').readFileSync(`/proc/${pid}/status`, 'utf8') as string;
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!m) throw new Error(`no ${field} for pid ${pid}`);
  return Number(m[1]) / 1024; // MiB
}

/** Resets a process's peak RSS (Linux: writing 5 to clear_refs), so VmHWM measures from now on. */
export function resetPeakRss(pid: number): void {
  require('node:fs').writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/**
 * Uploads a file as multipart/form-data the way curl does: the envelope
 * written by hand, the file piped from disk. (undici's FormData body streams
 * a file Blob in small chunks and caps a loopback upload near 100 MiB/s on
 * this machine, which would measure the client rather than Gantry.)
 */
export async function streamMultipartUpload(
  url: string,
  apiKey: string,
  fields: Record<string, string>,
  file: string,
): Promise<{ status: number; body: string }> {
  const http = await import('node:http');
  const { createReadStream, statSync } = await import('node:fs');
  const { pipeline } = await import('node:stream/promises');
  const boundary = `----gantry-bench-${Date.now()}`;
  let head = '';
  for (const [k, v] of Object.entries(fields)) {
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  }
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="upload"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const length = Buffer.byteLength(head) + statSync(file).size + Buffer.byteLength(tail);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': length,
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.write(head);
    pipeline(
      createReadStream(file, { highWaterMark: 1 << 20 }),
      async function* (source) {
        for await (const chunk of source) yield chunk;
        yield Buffer.from(tail);
      },
      req,
    ).catch(reject);
  });
}
