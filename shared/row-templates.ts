/**
 * Evaluation templates: Jinja2 (as the official SDKs document them) over one row's columns,
 * rendered by @huggingface/jinja, an interpreter with no access to the host's JavaScript (a
 * tenant's template reads the row it is given and nothing else).
 */
type Jinja = typeof import('@huggingface/jinja', { with: { 'resolution-mode': 'import' } });
// The package's CommonJS build (its "require" export); its types are declared for ESM only.
const { Template } = require('@huggingface/jinja') as Jinja;

/** Why `text` is not a template, or null when it is one. */
export function templateError(text: string): string | null {
  try {
    new Template(text);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** `text` rendered with the row's columns as its variables (a column a row lacks renders empty). */
export function renderRowTemplate(text: string, row: Record<string, unknown>): string {
  return text ? new Template(text).render(row) : '';
}
