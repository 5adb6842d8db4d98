/**
 * GantryPhase: one search across every resource's own status vocabulary.
 * The expectations are the product's words (what an operator filtering on
 * waiting, active, failed or done must find), one per vocabulary.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gantryPhaseOf } from '../../shared/search-attributes';

describe('GantryPhase', () => {
  const cases: Array<[string, string]> = [
    ['queued', 'waiting'], // fine-tune
    ['running', 'active'],
    ['error', 'failed'],
    ['cancelled', 'done'],
    ['WaitingForControlPlaneNodes', 'waiting'], // cluster
    ['Ready', 'active'],
    ['Deleting', 'done'],
    ['ScaledToZero', 'waiting'], // deployment
    ['Failed', 'failed'],
    ['PENDING_APPROVAL', 'waiting'], // remediation
    ['ROLLOUT_STATE_RUNNING', 'active'], // rollout
    ['ROLLOUT_STATE_SYSTEM_PAUSED', 'waiting'],
    ['ROLLOUT_STATE_PAUSED', 'waiting'],
    ['ROLLOUT_STATE_COMPLETED', 'done'],
    ['ROLLOUT_STATE_CANCELED', 'done'],
    ['ADAPTER_LOAD_STATE_PENDING', 'waiting'], // adapter load
    ['ADAPTER_LOAD_STATE_READY', 'active'],
    ['ADAPTER_LOAD_STATE_FAILED', 'failed'],
    ['REMOTE_UPLOAD_STATUS_PENDING', 'waiting'], // model upload
    ['REMOTE_UPLOAD_STATUS_SUCCEEDED', 'done'],
    ['REMOTE_UPLOAD_STATUS_FAILED', 'failed'],
    ['RUNNING', 'active'], // speech request
    ['COMPLETED', 'done'],
    ['provisioning', 'active'], // shared volume
    ['available', 'active'],
    ['deleted', 'done'],
  ];
  for (const [status, phase] of cases) {
    test(`${status} is ${phase}`, () => assert.equal(gantryPhaseOf(status), phase));
  }
});
