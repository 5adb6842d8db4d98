/**
 * docs/operators/configuration.md, written from platform/config.ts's SETTINGS: each setting's
 * variable, its default (read from its zod schema, so the page and the parser cannot disagree) and
 * its line of documentation. scripts/write-configuration-page.ts writes it; a test checks that the
 * page in the tree is what this makes.
 */
import path from 'node:path';
import prettier from 'prettier';
import type { z } from 'zod';
import { SETTINGS, type Setting } from '../../platform/config';

export const CONFIGURATION_PAGE = path.resolve(__dirname, '../../docs/operators/configuration.md');

const INTRO = `# Configuration

<!-- Generated from platform/config.ts by \`npx tsx scripts/write-configuration-page.ts\`; edit the settings there, not this page. -->

Every setting is an environment variable, declared once and parsed in one place
(\`platform/config.ts\`): its name, its parsing and default, and the line below. A process refuses to
start with a value its setting does not accept, naming the variable. Unset means the setting's
line says what happens without it.
`;

/** Where a default is: the first \`.default()\` on the way in through optional, pipe and transform wrappers. */
function defaultOf(schema: z.ZodType): { value: unknown } | undefined {
  let node: z.ZodType | undefined = schema;
  for (let depth = 0; node && depth < 16; depth++) {
    const def = node._zod.def as { type: string; defaultValue?: unknown; in?: z.ZodType; innerType?: z.ZodType };
    if (def.type === 'default' || def.type === 'prefault') return { value: def.defaultValue };
    node = def.type === 'pipe' ? def.in : def.innerType;
  }
  return undefined;
}

const UNITS: [number, string][] = [
  [2 ** 40, 'TiB'],
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB'],
];

/** A default as the table shows it: code, with byte counts also in binary units. */
function shownDefault(setting: Setting): string {
  const found = defaultOf(setting.schema);
  if (!found) return 'unset';
  const { value } = found;
  if (value === '' || (Array.isArray(value) && value.length === 0)) return 'empty';
  const text = Array.isArray(value) ? value.join(',') : String(value);
  const unit = typeof value === 'number' && setting.variable.endsWith('_BYTES') && UNITS.find(([n]) => value % n === 0);
  return unit ? `\`${text}\` (${value / unit[0]} ${unit[1]})` : `\`${text}\``;
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The page's Markdown, formatted as the tree's prettier formats it. */
export async function configurationPage(): Promise<string> {
  const rows = SETTINGS.map((s) => `| \`${s.variable}\` | ${cell(shownDefault(s))} | ${cell(s.doc)} |`);
  const markdown = `${INTRO}\n| variable | default | meaning |\n| --- | --- | --- |\n${rows.join('\n')}\n`;
  const options = await prettier.resolveConfig(CONFIGURATION_PAGE);
  return prettier.format(markdown, { ...options, filepath: CONFIGURATION_PAGE });
}
