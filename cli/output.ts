/**
 * What the tool prints. Results go to stdout: tables for people, or with
 * `--json` exactly one JSON document. Notes and progress bars go to stderr;
 * bars only when stderr is a terminal.
 */
import { createInterface } from 'node:readline/promises';
import cliProgress from 'cli-progress';
import Table from 'cli-table3';

export type Cell = string | number | boolean | null | undefined;

export class Output {
  constructor(readonly json: boolean) {}

  /** The command's result: `doc` as JSON with --json, otherwise what `human` prints. */
  result(doc: unknown, human: () => void): void {
    if (this.json) process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
    else human();
  }

  /** A line for people about what is happening (stderr: stdout stays the result). */
  note(message: string): void {
    process.stderr.write(`${message}\n`);
  }
}

export const print = (text: string) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);

const cell = (v: Cell): string => (v === null || v === undefined || v === '' ? '-' : String(v));

/** Plain tables: no colours, so piped output and tests read the same text a terminal shows; no lines between rows. */
const style = { head: [] as string[], border: [] as string[] };
const chars = { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' };

export function table(head: string[], rows: Cell[][]): string {
  const t = new Table({ head, style, chars });
  for (const r of rows) t.push(r.map(cell));
  // A rule under the header only: the top border with the junctions of a middle line.
  const lines = t.toString().split('\n');
  const rule = lines[0].replace('┌', '├').replace(/┬/g, '┼').replace('┐', '┤');
  return [lines[0], lines[1], rule, ...lines.slice(2)].join('\n');
}

/** A two-column table of one object's fields. */
export function details(pairs: [string, Cell][]): string {
  const t = new Table({ style, chars });
  for (const [k, v] of pairs) t.push({ [k]: cell(v) });
  return t.toString();
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

/** ISO strings and unix seconds as `YYYY-MM-DD HH:MM:SS` UTC. */
export function time(v: string | number | null | undefined): string {
  if (v === null || v === undefined || v === '') return '-';
  const d = typeof v === 'number' ? new Date(v * 1000) : new Date(v);
  if (Number.isNaN(d.getTime())) return String(v);
  return d
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

export function money(v: number | string | null | undefined, currency = 'USD'): string {
  if (v === null || v === undefined || v === '') return '-';
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  const digits = Math.abs(n) > 0 && Math.abs(n) < 0.01 ? 6 : 2;
  return `${currency === 'USD' ? '$' : `${currency} `}${n.toFixed(digits)}`;
}

export const yesNo = (b: unknown) => (b === undefined || b === null ? '-' : b ? 'yes' : 'no');

export interface Progress {
  /** Bytes done so far. */
  update(done: number): void;
  stop(): void;
}

/** A progress bar on stderr when it is a terminal; otherwise nothing. `total` undefined: bytes so far only. */
export function progressBar(label: string, total: number | undefined): Progress {
  if (!process.stderr.isTTY) return { update() {}, stop() {} };
  const known = total !== undefined && total > 0;
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: known ? `${label} [{bar}] {percentage}% | {done} / {size} | {rate}/s` : `${label} {done} | {rate}/s`,
      hideCursor: true,
      clearOnComplete: false,
      barsize: 30,
      etaBuffer: 20,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = Date.now();
  const payload = (done: number) => ({
    done: bytes(done),
    size: bytes(total),
    rate: bytes(Math.round(done / Math.max((Date.now() - started) / 1000, 0.001))),
  });
  bar.start(known ? total : 1, 0, payload(0));
  let last = 0;
  return {
    update(done: number) {
      last = done;
      bar.update(known ? done : 0, payload(done));
    },
    stop() {
      bar.update(known ? last : 0, payload(last));
      bar.stop();
    },
  };
}

/** Asks on the terminal; true only for an explicit yes. */
export async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
