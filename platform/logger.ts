import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/**
 * Structured logs, one JSON line per event. Anything that can carry a secret
 * is redacted here, once, for every process.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'authorization',
  'apiKey',
  'api_key',
  'password',
  'secret',
  '*.apiKey',
  '*.password',
  '*.secret',
  'databaseUrl',
];

export function createLogger(
  name: string,
  level: LoggerOptions['level'] = 'info',
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    name,
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    base: { process: name, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
