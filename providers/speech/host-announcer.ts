/**
 * A speech host's announcement of the operator-provided models it serves
 * (db/speech-hosts.ts): made at start, renewed every few seconds while the
 * host runs, withdrawn when it stops. A renewal that fails is retried at the
 * next tick; the host goes on serving meanwhile.
 */
import type { Db } from '../../db/pool';
import { announceSpeechHost, SPEECH_HOST_ANNOUNCE_SECONDS, withdrawSpeechHost } from '../../db/speech-hosts';
import type { Logger } from '../../platform/logger';

export class SpeechHostAnnouncer {
  private stopped?: Promise<void>;

  private constructor(
    private readonly db: Db,
    private readonly hostId: string,
    private readonly timer: NodeJS.Timeout,
  ) {}

  static async start(db: Db, hostId: string, models: string[], logger: Logger): Promise<SpeechHostAnnouncer> {
    await announceSpeechHost(db, hostId, models);
    const timer = setInterval(() => {
      announceSpeechHost(db, hostId, models).catch((err: unknown) =>
        logger.warn({ err }, 'could not renew the speech host announcement; retrying'),
      );
    }, SPEECH_HOST_ANNOUNCE_SECONDS * 1000);
    return new SpeechHostAnnouncer(db, hostId, timer);
  }

  /** Withdraws the models (the host stops taking their work) and closes the pool; once, however often called. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      clearInterval(this.timer);
      // Unreachable database: the announcement then simply ages out.
      await withdrawSpeechHost(this.db, this.hostId).catch(() => undefined);
      await this.db.end();
    })();
    return this.stopped;
  }
}
