/**
 * Every `patched()` id of the workflow code, in one place, with the workflow
 * type it changes. A patch marks a change to a workflow's commands: runs that
 * started before it replay the old branch, new runs take the new one.
 *
 * test/replay/patches.test.ts holds each entry to its promise: a recorded
 * history of that workflow type that took the new branch (it carries the
 * marker) and one recorded before the change (it does not), and no
 * `patched('...')` call in workflows/ outside this table. Ids are never reused
 * or removed while a run that started before the patch may still be open.
 */
export const PATCHES = {
  audioUsage: { id: 'audio-usage', workflow: 'audioRequest' },
  tokenizedDatasetArchive: { id: 'tokenized-dataset-archive', workflow: 'fineTune' },
  modelRegistry: { id: 'model-registry', workflow: 'fineTune' },
  resizeIsNotDegradation: { id: 'resize-is-not-degradation', workflow: 'cluster' },
  drainWorkersOnDelete: { id: 'drain-workers-on-delete', workflow: 'cluster' },
  /** A preemption notice to a running cluster starts its drain at once, not after the main loop's round. */
  drainOnNotice: { id: 'drain-on-notice', workflow: 'cluster' },
  /** A remediation child that fails, is terminated or cannot start ends the remediation, not the cluster. */
  remediationChildFailureIsState: { id: 'remediation-child-failure-is-state', workflow: 'cluster' },
  /** Deleting a cluster cancels its running remediations and waits for them to release what they hold. */
  cancelRemediationsOnDelete: { id: 'cancel-remediations-on-delete', workflow: 'cluster' },
  /** A node test whose retries are spent marks the node (Unknown, not accepted), not the whole cluster failed. */
  nodeTestFailureIsState: { id: 'node-test-failure-is-state', workflow: 'cluster' },
  /** An unexpected failure of a cluster run releases its nodes before the run fails. */
  compensateOnFailure: { id: 'compensate-on-failure', workflow: 'cluster' },
  /** A cancelled remediation releases the replacement node it provisioned and ends as CANCELLED. */
  remediationReleasesOnCancel: { id: 'remediation-releases-on-cancel', workflow: 'nodeRemediation' },
  /** A remediation's GantryStatus/GantryPhase follow its state, to its end (done, failed). */
  remediationStatus: { id: 'remediation-status', workflow: 'nodeRemediation' },
  /** An autoscaling metric that cannot be read skips the observation instead of failing the deployment. */
  skipFailedObservation: { id: 'skip-failed-observation', workflow: 'deployment' },
  /** An unexpected failure of a deployment run stops its replicas and projects Failed before the run fails. */
  deploymentCompensateOnFailure: { id: 'deployment-compensate-on-failure', workflow: 'deployment' },
  /** A replica supervisor that missed its heartbeats is re-attached to the replica, not replaced by a second one. */
  reattachSupervisorAfterHeartbeatTimeout: {
    id: 'reattach-supervisor-after-heartbeat-timeout',
    workflow: 'deployment',
  },
  /** A supervisor whose host shut down to restart under the same name re-attaches; the replica is not replaced. */
  reattachWhenHostRestarts: { id: 'reattach-when-host-restarts', workflow: 'deployment' },
  /** Replica ids are `<deployment id>-<n>`, unique across projects (they were `<name>-<n>`). */
  replicaIdsPerDeployment: { id: 'replica-ids-per-deployment', workflow: 'deployment' },
  /** A queued fine-tune waits for a GPU worker with backing-off probes and continues as new while it waits. */
  fineTuneQueueBackoff: { id: 'fine-tune-queue-backoff', workflow: 'fineTune' },
  /** Training whose attempts ran out but moved its checkpoint forward gets a new round of attempts from there. */
  trainingBudgetCountsProgress: { id: 'training-budget-counts-progress', workflow: 'fineTune' },
  /** A rollout keeps GantryStatus/GantryPhase current and ends only after its running Update handlers finish. */
  rolloutStatusAndHandlers: { id: 'rollout-status-and-handlers', workflow: 'endpointRollout' },
  /** An adapter load keeps GantryStatus/GantryPhase current as its state changes. */
  adapterLoadStatus: { id: 'adapter-load-status', workflow: 'adapterLoad' },
  /** A speech request sets GantryStatus/GantryPhase to how it ended (COMPLETED or FAILED). */
  audioFinalStatus: { id: 'audio-final-status', workflow: 'audioRequest' },
  /** A model upload sets GantryStatus/GantryPhase to how it ended (SUCCEEDED or FAILED). */
  modelUploadFinalStatus: { id: 'model-upload-final-status', workflow: 'modelUpload' },
  /** A shared volume's provisioning sets GantryStatus/GantryPhase to available (or gone). */
  volumeFinalStatus: { id: 'volume-final-status', workflow: 'storageVolume' },
  /** A rollout canceled with CANCEL_DISPOSITION_REVERT moves the pair's traffic back to the source and restores both bounds. */
  rolloutCancelRevert: { id: 'rollout-cancel-revert', workflow: 'endpointRollout' },
  /** A deployment autoscaled on HTTPAvgRequestDuration reads the gateway's mean answer time. */
  httpAvgRequestDuration: { id: 'http-avg-request-duration', workflow: 'deployment' },
  /** A GPU queue unserved during bring-up's tests makes the run continue as new every so many probes. */
  bringUpContinuesAsNew: { id: 'bring-up-continues-as-new', workflow: 'cluster' },
  /** An unserved GPU queue is waited on by one backing-off probe per cluster; running clusters skip health rounds. */
  sharedAcceleratorProbe: { id: 'shared-accelerator-probe', workflow: 'cluster' },
  /**
   * A node test that waited in vain for a GPU worker asks whether a host polls the queue: if one
   * does, the queue is busy (every slot taken), not unserved, and the test waits again, twice as long.
   * The probe of an unserved queue asks the same question instead of sending a task to the queue.
   */
  busyAcceleratorQueue: { id: 'busy-accelerator-queue', workflow: 'cluster' },
  /**
   * An adapter loads on each container host that holds replicas of the deployment, on that host's
   * own queue (its files on that host's disk), not on whichever host takes the shared queue's task.
   */
  adapterLoadPerHost: { id: 'adapter-load-per-host', workflow: 'adapterLoad' },
  // ---- issue 44: every ended entity run says how it ended (GantryPhase done or failed) ----
  /** A deleted deployment's run ends with GantryStatus Deleted (GantryPhase done); it kept its last serving status. */
  deploymentEndedStatus: { id: 'deployment-ended-status', workflow: 'deployment' },
  /** A deleted cluster's run ends with GantryStatus Deleted (done), a failed one with Failed (failed), not Deleting. */
  clusterEndedStatus: { id: 'cluster-ended-status', workflow: 'cluster' },
  /** A detached adapter load ends with GantryStatus ADAPTER_LOAD_STATE_DETACHED (done); it kept READY. */
  adapterLoadEndedStatus: { id: 'adapter-load-ended-status', workflow: 'adapterLoad' },
  /** A queue dispatcher that ends idle sets GantryStatus completed (GantryPhase done); it kept running. */
  queueDispatcherEndedStatus: { id: 'queue-dispatcher-ended-status', workflow: 'queueDispatcher' },
  // ---- the whole-platform crash test's stuck rollout (CI of stop 51) ----
  /** A replica launch deferred by a backoff that fell due while the round projected is tried then, not never. */
  retryFallenDueWhileProjecting: { id: 'retry-fallen-due-while-projecting', workflow: 'deployment' },
} as const;
