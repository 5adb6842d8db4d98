/**
 * `gantry`, the command-line tool of the Gantry API (README: Command-line tool).
 * Key from SERVICE_API_KEY; API from --base-url, else GANTRY_BASE_URL, else
 * http://127.0.0.1:8080/v1. Tables by default, one JSON document with --json,
 * and the exit codes of cli/errors.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { addAccountCommands } from './commands/account';
import { addAudioCommands } from './commands/audio';
import { addClusterCommands } from './commands/clusters';
import { addEndpointCommands } from './commands/endpoints';
import { addFileCommands } from './commands/files';
import { addFineTuningCommands } from './commands/fine-tuning';
import { addQueueCommands } from './commands/queue';
import { CliError, EXIT, EXIT_CODES_HELP } from './errors';
import { DEFAULT_BASE_URL } from './http';

const version = (JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string })
  .version;

export function buildProgram(): Command {
  const program = new Command('gantry')
    .description('The command-line tool of Gantry, a self-hosted GPU cloud.')
    .version(version)
    .option('--base-url <url>', `the API's URL (default: $GANTRY_BASE_URL, else ${DEFAULT_BASE_URL})`)
    .option('--json', 'print exactly one JSON document on stdout (for scripts) instead of tables')
    .showHelpAfterError('(add --help for usage)')
    // Settings given before the subcommands are made are inherited by them.
    .exitOverride()
    .addHelpText(
      'after',
      `
Environment:
  SERVICE_API_KEY  the API key every command sends (Authorization: Bearer ...)
  GANTRY_BASE_URL  the API's URL when --base-url is not given

${EXIT_CODES_HELP}

Example:
  export SERVICE_API_KEY=...
  gantry files upload train.jsonl --wait
  gantry fine-tuning create --training-file file-... --model gantry/reference-byte-tiny --confirm`,
    );
  addAccountCommands(program);
  addFileCommands(program);
  addFineTuningCommands(program);
  addClusterCommands(program);
  addEndpointCommands(program);
  addQueueCommands(program);
  addAudioCommands(program);
  return program;
}

/** Prints what went wrong (stderr; with --json also as one JSON document on stdout); returns the exit code. */
function report(err: unknown, json: boolean): number {
  if (err instanceof CommanderError) {
    // Help and version are answers; anything else commander refuses is a usage error (already printed).
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT.OK;
    if (json) writeJson({ error: { message: err.message, type: 'usage_error', code: err.code, param: null } });
    return EXIT.USAGE;
  }
  if (err instanceof CliError) {
    const a = err.api;
    const where = a
      ? ` (HTTP ${a.status}${a.type ? ` ${a.type}` : ''}${a.code ? `, code ${a.code}` : ''}${a.param ? `, param ${a.param}` : ''})`
      : '';
    process.stderr.write(`Error: ${err.message}${where}\n`);
    if (json && !err.jsonPrinted) {
      writeJson({
        error: {
          message: err.message,
          type: a?.type ?? (err.exitCode === EXIT.USAGE ? 'usage_error' : 'client_error'),
          code: a?.code ?? null,
          param: a?.param ?? null,
          ...(a ? { status: a.status } : {}),
        },
      });
    }
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`Error: ${message}\n`);
  if (json) writeJson({ error: { message, type: 'client_error', code: null, param: null } });
  return EXIT.API;
}

const writeJson = (doc: unknown) => process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);

export async function main(argv: string[]): Promise<number> {
  // `gantry ... | head` closes stdout early: that ends the command quietly, as for other tools.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(EXIT.OK);
    throw err;
  });
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.OK;
  } catch (err) {
    return report(err, argv.includes('--json'));
  }
}

if (require.main === module) {
  void main(process.argv).then((code) => {
    process.exitCode = code;
  });
}
