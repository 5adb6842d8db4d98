/** `gantry queue`: submit jobs to a deployment's queue, read their status, cancel, clear, metrics. */
import type { Command } from 'commander';
import { context, int, jsonObject } from '../context';
import { details, print, table, time } from '../output';

const modelOpt = (c: Command) => c.requiredOption('--model <deployment>', "the deployment's name");

export function addQueueCommands(program: Command) {
  const queue = program.command('queue').description("Asynchronous jobs on a container deployment's queue");

  modelOpt(queue.command('submit').description('Submit a job; prints its request id'))
    .requiredOption('--payload <json|@file>', 'the job payload, a JSON object', jsonObject)
    .option('--priority <n>', 'higher runs first (default 0)', int())
    .option('--info <json|@file>', 'initial persistent state, a JSON object', jsonObject)
    .action(
      async (
        o: { model: string; payload: Record<string, unknown>; priority?: number; info?: Record<string, unknown> },
        cmd: Command,
      ) => {
        const { client, out } = context(cmd);
        const res = await client.post('/v1/queue/submit', {
          model: o.model,
          payload: o.payload,
          ...(o.priority !== undefined ? { priority: o.priority } : {}),
          ...(o.info ? { info: o.info } : {}),
        });
        out.result(res, () => print(res.request_id));
      },
    );

  modelOpt(
    queue.command('status').description("A job's status, outputs or error, and info").argument('<request-id>'),
  ).action(async (id: string, o: { model: string }, cmd: Command) => {
    const { client, out } = context(cmd);
    const job = await client.get('/v1/queue/status', { model: o.model, request_id: id });
    out.result(job, () => {
      print(
        details([
          ['Request ID', job.request_id],
          ['Model', job.model],
          ['Status', job.status],
          ['Priority', job.priority],
          ['Retries', job.retries],
          ['Info', JSON.stringify(job.info)],
          ['Payload', JSON.stringify(job.inputs)],
          ...(job.outputs ? ([['Outputs', JSON.stringify(job.outputs)]] as [string, string][]) : []),
          ...(job.error ? ([['Error', job.error]] as [string, string][]) : []),
          ['Created', time(job.created_at)],
          ['Claimed', time(job.claimed_at)],
          ['Done', time(job.done_at)],
        ]),
      );
      if (job.history?.length) {
        print(
          table(
            ['time', 'status', 'note'],
            job.history.map((h: any) => [time(h.at), h.status, h.note]),
          ),
        );
      }
    });
  });

  modelOpt(
    queue
      .command('cancel')
      .description('Cancel a pending job (a running or finished one: exit code 5)')
      .argument('<request-id>'),
  ).action(async (id: string, o: { model: string }, cmd: Command) => {
    const { client, out } = context(cmd);
    const res = await client.post('/v1/queue/cancel', { model: o.model, request_id: id });
    out.result(res, () => print(`${id}: ${res.status}`));
  });

  modelOpt(queue.command('clear').description("Cancel every pending job of the deployment's queue")).action(
    async (o: { model: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.post('/v1/queue/clear', { model: o.model });
      out.result(res, () => print(`Canceled ${res.canceled_count} pending job(s).`));
    },
  );

  modelOpt(queue.command('metrics').description('Waiting and running jobs of the queue')).action(
    async (o: { model: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      const m = await client.get('/v1/queue/metrics', { model: o.model });
      out.result(m, () =>
        print(
          details([
            ['Waiting', m.messages_waiting],
            ['Running', m.messages_running],
            ['Total', m.total_jobs],
          ]),
        ),
      );
    },
  );
}
