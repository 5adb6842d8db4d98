/**
 * `./dev bench [names...]`: runs every bench in bench/ (or the ones named) one after another,
 * each in its own process with the machine to itself, then prints a Markdown table of every
 * check (median, min–max over the rounds, target, met) headed by the date and this machine,
 * ready for the README's table. Exits non-zero when a bench fails or misses a target.
 */
import { spawn } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import type { BenchResult } from './lib/rounds';
import { NODE_TYPESCRIPT_ARGS } from '../platform/node-typescript';

/** Every bench, shortest first, with the arguments the README's figures use (their defaults). */
const BENCHES = [
  'tokenization',
  'upload',
  'file-validation',
  'queue',
  'gateway',
  'clusters',
  'trainer',
  'torch-trainer',
  'audio',
  'model-server',
  'batches',
];

function runOne(name: string): Promise<{ result: BenchResult | null; code: number; seconds: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...NODE_TYPESCRIPT_ARGS, path.join(__dirname, `${name}.ts`)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('close', (code) => {
      let result: BenchResult | null = null;
      try {
        result = JSON.parse(out.trim().split('\n').at(-1) ?? '') as BenchResult;
      } catch {
        // no result line: the bench failed before it measured
      }
      resolve({ result, code: code ?? 1, seconds: (Date.now() - started) / 1000 });
    });
  });
}

async function main() {
  const names = process.argv.slice(2).length ? process.argv.slice(2) : BENCHES;
  const unknown = names.filter((n) => !BENCHES.includes(n));
  if (unknown.length) throw new Error(`unknown bench ${unknown.join(', ')}; known: ${BENCHES.join(', ')}`);
  const rows: string[] = [];
  let failed = false;
  for (const name of names) {
    process.stderr.write(`\n[bench] ===== ${name} =====\n`);
    const { result, code, seconds } = await runOne(name);
    if (!result) {
      failed = true;
      rows.push(`| ${name} | the bench failed (exit ${code}) | | | |`);
      continue;
    }
    if (code !== 0) failed = true;
    for (const c of result.checks) {
      rows.push(
        `| ${name} | ${c.name} | ${c.median} (${c.min}–${c.max}) | ${c.target} | ${!c.judged ? 'shown' : c.met ? 'met' : '**missed**'} |`,
      );
    }
    process.stderr.write(`[bench] ${name}: ${seconds.toFixed(0)} s\n`);
  }
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB`;
  process.stdout.write(
    [
      '',
      `Measured ${new Date().toISOString().slice(0, 10)} on ${machine}; median (min–max) of ${process.env.GANTRY_BENCH_ROUNDS ?? 5} interleaved rounds.`,
      '',
      '| bench | check | result | target | |',
      '| --- | --- | --- | --- | --- |',
      ...rows,
      '',
    ].join('\n'),
  );
  process.exitCode = failed ? 1 : 0;
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
