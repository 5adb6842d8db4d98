/**
 * The `podman` container runtime: each replica is a container of the
 * deployment's OCI image, run by rootful Podman (podman-engine.ts says how it is
 * configured), isolated from the host and from other tenants:
 *
 * - its own root filesystem from the image, its own PID, mount, IPC and UTS
 *   namespaces; nothing of the host is mounted but the volumes and model
 *   revisions the deployment declares, and its deployment's adapter directory
 *   (adapter-files.ts), read-only;
 * - its own network namespace on its project's bridge, which reaches nothing
 *   beyond that bridge (replica-networks.ts), with its port published on this
 *   host's address (GANTRY_CONTAINER_HOST_ADDRESS) for the gateway, the health
 *   checks and the metric scrapes;
 * - the deployment's `cpu` and `memory` as cgroup limits, its `storage` as a
 *   quota on its writable layer (container-storage.ts), each within the host's
 *   ceilings (replica-limits.ts), an image no larger than the host allows
 *   (image-size.ts), a bound on its processes, and no privilege escalation;
 * - its own user namespace (`--userns=auto`): Podman runs as root, but the
 *   container's root, and every other user in it, is an unprivileged id of
 *   this host, from a range no other container has (the `containers` ranges of
 *   /etc/subuid and /etc/subgid). A process that broke out of its container
 *   would be nobody on the host, and would not share an id with another
 *   tenant's files or processes.
 *
 * A project runs only images it may pull (shared/image-references.ts): every launch pulls the
 * image again, with that project's access, and runs the image that pull answered (by its id),
 * so what this host already holds for another project is never a shortcut. Its own path of the
 * installation's registry (GANTRY_IMAGE_REGISTRY) is pulled with this host's credentials, any
 * other image with none, and another project's path not at all; the platform's own images (the
 * model server's) are the one exception, run from this host's copy. A registry's answer is
 * checked again each time; layers this host has are not downloaded again. A failed pull says
 * that the image could not be pulled, and what the registry said goes to this host's log only
 * (a tenant may name any address as a registry). `GANTRY_INSECURE_REGISTRIES` names the
 * registries reached over plain HTTP, such as a local one. The container writes
 * its output straight into the replica's log file (Podman's passthrough log
 * driver), so the logs route reads it as it does the process runtime's, and it
 * outlives a crash of this worker: a restarted worker of the same host (its
 * GANTRY_CONTAINER_HOST_ID, or the name an unnamed host keeps: host-identity.ts)
 * finds its containers by label and adopts them; what a host that is gone left
 * is stopped by the next host of the installation to start (`adoptSurvivors`).
 * No tenant value reaches Podman's environment (a fixed one) or its options as
 * anything but data: the variables go through an environment file and secrets
 * (replica-environment.ts), never the client's environment or command line;
 * the image is a checked reference after `--`; mount paths are checked paths.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';

import { HeldReplicas, type HeldReplica } from '../held-replicas';
import { tailLines } from '../log-tail';
import { openReplicaLog, replicaLogFile } from '../replica-log';
import { replicaOrigin } from '../../../shared/deployments';
import { imageAccess } from '../../../shared/image-references';
import { checkRemoteUrl } from '../../remote/fetch-remote';
import { freePort } from '../../../platform/ports';
import { waitUntilHealthy } from '../replica-health';
import {
  ReplicaFailed,
  type ContainerRuntime,
  type ReplicaExit,
  type ReplicaToLaunch,
  type Survivor,
  type SurvivorScope,
} from '../runtime';
import { replicaLimits } from '../replica-limits';
import type { ReplicaLimits } from '../../../platform/config';
import { LiveHosts, newHostName } from '../host-identity';
import { STORE, WRITABLE_LAYER_ANNOTATION } from './container-storage';
import { imageTooLarge } from './image-size';
import type { PodmanEngine } from './podman-engine';
import type { ReplicaNetworks } from './replica-networks';
import { removeOrphanedLeases } from './orphaned-address-leases';
import { removeOrphanedForwards } from './orphaned-port-forwards';
import { LaunchEnvironment } from './replica-environment';

/** Most processes (threads included) one replica may run: a fork bomb stays inside its container. */
const PIDS_LIMIT = 4096;

/**
 * `--volume host:mount:ro` for a mount, refused unless both are clean absolute paths with nothing
 * Podman would read as more than a path there (`:` separates the parts, `,` lists options). The
 * API takes only such mount paths; this keeps one stored before it checked them inert.
 */
export function volumeOption(m: { hostDir: string; mountPath: string }): string {
  for (const p of [m.hostDir, m.mountPath]) {
    if (!path.isAbsolute(p) || path.normalize(p) !== p || p === '/' || /[:,\0-\x1f]/.test(p))
      throw new ReplicaFailed(
        `The mount path ${JSON.stringify(m.mountPath)} cannot be mounted: not a plain absolute path.`,
      );
  }
  return `${m.hostDir}:${m.mountPath}:ro`;
}

export class PodmanRuntime implements ContainerRuntime {
  readonly kind = 'podman';
  readonly address: string;
  /** `gantry.host` of this host's containers: its stable name, or one of its own for this process. */
  readonly hostId: string;
  private readonly liveHosts: LiveHosts;
  private readonly running = new HeldReplicas<HeldReplica>();

  /**
   * `logDir`: where replicas' log files go (the logs route reads them there). `hostId`: this
   * container host's stable name; with it a restarted worker adopts the containers the previous
   * one left running, as the process runtime does (without it, a name for this process only).
   * `liveHosts`: where the hosts of this machine claim their names (STORE.liveHosts). `limits`: what a replica gets when its deployment
   * sets none, and the most it gets (and the largest image it runs) whatever its deployment says.
   */
  constructor(
    readonly logDir: string,
    private readonly engine: PodmanEngine,
    private readonly networks: ReplicaNetworks,
    private readonly opts: {
      hostId?: string;
      liveHosts?: LiveHosts;
      insecureRegistries?: string[];
      limits: { defaults: ReplicaLimits; max: ReplicaLimits & { imageGiB: number } };
      /** GANTRY_IMAGE_REGISTRY: each project's path there is that project's own. */
      imageRegistry?: string;
      /** Images the operator names for the platform itself (GANTRY_MODEL_SERVER_IMAGE): any project runs them. */
      platformImages?: string[];
      /**
       * GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: a tenant may name a registry at a private address. Without
       * it only the registries the operator names (GANTRY_INSECURE_REGISTRIES, the installation's) may be.
       */
      allowPrivateRegistries?: boolean;
      /** Where replicas' ports are published (GANTRY_CONTAINER_HOST_ADDRESS); 127.0.0.1 without it. */
      address?: string;
      /** Says what the sweep of leftover port forwards took out, or why it could not look, and why a pull failed. */
      logger?: Pick<Logger, 'warn'>;
    },
  ) {
    this.address = opts.address ?? '127.0.0.1';
    this.hostId = opts.hostId ?? newHostName();
    // Claimed before this host labels any container, so that no other host takes them for a dead host's.
    this.liveHosts = opts.liveHosts ?? new LiveHosts(STORE.liveHosts);
    this.liveHosts.claim(this.hostId);
  }

  logFile(deploymentId: string, replicaId: string): string {
    return replicaLogFile(this.logDir, deploymentId, replicaId);
  }

  /** The container's name: replica ids are unique per deployment id, and so per installation. */
  containerName(replicaId: string): string {
    return `gantry-${replicaId.toLowerCase().replace(/[^a-z0-9_.-]/g, '-')}`;
  }

  /**
   * The image the replica runs, as `podman run` names it: the id a pull with its project's access
   * answered (the file's comment says which access), or a platform image as named.
   */
  private async pull(r: ReplicaToLaunch, onProgress: () => void): Promise<string> {
    const access = imageAccess(r.image, {
      installationRegistry: this.opts.imageRegistry,
      projectSlug: r.projectSlug,
      platformImages: this.opts.platformImages ?? [],
    });
    switch (access.kind) {
      case 'platform': {
        const present = await this.engine.podman(['image', 'exists', r.image]).then(
          () => true,
          () => false,
        );
        return present ? r.image : this.pullAs(r.image, r.image, 'host', onProgress);
      }
      case 'own':
        return this.pullAs(r.image, access.reference, 'host', onProgress);
      case 'public':
        return this.pullAs(r.image, access.reference, 'anyone', onProgress);
      case 'foreign':
      case 'invalid':
        throw new ReplicaFailed(`The image ${r.image} could not be pulled: ${access.why}.`);
    }
  }

  /**
   * `podman pull` of `reference` with this host's credentials or with none (`anyone`); answers
   * the image's id. A failure says only that: what the registry (or whatever answered at its
   * address) said goes to this host's log.
   */
  private async pullAs(
    image: string,
    reference: string,
    credentials: 'host' | 'anyone',
    onProgress: () => void,
  ): Promise<string> {
    const registry = reference.split('/')[0];
    const insecure = this.opts.insecureRegistries?.some((r) => r.toLowerCase() === registry);
    const beat = setInterval(onProgress, 5000);
    try {
      // Podman would connect wherever a tenant points it, from this host's network: a registry the
      // operator did not name must be at public addresses (a check before the pull; Podman resolves
      // the name again, so a rebinding name is caught only here, on the first answer).
      if (credentials === 'anyone' && !insecure && !this.opts.allowPrivateRegistries)
        await checkRemoteUrl(`https://${registry}/`, { allowPrivateHosts: false, maxBytes: 0 });
      const out = await this.engine.podman(
        [
          'pull',
          '--quiet',
          ...(credentials === 'anyone' ? ['--authfile', this.engine.noCredentialsFile] : []),
          ...(insecure ? ['--tls-verify=false'] : []),
          '--',
          reference,
        ],
        { timeoutMs: 30 * 60_000 },
      );
      const id = out.trim().split('\n').pop() ?? '';
      if (!/^[0-9a-f]{64}$/.test(id)) throw new Error(`podman pull answered no image id: ${out.slice(0, 200)}`);
      return id;
    } catch (err) {
      this.opts.logger?.warn({ image, reference, err: (err as Error).message }, 'an image could not be pulled');
      throw new ReplicaFailed(
        `The image ${image} could not be pulled (it does not exist, its registry did not answer, or this project may not pull it).`,
      );
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * The mounts of this engine's Gantry containers, whichever host process started them. (A launch
   * under way holds its directories pinned until it is over: activities/deployments.ts.)
   */
  async mountedHostDirs(): Promise<string[]> {
    const ids = (await this.engine.podman(['ps', '--all', '--filter', 'label=gantry.replica', '--format', '{{.ID}}']))
      .split('\n')
      .filter(Boolean);
    const sources: string[] = [];
    for (const id of ids) {
      try {
        const out = await this.engine.podman([
          'container',
          'inspect',
          '--format',
          '{{range .Mounts}}{{.Source}}{{"\\n"}}{{end}}',
          id,
        ]);
        sources.push(...out.split('\n').filter(Boolean));
      } catch (err) {
        // Gone since the listing: it mounts nothing now. Anything else, and nothing is swept.
        if (!/no such (container|object)/i.test((err as Error).message)) throw err;
      }
    }
    return sources;
  }

  /** Where launches under way keep what hands their variables over (replica-environment.ts). */
  private get environmentDir(): string {
    return path.join(this.engine.stateDir, 'replica-env');
  }

  /** Pulls the image, starts the container, and waits until its health check answers 2xx; returns the host port. */
  async launch(r: ReplicaToLaunch, onProgress: () => void): Promise<number> {
    // The API takes only image references; one stored before it checked them stops at pull.
    const volumes = r.mounts.flatMap((m) => ['--volume', volumeOption(m)]);
    const image = await this.pull(r, onProgress);
    const tooLarge = await imageTooLarge(this.engine, image, this.opts.limits.max.imageGiB, r.image);
    if (tooLarge) throw new ReplicaFailed(tooLarge);
    const { network, apiUrl } = await this.networks.acquire(r.projectId).catch((err: Error) => {
      throw new ReplicaFailed(`The replica's network could not be set up: ${err.message}`);
    });
    const port = await freePort(this.address);
    const name = this.containerName(r.replicaId);
    const limits = replicaLimits(r, this.opts.limits.defaults, this.opts.limits.max);
    // GANTRY_BASE_URL: the API as the replica reaches it (a queue worker's); the deployment may name another.
    const env: Record<string, string> = {
      ...(apiUrl ? { GANTRY_BASE_URL: apiUrl } : {}),
      ...r.env,
      PORT: String(r.containerPort),
    };
    const environment = await LaunchEnvironment.prepare(this.engine, this.environmentDir, env).catch(async (err) => {
      await this.networks.release(r.projectId);
      throw err;
    });
    const args = [
      'run',
      '--rm',
      '--name',
      name,
      '--replace', // a container of this name left by a crash before it was adopted
      '--pull=never',
      '--log-driver=passthrough',
      '--network',
      network,
      '--publish',
      `${this.address.includes(':') ? `[${this.address}]` : this.address}:${port}:${r.containerPort}`,
      '--label',
      `gantry.deployment=${r.deploymentId}`,
      '--label',
      `gantry.replica=${r.replicaId}`,
      '--label',
      `gantry.project=${r.projectId}`,
      '--label',
      `gantry.port=${port}`,
      '--label',
      `gantry.host=${this.hostId}`,
      '--pids-limit',
      String(PIDS_LIMIT),
      '--security-opt',
      'no-new-privileges',
      '--userns=auto',
      '--cpus',
      String(limits.cpus),
      '--memory',
      `${Math.ceil(limits.memoryGiB * 1024)}m`,
      '--annotation',
      `${WRITABLE_LAYER_ANNOTATION}=${Math.ceil(limits.storageGiB * 1024 ** 3)}`,
      ...volumes,
      ...environment.args,
      ...(r.command.length ? ['--entrypoint', JSON.stringify(r.command)] : []),
      // Options end here: the image, then its arguments, are positionals whatever they hold.
      '--',
      image,
      ...r.args,
    ];
    const logFile = this.logFile(r.deploymentId, r.replicaId);
    const log = openReplicaLog(this.logDir, logFile);
    const client = spawn('podman', args, { env: this.engine.env(), stdio: ['ignore', log, log] });
    closeSync(log);
    const exited = new Promise<ReplicaExit>((resolve) => {
      client.once('error', (err) => {
        appendFileSync(logFile, `[gantry] could not start podman: ${err.message}\n`);
        resolve({ code: null, signal: null });
      });
      client.once('exit', (code, signal) => {
        appendFileSync(logFile, `[gantry] replica exited (code ${code}, signal ${signal})\n`);
        resolve({ code, signal });
      });
    });
    // Handed over as Podman reads them, and removed from this host once it has.
    const handedOver = environment.deliver(exited);
    void exited.then(async () => {
      await this.networks.release(r.projectId);
      await this.removeNetworkLeftovers();
    });
    this.running.set(r.replicaId, { deploymentId: r.deploymentId, exited, release: () => client.unref() });
    try {
      await waitUntilHealthy({
        origin: replicaOrigin(this.address, port),
        healthPath: r.healthPath,
        timeoutMs: r.healthTimeoutMs,
        exited,
        onProgress,
        stop: () => this.stop(r.replicaId, 0),
      });
      // It answers, so Podman has read them all: they are gone from this host when launch returns.
      await handedOver;
    } catch (err) {
      this.running.delete(r.replicaId);
      // What Podman or the program said last (a wrong entrypoint, a crash) is the useful part.
      const said = (await tailLines(logFile, 3)).lines.filter((l) => !l.startsWith('[gantry]'));
      if (err instanceof ReplicaFailed && said.length)
        throw new ReplicaFailed(`${err.message} Last output: ${said.join(' / ')}`);
      throw err;
    }
    return port;
  }

  heldReplicas(): Array<{ deploymentId: string; replicaId: string }> {
    return this.running.list();
  }

  waitForExit(replicaId: string, signal: AbortSignal): Promise<ReplicaExit | null> {
    return this.running.waitForExit(replicaId, signal);
  }

  /** `podman stop`: SIGTERM (or the image's stop signal), then SIGKILL after the grace period. */
  async stop(replicaId: string, graceSeconds: number): Promise<void> {
    const r = this.running.get(replicaId);
    if (!r) return;
    await this.engine
      .podman([
        'stop',
        '--ignore',
        '--time',
        String(Math.max(0, Math.round(graceSeconds))),
        this.containerName(replicaId),
      ])
      .catch(() => undefined); // it exited meanwhile; `exited` below says so either way
    await r.exited;
    this.running.delete(replicaId);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.stop(id, 2)));
  }

  release(): void {
    this.running.releaseAll();
  }

  /** Takes out what launches of an earlier process of this host left on their way (it died part way); never fails. */
  async removeLaunchLeftovers(): Promise<void> {
    const removed = await LaunchEnvironment.removeLeftovers(this.engine, this.environmentDir);
    if (removed.length)
      this.opts.logger?.warn({ launches: removed }, "removed what unfinished launches left of replicas' variables");
  }

  private sweeping: Promise<void> = Promise.resolve();

  /**
   * Takes out what Podman left behind on the network for replica containers that are gone: their
   * port forwards (orphaned-port-forwards.ts), before a later replica or process gets their ports,
   * and their bridge address leases (orphaned-address-leases.ts), before their project's network
   * runs out of addresses. Run when a replica exits and when the host starts, one at a time; never
   * fails (it says why it could not look).
   */
  removeNetworkLeftovers(): Promise<void> {
    const sweeps = [
      { what: 'port forwards', remove: removeOrphanedForwards },
      { what: 'bridge address leases', remove: removeOrphanedLeases },
    ];
    this.sweeping = this.sweeping.then(async () => {
      for (const { what, remove } of sweeps) {
        try {
          const containers = await remove(this.engine);
          if (containers.length)
            this.opts.logger?.warn({ containers }, `removed the ${what} left for containers that are gone`);
        } catch (err) {
          this.opts.logger?.warn({ err: (err as Error).message }, `leftover ${what} not looked for this time`);
        }
      }
    });
    return this.sweeping;
  }

  /**
   * Takes over the Gantry containers on this machine's store that no running host holds, when this
   * host starts:
   *
   * - its own (`gantry.host` is its name), which a previous process of it left running: adopted,
   *   and their deployments' runs re-attach on this host's queue, which has the same name;
   * - those of a host that no longer runs on this machine (no live process claims its name, or the
   *   container has none), when they are this installation's (`scope.isOurProject`: the store is
   *   the machine's, and other installations, test platforms among them, may use it too): adopted
   *   as `orphanedBy` that host, for the caller to stop and record. No run re-attaches to them:
   *   their runs watch that host's queue, which nobody serves.
   *
   * Containers of a host that runs (another host on this machine) are never touched.
   * `podman wait` tells when each adopted one exits.
   */
  async adoptSurvivors(scope: SurvivorScope = {}): Promise<Survivor[]> {
    const listed = await this.engine.podman(['ps', '--filter', 'label=gantry.replica', '--format', 'json']);
    const containers = JSON.parse(listed || '[]') as Array<{ Names: string[]; Labels: Record<string, string> | null }>;
    const adopted: Survivor[] = [];
    for (const c of containers) {
      const labels = c.Labels ?? {};
      const deploymentId = labels['gantry.deployment'];
      const replicaId = labels['gantry.replica'];
      const projectId = labels['gantry.project'];
      const host = labels['gantry.host'] ?? '';
      if (!deploymentId || !replicaId || !projectId || this.running.has(replicaId)) continue;
      const mine = host === this.hostId;
      if (!mine && (this.liveHosts.isHeld(host) || !(await scope.isOurProject?.(projectId)))) continue;
      await this.networks.acquire(projectId);
      // `podman wait` answers the exit code; killed on release, so this process can exit.
      const waiter = spawn('podman', ['wait', c.Names[0]], {
        env: this.engine.env(),
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let out = '';
      waiter.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const exited = new Promise<ReplicaExit>((resolve) => {
        waiter.once('error', () => resolve({ code: null, signal: null }));
        // A container removed meanwhile has no status left to read: code null.
        waiter.once('exit', () =>
          resolve({ code: /^\d+$/.test(out.trim()) ? Number(out.trim()) : null, signal: null }),
        );
      });
      void exited.then(async () => {
        await this.networks.release(projectId);
        await this.removeNetworkLeftovers();
      });
      this.running.set(replicaId, { deploymentId, exited, release: () => waiter.kill() });
      adopted.push({ deploymentId, replicaId, ...(mine ? {} : { orphanedBy: host || 'a host with no name' }) });
      if (!mine) this.opts.logger?.warn({ replicaId, host }, 'took over a replica of a host that no longer runs here');
    }
    return adopted;
  }
}
