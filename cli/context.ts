/**
 * What every command gets: the API client (base URL from --base-url, else
 * GANTRY_BASE_URL, else the local default; key from SERVICE_API_KEY), the
 * output (tables or --json), and option parsers that turn bad values into
 * usage errors (exit code 2).
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { ApiClient, apiTarget, DEFAULT_BASE_URL } from './http';
import { Output } from './output';

export interface Context {
  client: ApiClient;
  out: Output;
  /** The key's identity (GET /v1/whoami), fetched once. */
  whoami(): Promise<Whoami>;
}

export interface Whoami {
  api_key_id: string;
  organization_id: string;
  organization_name: string;
  project_id: string;
  project_name: string;
  project_slug: string;
  user_id?: string;
  project_role?: string;
  organization_role?: string;
}

export function context(cmd: Command): Context {
  const g = cmd.optsWithGlobals<{ baseUrl?: string; json?: boolean }>();
  const client = new ApiClient(
    apiTarget(g.baseUrl ?? process.env.GANTRY_BASE_URL ?? DEFAULT_BASE_URL),
    process.env.SERVICE_API_KEY,
  );
  let me: Promise<Whoami> | undefined;
  return { client, out: new Output(!!g.json), whoami: () => (me ??= client.get<Whoami>('/v1/whoami')) };
}

// ---- option parsers (commander calls them with the raw string) ----

export function int(min?: number, max?: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('not an integer.');
    checkRange(n, min, max);
    return n;
  };
}

export function float(min?: number, max?: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('not a number.');
    checkRange(n, min, max);
    return n;
  };
}

function checkRange(n: number, min?: number, max?: number) {
  if (min !== undefined && max !== undefined && (n < min || n > max))
    throw new InvalidArgumentError(`must be between ${min} and ${max}.`);
  if (min !== undefined && n < min) throw new InvalidArgumentError(`must be at least ${min}.`);
  if (max !== undefined && n > max) throw new InvalidArgumentError(`must be at most ${max}.`);
}

export function oneOf<T extends string>(...values: T[]) {
  return (raw: string): T => {
    if (!(values as string[]).includes(raw)) throw new InvalidArgumentError(`must be one of ${values.join(', ')}.`);
    return raw as T;
  };
}

export function bool(raw: string): boolean {
  if (/^(true|yes|1)$/i.test(raw)) return true;
  if (/^(false|no|0)$/i.test(raw)) return false;
  throw new InvalidArgumentError('must be true or false.');
}

/** A JSON object given inline, or read from a file as `@path`. */
export function jsonObject(raw: string): Record<string, unknown> {
  let text = raw;
  if (raw.startsWith('@')) {
    try {
      text = readFileSync(raw.slice(1), 'utf8');
    } catch (err) {
      throw new InvalidArgumentError(`cannot read ${raw.slice(1)} (${(err as NodeJS.ErrnoException).code}).`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgumentError(`not valid JSON (${(err as Error).message}).`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new InvalidArgumentError('not a JSON object.');
  return value as Record<string, unknown>;
}

/** Repeated options collect into a list. */
export const collect = (value: string, previous: string[] = []) => [...previous, value];
