/**
 * What the deployment activities need from a container runtime. The local
 * `process` runtime implements it for one machine (process-runtime.ts); a
 * Kubernetes runtime maps the same calls onto pods (KUBERNETES.md).
 */
export interface ReplicaToLaunch {
  deploymentId: string;
  replicaId: string;
  /** The image's entrypoint as the deployment names it: command, then args. */
  command: string[];
  /** Plain values and resolved secrets; the runtime adds PORT. */
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
  /** Starts the replica and resolves once its health check answers 2xx, with the port it serves on. */
  launch(r: ReplicaToLaunch, onProgress: () => void): Promise<number>;
  /** Resolves when the replica exits; null when this host does not hold it (it was lost). */
  waitForExit(replicaId: string, signal: AbortSignal): Promise<ReplicaExit | null>;
  /** Stops the replica: a polite signal, then a forced one after the grace period. */
  stop(replicaId: string, graceSeconds: number): Promise<void>;
  /** Where the replica's output is kept (the logs route reads it). */
  logFile(deploymentId: string, replicaId: string): string;
  stopAll(): Promise<void>;
  /** Leaves every replica running for the next process of this host, and lets go of them (shutdown). */
  release(): void;
  /**
   * Takes over the replicas an earlier worker process of this same host left running (it crashed
   * or was killed), so their deployments' runs can supervise them again. What was adopted.
   */
  adoptSurvivors(): Array<{ deploymentId: string; replicaId: string }>;
}
