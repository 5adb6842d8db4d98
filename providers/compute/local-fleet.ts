/**
 * The local GPU fleet SIMULATOR (DESIGN.md: compute provider `local`). It has
 * no hardware. It keeps nodes, subnets and faults in PostgreSQL (so the
 * control worker, the GPU workers and the API's operator routes share one
 * fleet), moves nodes through their phases on timers derived from when each
 * node was started and a configurable step delay, and reports tests as
 * passed unless an operator or a test injected a fault. Everything it returns
 * says it is simulated: `sim-` regions, `sim-` host names, `simulated: true`.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AcceptanceTestsParams, FleetNode, NodePhase } from '../../shared/clusters';
import type { GpuType } from '../../shared/gpu-types';
import type { Db } from '../../db/pool';
import type {
  CheckResult,
  ComputeProvider,
  DescribedNode,
  HealthReport,
  NcclReport,
  NodeRequest,
  NodeTestReport,
  Workload,
} from './compute';

export type FaultKind = 'boot_failure' | 'acceptance_failure' | 'nccl_failure' | 'health_check_failure';

const BOOT_PHASES: NodePhase[] = [
  'NODE_PHASE_PENDING',
  'NODE_PHASE_SCHEDULING',
  'NODE_PHASE_BOOTING',
  'NODE_PHASE_BOOTSTRAPPING',
  'NODE_PHASE_RUNNING',
];

/** Published shapes of the simulated machine types (what a real node of that type has). */
const HARDWARE: Record<GpuType, { cpus: number; memGib: number; hca?: string; nvswitch?: string }> = {
  H100_SXM: { cpus: 208, memGib: 1800, hca: 'ConnectX-7', nvswitch: 'NVSwitch gen3' },
  H200_SXM: { cpus: 208, memGib: 2000, hca: 'ConnectX-7', nvswitch: 'NVSwitch gen3' },
  B200_SXM: { cpus: 240, memGib: 3000, hca: 'ConnectX-7', nvswitch: 'NVSwitch gen4' },
  B300_SXM: { cpus: 240, memGib: 4000, hca: 'ConnectX-8', nvswitch: 'NVSwitch gen4' },
  H100_SXM_INF: { cpus: 208, memGib: 1800, nvswitch: 'NVSwitch gen3' },
  L40_PCIE: { cpus: 128, memGib: 1000 },
  RTX_6000_PCI: { cpus: 128, memGib: 1000 },
};

const shortId = (clusterId: string) => clusterId.replace(/^cl-/, '');

export function simulatedNodeId(clusterId: string, role: FleetNode['role'], seq: number): string {
  return `sim-${role === 'control-plane' ? 'cp' : 'gpu'}-${shortId(clusterId)}-${seq}`;
}

interface NodeRow {
  node_id: string;
  instance_id: string;
  role: FleetNode['role'];
  hardware: Omit<FleetNode, 'phase_transitions'>;
  started_at: Date;
  boot_fails: boolean;
  released_at: Date | null;
}

export class LocalFleet implements ComputeProvider {
  readonly kind = 'local-simulator';

  constructor(
    private readonly db: Db,
    /** How long the simulator spends in each boot phase (0 in the bench, small in tests). */
    private readonly stepMs: number,
  ) {}

  /** Phases reached by now: one step each; a node with a boot fault fails while booting. */
  private phasesOf(row: NodeRow, now = Date.now()) {
    const t0 = row.started_at.getTime();
    const sequence: NodePhase[] = row.boot_fails
      ? ['NODE_PHASE_PENDING', 'NODE_PHASE_SCHEDULING', 'NODE_PHASE_BOOTING', 'NODE_PHASE_FAILED']
      : BOOT_PHASES;
    const reached = sequence
      .map((phase, i) => ({ phase, at: t0 + i * this.stepMs }))
      .filter((p) => p.at <= now || this.stepMs === 0);
    return reached.map((p) => ({ phase: p.phase, transition_time: new Date(p.at).toISOString() }));
  }

  async provisionNodes(req: NodeRequest): Promise<FleetNode[]> {
    const hw = HARDWARE[req.gpuType];
    const worker = req.role === 'gpu-worker';
    // Most clusters have no fault injected: one read says so for all of their nodes.
    const faulty = worker && (await this.faultsPending(req.clusterId, 'boot_failure'));
    const nodes: (FleetNode & { boot_fails: boolean })[] = [];
    for (const seq of req.seqs) {
      const nodeId = simulatedNodeId(req.clusterId, req.role, seq);
      const hardware: Omit<FleetNode, 'phase_transitions'> = {
        node_id: nodeId,
        instance_id: `inst-${shortId(req.clusterId)}-${seq}`,
        host_name: `${nodeId}.${req.region}.fleet.invalid`,
        role: req.role,
        num_gpus: worker ? 8 : 0,
        num_cpu_cores: worker ? hw.cpus : 16,
        memory_gib: worker ? hw.memGib : 64,
        networks: worker ? ['sim-data-plane', 'sim-infiniband'] : ['sim-control-plane'],
        ...(worker
          ? {
              ephemeral_storage: '7Ti',
              ...(hw.hca ? { ib_hca_type: hw.hca, ib_hca_count: 8 } : {}),
              ...(hw.nvswitch ? { nvswitch_type: hw.nvswitch, nvswitch_count: 4 } : {}),
            }
          : {}),
      };
      // A boot fault aimed at this cluster is used up by the first node that boots after it.
      const fault = faulty ? await this.takeFault(req.clusterId, nodeId, 'boot_failure') : false;
      nodes.push({ ...hardware, phase_transitions: [], boot_fails: fault });
    }
    await this.db.query(
      `INSERT INTO fleet_nodes (node_id, instance_id, cluster_id, role, region, gpu_type, preemptible, hardware, boot_fails)
       SELECT node_id, instance_id, $3, $4, $5, $6, $7, hardware, boot_fails
         FROM unnest($1::text[], $2::text[], $8::jsonb[], $9::boolean[]) AS n(node_id, instance_id, hardware, boot_fails)
       ON CONFLICT (node_id) DO NOTHING`,
      [
        nodes.map((n) => n.node_id),
        nodes.map((n) => n.instance_id),
        req.clusterId,
        req.role,
        req.region,
        req.gpuType,
        req.preemptible,
        nodes.map(({ phase_transitions: _p, boot_fails: _b, ...hardware }) => JSON.stringify(hardware)),
        nodes.map((n) => n.boot_fails),
      ],
    );
    return nodes.map(({ boot_fails: _b, ...node }) => node);
  }

  async describeNodes(nodeIds: string[]): Promise<DescribedNode[]> {
    const { rows } = await this.db.query<NodeRow>(
      `SELECT node_id, instance_id, role, hardware, started_at, boot_fails, released_at
         FROM fleet_nodes WHERE node_id = ANY($1)`,
      [nodeIds],
    );
    const now = Date.now();
    return nodeIds.map((id) => {
      const row = rows.find((r) => r.node_id === id);
      if (!row) throw new Error(`the fleet has no node ${id}`);
      const transitions = this.phasesOf(row, now);
      return {
        ...row.hardware,
        phase_transitions: transitions,
        phase: transitions[transitions.length - 1].phase,
        released: row.released_at !== null,
      };
    });
  }

  async allocateSubnet(clusterId: string): Promise<string> {
    const { rows } = await this.db.query<{ seq: string }>(
      `INSERT INTO fleet_subnets (cluster_id) VALUES ($1)
       ON CONFLICT (cluster_id) DO UPDATE SET released_at = NULL RETURNING seq`,
      [clusterId],
    );
    const seq = Number(rows[0].seq);
    await sleep(this.stepMs);
    return `10.${Math.floor(seq / 256) % 256}.${seq % 256}.0/24`;
  }

  async releaseSubnet(clusterId: string): Promise<void> {
    await this.db.query('UPDATE fleet_subnets SET released_at = now() WHERE cluster_id = $1', [clusterId]);
  }

  async provisionVolume(_volumeId: string, _sizeTib: number, onProgress: () => void): Promise<void> {
    // The simulated storage backend takes two steps to carve out a volume.
    for (let i = 0; i < 2; i++) {
      onProgress();
      await sleep(this.stepMs);
    }
  }

  async installDrivers(_nodeIds: string[], _driver: { cuda: string; driver: string; os: string }): Promise<void> {
    await sleep(this.stepMs);
  }

  async runAcceptanceTests(clusterId: string, nodeId: string, params: AcceptanceTestsParams): Promise<NodeTestReport> {
    const failed = await this.takeFault(clusterId, nodeId, 'acceptance_failure');
    const level = (params.dcgm_diag_level ?? 'DCGM_DIAG_LEVEL_MEDIUM').replace('DCGM_DIAG_LEVEL_', '');
    const checks: CheckResult[] = [];
    if (!params.dcgm_diag_skipped) {
      checks.push({
        name: 'dcgm_diag',
        passed: !failed,
        detail: failed
          ? `DCGM diagnostic (${level}) failed on GPU 3: uncorrectable ECC errors (fault injected into the simulator)`
          : `DCGM diagnostic (${level}) passed on 8 GPUs (simulated)`,
      });
    }
    if (!params.gpu_burn_skipped) {
      const seconds = params.gpu_burn_duration || 300;
      checks.push({ name: 'gpu_burn', passed: true, detail: `${seconds}s GPU burn completed (simulated)` });
    }
    if (!params.nccl_single_node_skipped) {
      checks.push({ name: 'nccl_single_node', passed: true, detail: 'intra-node all-reduce over NVLink (simulated)' });
    }
    if (!params.storage_skipped) {
      checks.push({ name: 'storage', passed: true, detail: 'ephemeral storage read/write (simulated)' });
    }
    // With a fault and every check skipped, the failure still has to show somewhere.
    if (failed && !checks.some((c) => !c.passed)) {
      checks.push({
        name: 'node_readiness',
        passed: false,
        detail: 'node not ready (fault injected into the simulator)',
      });
    }
    const report = { node_id: nodeId, passed: checks.every((c) => c.passed), checks, simulated: true };
    await this.logRun(clusterId, 'acceptance', [nodeId], report.passed, report);
    return report;
  }

  async runNcclTest(clusterId: string, nodeIds: string[]): Promise<NcclReport> {
    const failing: string[] = [];
    const faulty = await this.faultsPending(clusterId, 'nccl_failure');
    if (faulty)
      for (const id of nodeIds) if (await this.takeFault(clusterId, id, 'nccl_failure', false)) failing.push(id);
    // A fault aimed at the cluster rather than a node lands on the last node of the ring.
    if (faulty && !failing.length && nodeIds.length && (await this.takeFault(clusterId, null, 'nccl_failure'))) {
      failing.push(nodeIds[nodeIds.length - 1]);
    }
    const report: NcclReport = {
      node_ids: nodeIds,
      passed: failing.length === 0,
      failing_node_ids: failing,
      detail: failing.length
        ? `all_reduce_perf across ${nodeIds.length} node(s) stalled on ${failing.join(', ')}: InfiniBand link down (fault injected into the simulator)`
        : `all_reduce_perf across ${nodeIds.length} node(s) completed (simulated; no bandwidth is measured)`,
      simulated: true,
    };
    await this.logRun(clusterId, 'nccl', nodeIds, report.passed, report);
    return report;
  }

  async runHealthCheck(clusterId: string, nodeId: string): Promise<HealthReport> {
    const failed = await this.takeFault(clusterId, nodeId, 'health_check_failure');
    const report = {
      node_id: nodeId,
      healthy: !failed,
      detail: failed
        ? 'Xid 79: GPU has fallen off the bus (fault injected into the simulator)'
        : 'GPUs, NVLink and InfiniBand report healthy (simulated)',
      simulated: true,
    };
    await this.logRun(clusterId, 'health_check', [nodeId], report.healthy, report);
    return report;
  }

  async cordon(nodeId: string): Promise<void> {
    await this.db.query('UPDATE fleet_nodes SET cordoned = true WHERE node_id = $1', [nodeId]);
  }

  async restart(nodeId: string): Promise<void> {
    await this.db.query(
      'UPDATE fleet_nodes SET started_at = now(), boot_fails = false, cordoned = false WHERE node_id = $1',
      [nodeId],
    );
    // An injected health fault models a transient condition (a wedged GPU): a restart clears it.
    await this.db.query(`UPDATE fleet_faults SET remaining = 0 WHERE node_id = $1 AND kind = 'health_check_failure'`, [
      nodeId,
    ]);
  }

  async release(nodeIds: string[]): Promise<void> {
    await this.db.query('UPDATE fleet_nodes SET released_at = coalesce(released_at, now()) WHERE node_id = ANY($1)', [
      nodeIds,
    ]);
  }

  async releaseAllOfCluster(clusterId: string): Promise<string[]> {
    const { rows } = await this.db.query<{ node_id: string }>(
      'UPDATE fleet_nodes SET released_at = now() WHERE cluster_id = $1 AND released_at IS NULL RETURNING node_id',
      [clusterId],
    );
    return rows.map((r) => r.node_id).sort();
  }

  async preemptibleNodesAvailable(region: string, gpuType: GpuType): Promise<number | null> {
    const { rows } = await this.db.query<{ limit: number | null; used: string }>(
      `SELECT (SELECT preemptible_nodes FROM fleet_capacity WHERE region = $1 AND gpu_type = $2) AS limit,
              (SELECT count(*) FROM fleet_nodes
                WHERE region = $1 AND gpu_type = $2 AND preemptible AND released_at IS NULL) AS used`,
      [region, gpuType],
    );
    const { limit, used } = rows[0];
    return limit === null ? null : Math.max(0, limit - Number(used));
  }

  async workload(clusterId: string): Promise<Workload> {
    const { rows } = await this.db.query<Workload>(
      'SELECT pending_gpu_requests, idle_gpus FROM fleet_workloads WHERE cluster_id = $1',
      [clusterId],
    );
    return rows[0] ?? { pending_gpu_requests: 0, idle_gpus: 0 };
  }

  async kubeconfig(clusterId: string, clusterName: string): Promise<string> {
    // A credential for the simulated API server: unique per cluster, never reused, not logged.
    const token = randomBytes(32).toString('base64url');
    const server = `https://${clusterId}.k8s.fleet.invalid:6443`;
    return [
      'apiVersion: v1',
      'kind: Config',
      '# Issued by the Gantry local fleet SIMULATOR: the API server below does not exist.',
      'clusters:',
      `- name: ${clusterName}`,
      '  cluster:',
      `    server: ${server}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      `- name: ${clusterName}-admin`,
      '  user:',
      `    token: ${token}`,
      'contexts:',
      `- name: ${clusterName}`,
      '  context:',
      `    cluster: ${clusterName}`,
      `    user: ${clusterName}-admin`,
      `current-context: ${clusterName}`,
      '',
    ].join('\n');
  }

  /** Whether any fault of a kind waits for this cluster (to skip a take per node when none does). */
  private async faultsPending(clusterId: string, kind: FaultKind): Promise<boolean> {
    const { rows } = await this.db.query<{ pending: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM fleet_faults WHERE cluster_id = $1 AND kind = $2 AND remaining > 0) AS pending',
      [clusterId, kind],
    );
    return rows[0].pending;
  }

  /** Uses up one injected fault aimed at this node (or, when allowed, at any node of the cluster). */
  private async takeFault(clusterId: string, nodeId: string | null, kind: FaultKind, anyNode = true): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE fleet_faults SET remaining = remaining - 1
        WHERE id = (
          SELECT id FROM fleet_faults
           WHERE cluster_id = $1 AND kind = $3 AND remaining > 0
             AND (node_id = $2 OR ($4 AND node_id IS NULL))
           ORDER BY (node_id IS NULL), id
           LIMIT 1 FOR UPDATE SKIP LOCKED)`,
      [clusterId, nodeId, kind, anyNode || nodeId === null],
    );
    return (rowCount ?? 0) > 0;
  }

  private async logRun(clusterId: string, kind: string, nodeIds: string[], passed: boolean, detail: object) {
    await this.db.query(
      'INSERT INTO fleet_test_runs (cluster_id, kind, node_ids, passed, detail) VALUES ($1, $2, $3, $4, $5)',
      [clusterId, kind, nodeIds, passed, detail],
    );
  }
}

/** Operator controls of the simulator (admin routes and tests): faults, capacity, workload. */
export class FleetControls {
  constructor(private readonly db: Db) {}

  async injectFault(f: { clusterId: string; nodeId?: string; kind: FaultKind; count: number }): Promise<number> {
    const { rows } = await this.db.query<{ id: string }>(
      'INSERT INTO fleet_faults (cluster_id, node_id, kind, remaining) VALUES ($1, $2, $3, $4) RETURNING id',
      [f.clusterId, f.nodeId ?? null, f.kind, f.count],
    );
    return Number(rows[0].id);
  }

  async setPreemptibleCapacity(region: string, gpuType: GpuType, nodes: number | null): Promise<void> {
    await this.db.query(
      `INSERT INTO fleet_capacity (region, gpu_type, preemptible_nodes) VALUES ($1, $2, $3)
       ON CONFLICT (region, gpu_type) DO UPDATE SET preemptible_nodes = EXCLUDED.preemptible_nodes`,
      [region, gpuType, nodes],
    );
  }

  async setWorkload(clusterId: string, w: Workload): Promise<void> {
    await this.db.query(
      `INSERT INTO fleet_workloads (cluster_id, pending_gpu_requests, idle_gpus, updated_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (cluster_id) DO UPDATE
         SET pending_gpu_requests = EXCLUDED.pending_gpu_requests, idle_gpus = EXCLUDED.idle_gpus, updated_at = now()`,
      [clusterId, w.pending_gpu_requests, w.idle_gpus],
    );
  }

  async testRuns(clusterId: string) {
    const { rows } = await this.db.query(
      'SELECT kind, node_ids, passed, detail, ran_at FROM fleet_test_runs WHERE cluster_id = $1 ORDER BY id',
      [clusterId],
    );
    return rows;
  }
}
