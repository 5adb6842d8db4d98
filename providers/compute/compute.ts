/**
 * The compute provider: the edge between the cluster workflows and the
 * machines (DESIGN.md: providers). `local` is the fleet simulator in
 * local-fleet.ts; a real fleet (bare-metal or a cloud API, Kubernetes for the
 * tenant control plane) implements the same interface. Every call is
 * idempotent on its ids, because activities that make them are retried.
 */
import type { AcceptanceTestsParams, FleetNode, NodePhase } from '../../shared/clusters';
import type { GpuType } from '../../shared/gpu-types';

export interface NodeRequest {
  clusterId: string;
  region: string;
  gpuType: GpuType;
  role: FleetNode['role'];
  preemptible: boolean;
  /** Node sequence numbers chosen by the workflow: the same numbers name the same nodes on a retry. */
  seqs: number[];
  /** Avoid these hosts (host-aware replacement). */
  avoidHosts?: string[];
}

export interface DescribedNode extends FleetNode {
  phase: NodePhase;
  released: boolean;
}

export interface CheckResult {
  name: string;
  passed: boolean;
  detail: string;
}

export interface NodeTestReport {
  node_id: string;
  passed: boolean;
  checks: CheckResult[];
  /** True when the result comes from the fleet simulator, not hardware. */
  simulated: boolean;
}

export interface NcclReport {
  node_ids: string[];
  passed: boolean;
  failing_node_ids: string[];
  detail: string;
  simulated: boolean;
}

export interface HealthReport {
  node_id: string;
  healthy: boolean;
  detail: string;
  simulated: boolean;
}

export interface Workload {
  pending_gpu_requests: number;
  idle_gpus: number;
}

export interface ComputeProvider {
  readonly kind: string;
  provisionNodes(req: NodeRequest): Promise<FleetNode[]>;
  describeNodes(nodeIds: string[]): Promise<DescribedNode[]>;
  allocateSubnet(clusterId: string): Promise<string>;
  provisionVolume(volumeId: string, sizeTib: number, onProgress: () => void): Promise<void>;
  installDrivers(nodeIds: string[], driver: { cuda: string; driver: string; os: string }): Promise<void>;
  runAcceptanceTests(clusterId: string, nodeId: string, params: AcceptanceTestsParams): Promise<NodeTestReport>;
  runNcclTest(clusterId: string, nodeIds: string[]): Promise<NcclReport>;
  runHealthCheck(clusterId: string, nodeId: string): Promise<HealthReport>;
  cordon(nodeId: string): Promise<void>;
  /** Restarts the node in place (reboot, host power cycle): it goes through its boot phases again. */
  restart(nodeId: string): Promise<void>;
  release(nodeIds: string[]): Promise<void>;
  /** Releases every node still held for the cluster, whoever provisioned it; returns their ids. */
  releaseAllOfCluster(clusterId: string): Promise<string[]>;
  releaseSubnet(clusterId: string): Promise<void>;
  /** Preemptible nodes the fleet can still hand out for this region and type (null: no limit). */
  preemptibleNodesAvailable(region: string, gpuType: GpuType): Promise<number | null>;
  workload(clusterId: string): Promise<Workload>;
  kubeconfig(clusterId: string, clusterName: string): Promise<string>;
}
