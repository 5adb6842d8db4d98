/**
 * A cluster's messages: the Updates (with their validators) and Signals the
 * workflow function (clusters.ts) routes here. A validator refuses with the
 * API error it means (entity-kit refuse); a validator writes no history.
 * Workflow code: deterministic.
 */
import { patched } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { refuse } from './entity-kit';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { clusterControl as control } from './cluster-activities';
import { ClusterRuleError, resolveClusterUpdate, type ClusterUpdateRequest } from '../shared/cluster-rules';
import {
  FINAL_REMEDIATION_STATES,
  type CreateRemediationRequest,
  type Remediation,
  type ReviewRemediationRequest,
} from '../shared/clusters';
import { findWorker, lifecycleEvent, nowIso } from '../shared/cluster-state';
import type { ClusterNodes } from './cluster-nodes';
import type { ClusterProjection, ClusterRun, RemediationProgress } from './cluster-run';
import type { RunningCluster } from './cluster-running';

export class ClusterHandlers {
  constructor(
    private readonly run: ClusterRun,
    private readonly status: ClusterProjection,
    private readonly nodes: ClusterNodes,
    private readonly cluster: RunningCluster,
  ) {}

  /** Update `update`: a resize or a change of reservation end, config, add-ons or auto-remediation. */
  async update(req: ClusterUpdateRequest): Promise<void> {
    this.run.state.counts = resolveClusterUpdate(this.run.state.spec, this.run.state.counts, req, new Date());
    if (req.reservation_end_time) this.run.state.spec.reservation_end_time = req.reservation_end_time;
    if (req.cluster_config)
      this.run.state.spec.cluster_config = { ...this.run.state.spec.cluster_config, ...req.cluster_config };
    for (const a of req.add_ons ?? []) {
      const addOn = this.run.state.spec.add_ons.find((x) => x.name === a.name)!;
      addOn.config = { ...addOn.config, ...a.config };
    }
    if (req.auto_remediation_enabled !== undefined) {
      this.run.state.spec.auto_remediation_enabled = req.auto_remediation_enabled;
      for (const n of this.run.state.gpu_worker_nodes) n.auto_remediation_enabled = req.auto_remediation_enabled;
    }
    if (this.run.state.spec.auto_scale) {
      this.run.state.autoscale_target_gpus = Math.max(
        this.run.state.autoscale_target_gpus,
        this.run.state.counts.num_gpus,
      );
    }
    this.run.wake = true;
    await this.status.project('Update accepted.');
  }

  validateUpdate(req: ClusterUpdateRequest): void {
    if (this.run.deleteRequested) throw refuse(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
    try {
      resolveClusterUpdate(this.run.state.spec, this.run.state.counts, req, new Date());
    } catch (err) {
      if (err instanceof ClusterRuleError) throw refuse(UPDATE_REJECTIONS.invalid, err.message, { param: err.param });
      throw err;
    }
  }

  /** Update `delete`: the main loop stops and tears the cluster down. */
  requestDelete(reason: string): void {
    this.run.deleteRequested ??= reason;
    this.run.wake = true;
  }

  /** Update `createRemediation`: a manual remediation, straight to PENDING. */
  async createRemediation(req: CreateRemediationRequest): Promise<Remediation> {
    const node = findWorker(this.run.state, req.instanceId)!;
    const now = nowIso();
    const r: Remediation = {
      id: req.remediationId,
      cluster_id: this.run.clusterId,
      instance_id: node.instance_id,
      instance_name: node.node_id,
      mode: req.mode,
      state: 'PENDING', // created through the API: no approval step (SDK)
      trigger: 'REMEDIATION_TRIGGER_MANUAL',
      reason: req.reason,
      requested_by: req.requestedBy,
      create_time: now,
      update_time: now,
    };
    this.run.state.remediations.push(r);
    await control.recordRemediation(r);
    this.run.wake = true;
    return r;
  }

  validateCreateRemediation(req: CreateRemediationRequest): void {
    if (this.run.deleteRequested) throw refuse(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
    const node = findWorker(this.run.state, req.instanceId);
    if (!node) throw refuse(UPDATE_REJECTIONS.notFound, `The cluster has no live node '${req.instanceId}'.`);
    if (this.run.state.draining[node.node_id]) {
      throw refuse(UPDATE_REJECTIONS.conflict, `Node '${node.node_id}' is being drained after a preemption notice.`);
    }
    const open = this.run.state.remediations.find((r) => r.instance_id === node.instance_id);
    if (open) {
      throw refuse(
        UPDATE_REJECTIONS.conflict,
        `Node '${node.node_id}' already has remediation '${open.id}' in state ${open.state}.`,
      );
    }
  }

  /** Update `reviewRemediation`: approve, reject or cancel a remediation that has not started. */
  async reviewRemediation(req: ReviewRemediationRequest): Promise<Remediation> {
    const r = this.run.state.remediations.find((x) => x.id === req.remediationId)!;
    const now = nowIso();
    r.update_time = now;
    if (req.action === 'approve') {
      r.state = 'PENDING';
      if (req.mode) r.mode = req.mode;
    } else {
      r.state = 'CANCELLED';
      r.end_time = now;
    }
    if (req.action !== 'cancel') {
      r.reviewed_by = req.by;
      r.review_time = now;
      if (req.comment !== undefined) r.review_comment = req.comment;
    }
    if (req.action === 'reject') {
      const node = findWorker(this.run.state, r.instance_id);
      if (node) {
        this.run.state.remediation_declined.push(node.node_id);
        lifecycleEvent(
          this.run.state,
          node.node_id,
          'RemediationRejected',
          `Remediation ${r.id} was rejected by ${req.by}.`,
        );
      }
    }
    if (FINAL_REMEDIATION_STATES.includes(r.state))
      this.run.state.remediations.splice(this.run.state.remediations.indexOf(r), 1);
    await control.recordRemediation(r);
    this.run.wake = true;
    await this.status.project();
    return { ...r };
  }

  validateReviewRemediation(req: ReviewRemediationRequest): void {
    const r = this.run.state.remediations.find((x) => x.id === req.remediationId);
    if (!r) throw refuse(UPDATE_REJECTIONS.conflict, `Remediation '${req.remediationId}' is not open any more.`);
    if ((req.action === 'approve' || req.action === 'reject') && r.state !== 'PENDING_APPROVAL') {
      throw refuse(
        UPDATE_REJECTIONS.conflict,
        `Only a remediation in PENDING_APPROVAL can be ${req.action === 'approve' ? 'approved' : 'rejected'}; '${r.id}' is ${r.state}.`,
      );
    }
    if (req.action === 'cancel' && r.state !== 'PENDING_APPROVAL' && r.state !== 'PENDING') {
      throw refuse(
        UPDATE_REJECTIONS.conflict,
        `Only a remediation in PENDING_APPROVAL or PENDING can be cancelled; '${r.id}' is ${r.state}.`,
      );
    }
    if (req.action === 'cancel' && this.nodes.running.has(r.id)) {
      throw refuse(UPDATE_REJECTIONS.conflict, `Remediation '${r.id}' has already started.`);
    }
    if (req.mode === 'REMEDIATION_MODE_HOST_POWER_CYCLE') {
      throw refuse(
        UPDATE_REJECTIONS.invalid,
        'REMEDIATION_MODE_HOST_POWER_CYCLE cannot be set when approving; create a host power-cycle remediation instead.',
        { param: 'mode' },
      );
    }
  }

  /** Signal `preemptionNotice`: the fleet reclaims a preemptible node. */
  onPreemptionNotice(nodeId: string): void {
    // A running cluster starts the drain from the handler: the 300 s grace cannot wait behind a
    // scale-up or a health round of the main loop. During bring-up the notice waits for the loop,
    // which owns the nodes until then. (Before this patch every notice waited for the loop.)
    if (this.run.state.provisioned && patched(PATCHES.drainOnNotice.id)) this.cluster.startDrain(nodeId);
    else this.run.notices.push(nodeId);
    this.run.wake = true;
  }

  /** Signal `remediationProgress`: a remediation child reports a step. */
  onRemediationProgress({ remediation, nodeId, reason, message }: RemediationProgress): void {
    const r = this.run.state.remediations.find((x) => x.id === remediation.id);
    if (r) Object.assign(r, remediation);
    const node = findWorker(this.run.state, nodeId);
    if (node && (remediation.state === 'QUARANTINING' || remediation.state === 'QUARANTINED')) node.status = 'Cordoned';
    if (node && remediation.state === 'RUNNING') node.status = 'Remediating';
    lifecycleEvent(this.run.state, nodeId, reason, message);
    this.run.wake = true;
  }
}
