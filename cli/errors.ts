/**
 * Exit codes scripts can rely on, and the error every command throws to end
 * with one. `gantry --help` and the README list the same codes.
 */
export const EXIT = {
  /** Done. */
  OK: 0,
  /** The API answered with an error not covered below, or could not be reached. */
  API: 1,
  /** Bad flags or arguments, a local file that fails the check, a price not confirmed. */
  USAGE: 2,
  /** HTTP 404: the job, file, cluster, model ... does not exist (in this project). */
  NOT_FOUND: 3,
  /** HTTP 401 or 403: missing, invalid or insufficient API key. */
  AUTH: 4,
  /** HTTP 409: the resource is in a state that refuses the request (a running queue job, a file in use). */
  CONFLICT: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `Exit codes:
  0  success
  1  API error (the message, HTTP status and code come from the API's error body) or network error
  2  usage error: bad flags or arguments, a local file that fails the check, a price not confirmed
  3  not found (HTTP 404)
  4  authentication or permission (HTTP 401, 403)
  5  conflict (HTTP 409): the resource's state refuses the request`;

/** An error that ends the command with `exitCode`; `api` holds the API's error body when there was one. */
export class CliError extends Error {
  /** Set when the command already printed its JSON document (which then says what failed). */
  jsonPrinted = false;

  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly api?: { status: number; type: string | null; code: string | null; param: string | null },
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.USAGE);

/** The exit code of an HTTP error status. */
export function exitCodeForStatus(status: number): ExitCode {
  if (status === 404) return EXIT.NOT_FOUND;
  if (status === 401 || status === 403) return EXIT.AUTH;
  if (status === 409) return EXIT.CONFLICT;
  return EXIT.API;
}
