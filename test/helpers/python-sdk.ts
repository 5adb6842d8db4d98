/**
 * The official Python SDK and CLI (PyPI `together`, pinned in test/compat/python/requirements.txt;
 * ./dev test installs it into .venv-together), run against a test platform as a user runs them:
 * the CLI as a subprocess, SDK scripts with the virtual environment's Python.
 *
 * Each run gets a clean environment: the platform's URL as TOGETHER_BASE_URL (the bare host, as
 * the 3.x SDK expects: its paths name their version), the tenant's key, telemetry off, and a HOME of
 * its own, so nothing of the machine's own configuration or an AI agent's environment (which
 * switches the CLI to JSON output) leaks in.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const VENV = process.env.GANTRY_TOGETHER_VENV ?? path.resolve(__dirname, '../../.venv-together');
const home = mkdtempSync(path.join(tmpdir(), 'gantry-together-home-'));

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface PythonClient {
  baseUrl: string;
  key: string;
  /** Working directory of the runs (downloads land here unless told otherwise). */
  cwd?: string;
  /** More environment variables for the runs (the CLI's own settings). */
  env?: Record<string, string>;
}

function environment(c: PythonClient): NodeJS.ProcessEnv {
  return {
    PATH: `${path.join(VENV, 'bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: home,
    LANG: 'C.UTF-8',
    TOGETHER_BASE_URL: c.baseUrl,
    TOGETHER_API_KEY: c.key,
    TOGETHER_TELEMETRY_DISABLED: '1',
    NO_COLOR: '1',
    TERM: 'dumb',
    // Wide enough that tables do not cut ids short.
    COLUMNS: '250',
    ...c.env,
  };
}

function run(command: string, args: string[], c: PythonClient, input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: c.cwd ?? home, env: environment(c), stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

/** `together --non-interactive <args>`; rejects unless it exits 0, with what it printed. */
export async function together(c: PythonClient, ...args: string[]): Promise<string> {
  const r = await togetherRun(c, ...args);
  if (r.code !== 0) {
    throw new Error(`together ${args.join(' ')} exited ${r.code}:\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`);
  }
  return r.stdout;
}

/** `together --non-interactive <args>`, whatever its exit code. */
export function togetherRun(c: PythonClient, ...args: string[]): Promise<Run> {
  return run(path.join(VENV, 'bin', 'together'), ['--non-interactive', ...args], c);
}

/** `together --json ...`, parsed. */
export async function togetherJson<T = any>(c: PythonClient, ...args: string[]): Promise<T> {
  const out = await together(c, '--json', ...args);
  try {
    return JSON.parse(out) as T;
  } catch {
    throw new Error(`together --json ${args.join(' ')} printed no JSON:\n${out.slice(-3000)}`);
  }
}

/** Runs a Python script with the SDK's interpreter; resolves with its stdout parsed as JSON. */
export async function pythonSdk<T = any>(c: PythonClient, script: string): Promise<T> {
  const r = await run(path.join(VENV, 'bin', 'python'), ['-'], c, script);
  if (r.code !== 0) throw new Error(`the SDK script exited ${r.code}:\n${r.stderr.slice(-4000)}`);
  return JSON.parse(r.stdout) as T;
}
