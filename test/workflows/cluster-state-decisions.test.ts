/**
 * The cluster workflow's pure decisions (shared/cluster-state.ts), each on an
 * explicit state, without Temporal: what the autoscaler asks for and which
 * nodes a scale-down releases.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { initialState, type ClusterState, type Remediation } from '../../shared/clusters';
import {
  applyHealthReport,
  autoscaleCooledDown,
  autoscaleTargetGpus,
  newNode,
  scaleDownVictims,
} from '../../shared/cluster-state';
import { clusterInput } from '../helpers/cluster-doubles';

/** A running cluster of `nodes` regular 8-GPU workers (w-1 the oldest), autoscaling between 16 and 48 GPUs. */
function running(nodes: number): ClusterState {
  const s = initialState(clusterInput('decisions', { gpus: 16, spec: { auto_scale: true, auto_scale_max_gpus: 48 } }));
  for (let i = 1; i <= nodes; i++) {
    s.gpu_worker_nodes.push(
      newNode(
        {
          node_id: `w-${i}`,
          instance_id: `i-${i}`,
          host_name: `w-${i}`,
          role: 'gpu-worker',
          num_gpus: 8,
          num_cpu_cores: 96,
          memory_gib: 1024,
          networks: [],
          phase_transitions: [],
        },
        'on_demand',
        true,
      ),
    );
  }
  return s;
}

describe('cluster decisions (pure)', () => {
  test('pending GPU requests ask for whole nodes, up to the ceiling', () => {
    assert.equal(autoscaleTargetGpus(running(2), { pending_gpu_requests: 3, idle_gpus: 0 }), 24);
    assert.equal(autoscaleTargetGpus(running(2), { pending_gpu_requests: 9, idle_gpus: 0 }), 32);
    assert.equal(autoscaleTargetGpus(running(5), { pending_gpu_requests: 40, idle_gpus: 0 }), 48, 'capped at 48');
  });

  test('idle whole nodes are released down to num_gpus; a partly idle node is kept', () => {
    assert.equal(autoscaleTargetGpus(running(4), { pending_gpu_requests: 0, idle_gpus: 17 }), 16);
    assert.equal(autoscaleTargetGpus(running(4), { pending_gpu_requests: 0, idle_gpus: 8 }), 24);
    assert.equal(autoscaleTargetGpus(running(3), { pending_gpu_requests: 0, idle_gpus: 40 }), 16, 'floor num_gpus');
    const s = running(3);
    s.autoscale_target_gpus = 24;
    assert.equal(autoscaleTargetGpus(s, { pending_gpu_requests: 0, idle_gpus: 7 }), 24, 'nothing to act on');
  });

  test('the autoscaler waits out its cool-down after a scale', () => {
    const s = running(2);
    assert.equal(autoscaleCooledDown(s, Date.parse('2026-01-01T00:00:00Z'), 300), true, 'never scaled');
    s.last_scale_at = '2026-01-01T00:00:00Z';
    assert.equal(autoscaleCooledDown(s, Date.parse('2026-01-01T00:04:59Z'), 300), false);
    assert.equal(autoscaleCooledDown(s, Date.parse('2026-01-01T00:05:00Z'), 300), true);
  });

  test('a scale-down releases the newest nodes first and never one under remediation', () => {
    assert.deepEqual(
      scaleDownVictims(running(4), 2).map((n) => n.node_id),
      ['w-4', 'w-3'],
    );
    const s = running(4);
    s.remediations.push({ id: 'r', instance_id: 'i-4', state: 'RUNNING' } as Remediation);
    assert.deepEqual(
      scaleDownVictims(s, 2).map((n) => n.node_id),
      ['w-3', 'w-2'],
    );
    assert.deepEqual(scaleDownVictims(running(2), 2), [], 'nothing above the target');
  });

  test('a failed health check makes the node Unhealthy once and asks for a reboot, auto-started or for approval', () => {
    const s = running(2);
    const [auto, manual] = s.gpu_worker_nodes;
    manual.auto_remediation_enabled = false;
    const first = applyHealthReport(s, 'c-1', auto, { healthy: false, detail: 'XID 79' });
    assert.equal(auto.status, 'Unhealthy');
    assert.equal(first.changed, true);
    assert.equal(first.remediation?.state, 'PENDING', 'auto-remediation starts at once');
    assert.equal(first.remediation?.mode, 'REMEDIATION_MODE_REBOOT_VM');
    assert.equal(
      applyHealthReport(s, 'c-1', manual, { healthy: false, detail: 'XID 79' }).remediation?.state,
      'PENDING_APPROVAL',
    );
    assert.equal(s.node_lifecycle_events.filter((e) => e.reason === 'HealthCheckFailed').length, 2);

    // Declined: the node stays Unhealthy, nothing more is asked, and a repeat failure is not news.
    s.remediation_declined.push(manual.node_id);
    assert.deepEqual(applyHealthReport(s, 'c-1', manual, { healthy: false, detail: 'XID 79' }), { changed: false });
    // Healthy again: back to Ready, and it may be remediated again later.
    assert.equal(applyHealthReport(s, 'c-1', manual, { healthy: true, detail: 'ok' }).changed, true);
    assert.equal(manual.status, 'Ready');
    assert.deepEqual(s.remediation_declined, []);
  });

  test('a health check that could not run makes the node Unknown, said once', () => {
    const s = running(1);
    const [node] = s.gpu_worker_nodes;
    assert.deepEqual(applyHealthReport(s, 'c-1', node, undefined), { changed: true });
    assert.equal(node.status, 'Unknown');
    assert.deepEqual(applyHealthReport(s, 'c-1', node, undefined), { changed: false });
    assert.equal(s.node_lifecycle_events.filter((e) => e.reason === 'HealthCheckUnavailable').length, 1);
    assert.equal(applyHealthReport(s, 'c-1', node, { healthy: true, detail: 'ok' }).changed, true);
    assert.equal(node.status, 'Ready');
  });
});
