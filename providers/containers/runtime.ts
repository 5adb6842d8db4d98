/**
 * What the deployment activities need from a container runtime. The `podman`
 * runtime runs each replica as an isolated container of its image
 * (podman/podman-runtime.ts); the `process` runtime runs the command as a host
 * process, for one trusted user (process-runtime.ts); a Kubernetes runtime maps
 * the same calls onto pods (KUBERNETES.md).
 */
export interface ReplicaToLaunch {
  deploymentId: string;
  projectId: string;
  /** Its project's slug, which names the project's own path of the installation's registry; undefined: the project is gone. */
  projectSlug?: string;
  replicaId: string;
  /** The OCI image reference the deployment names. */
  image: string;
  /** Replaces the image's entrypoint when given (Kubernetes' `command`). */
  command: string[];
  /** Replaces the image's default arguments when given (Kubernetes' `args`). */
  args: string[];
  /** The port the replica's server listens on inside its container (the deployment's `port`). */
  containerPort: number;
  /**
   * Limits: CPU cores, memory and writable storage in GiB, as the deployment states them; absent,
   * the host's defaults (podman: replica-limits.ts).
   */
  cpu?: number;
  memoryGiB?: number;
  storageGiB?: number;
  /** Plain values and resolved secrets; the runtime adds PORT (and, for a host process, HOST). */
  env: Record<string, string>;
  healthPath: string;
  healthTimeoutMs: number;
  /** Read-only directories to show at mount paths inside the replica. */
  mounts: Array<{ mountPath: string; hostDir: string }>;
}

export interface ReplicaExit {
  code: number | null;
  signal: string | null;
}

export class ReplicaFailed extends Error {}

export interface ContainerRuntime {
  readonly kind: string;
  /**
   * The address this host publishes its replicas on (GANTRY_CONTAINER_HOST_ADDRESS): a replica
   * answers at this address and the port launch returns, from this host and from the gateway.
   */
  readonly address: string;
  /** Where replicas' log files are (replica-log.ts): shared with the API, which reads them. */
  readonly logDir: string;
  /** Starts the replica and resolves once its health check answers 2xx, with the port it serves on. */
  launch(r: ReplicaToLaunch, onProgress: () => void): Promise<number>;
  /** The replicas this host holds (launched, or adopted from an earlier process of it). */
  heldReplicas(): Array<{ deploymentId: string; replicaId: string }>;
  /** Resolves when the replica exits; null when this host does not hold it (it was lost). */
  waitForExit(replicaId: string, signal: AbortSignal): Promise<ReplicaExit | null>;
  /** Stops the replica: a polite signal, then a forced one after the grace period. */
  stop(replicaId: string, graceSeconds: number): Promise<void>;
  /**
   * The host directories mounted into the replicas of this host, including those still being
   * launched: what a sweep of the host's files must leave (host-file-uses.ts). Throws when it
   * cannot tell, so that nothing is removed on a guess.
   */
  mountedHostDirs(): Promise<string[]>;
  /** Where the replica's output is kept (the logs route reads it). */
  logFile(deploymentId: string, replicaId: string): string;
  stopAll(): Promise<void>;
  /** Leaves every replica running for the next process of this host, and lets go of them (shutdown). */
  release(): void;
  /**
   * Takes over the replicas an earlier worker process of this same host left running (it crashed
   * or was killed), so their deployments' runs can supervise them again; and, where hosts share
   * the machine's replicas (podman), those a host that is gone left (`orphanedBy`). What was adopted.
   */
  adoptSurvivors(scope?: SurvivorScope): Promise<Survivor[]>;
}

/** A replica a container host took over when it started. */
export interface Survivor {
  deploymentId: string;
  replicaId: string;
  /**
   * Left by another host, which no longer runs: no run of its deployment can watch it here (they
   * watch that host's queue), so it is to be stopped. Absent: left by an earlier process of this host.
   */
  orphanedBy?: string;
}

export interface SurvivorScope {
  /** Whether a project is this installation's (a replica of another one is never touched). */
  isOurProject?: (projectId: string) => Promise<boolean>;
}
