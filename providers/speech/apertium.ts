/**
 * Text translation out of English with Apertium (Debian's `apertium` and its language-pair
 * packages), the step that makes a translation into a language other than English: speech is
 * first translated into English by the recognizer (Whisper's own task), then its segments are
 * translated here, line for line. Apertium is rule-based (shallow transfer): deterministic, fast,
 * on the CPU, and installable from the registries this project reaches, where no neural
 * translation model is.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { subprocessEnv } from '../process/subprocess-env';
import { TRANSLATION_TARGETS } from '../../shared/audio';

/** The speech host lacks what a translation needs (Apertium, or the language pair's package). */
export class TranslationUnavailable extends Error {}

/** Runs `apertium -u <mode>` over `input` and answers what it wrote. */
async function apertium(mode: string, input: string): Promise<string> {
  // A file, not stdin: Apertium's script opens /dev/stdin, which cannot be opened when stdin is the
  // socket Node gives a child process.
  const dir = await mkdtemp(path.join(tmpdir(), 'gantry-apertium-'));
  const file = path.join(dir, 'input.txt');
  try {
    await writeFile(file, input);
    return await new Promise<string>((resolve, reject) => {
      // -u: no marks on words Apertium does not know (they pass through as they are).
      const child = spawn('apertium', ['-u', mode, file], { env: subprocessEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.once('error', (e: NodeJS.ErrnoException) =>
        reject(
          e.code === 'ENOENT'
            ? new TranslationUnavailable('Apertium is not installed on this speech host (Debian: apertium).')
            : e,
        ),
      );
      child.once('close', (code) => {
        const stderr = Buffer.concat(err).toString('utf8');
        const text = Buffer.concat(out).toString('utf8');
        // (Exit 0 with nothing out and a complaint on stderr is a failure too: the script's way.)
        if (code === 0 && (text.trim() || !stderr.trim())) return resolve(text);
        if (/Mode .* does not exist/.test(stderr)) {
          return reject(new TranslationUnavailable(`This speech host has no Apertium pair ${mode} installed.`));
        }
        reject(new Error(`apertium ${mode} failed (exit ${code}): ${stderr.slice(-300)}`));
      });
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Each line of English text in `language` (a key of TRANSLATION_TARGETS), in order; blank lines stay blank. */
export async function translateFromEnglish(lines: string[], language: string): Promise<string[]> {
  const mode = TRANSLATION_TARGETS[language];
  if (!mode) throw new TranslationUnavailable(`No translation from English into '${language}'.`);
  const flat = lines.map((l) => l.replace(/\s+/g, ' ').trim());
  const filled = flat.filter(Boolean);
  if (!filled.length) return flat;
  // One process for all the lines; Apertium keeps line breaks.
  let out = (await apertium(mode, `${filled.join('\n')}\n`)).replace(/\n$/, '').split('\n');
  // A line Apertium split or joined: translate each on its own instead.
  if (out.length !== filled.length) out = await Promise.all(filled.map((l) => apertium(mode, `${l}\n`)));
  const translated = out.map((l) => l.trim());
  return flat.map((l) => (l ? translated.shift()! : ''));
}
