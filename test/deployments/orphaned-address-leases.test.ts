/**
 * Which of CNI's files the sweep of providers/containers/podman/orphaned-address-leases.ts takes
 * for a gone container's, on a folder laid out as CNI lays out /var/lib/cni (the file contents as
 * host-local and libcni wrote them on this machine), without Podman.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { containerFiles, orphanedLeases } from '../../providers/containers/podman/orphaned-address-leases';

const GONE = '56cf392348a014ba3059527195ce83fe017585d48f9bb84eb60ccb62813f55b8';
const LIVE = '27236cca66a59a8d55e0f94e25502f69481abe34c6d6cddbdccef80eb69da731';
const OTHERS = '9ae2830bbba2f3064af3154130d7cd6ec0322dd3ef8aadc5b58a9a7a51dd2af8';
const NETWORK = 'gantry-0534f0be3e2e0c7f';

test("a gone container's lease and cached result are found; a live one's, host-local's own files and other networks' are not", async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'gantry-cni-'));
  try {
    const state = { leases: path.join(root, 'networks'), results: path.join(root, 'results') };
    const net = (name: string) => {
      mkdirSync(path.join(state.leases, name), { recursive: true });
      return (file: string, content: string) => writeFileSync(path.join(state.leases, name, file), content);
    };
    const gantry = net(NETWORK);
    gantry('10.89.0.2', `${GONE}\r\neth0`);
    gantry('10.89.0.7', `${LIVE}\r\neth0`);
    gantry('last_reserved_ip.0', '10.89.0.7');
    gantry('lock', '');
    net('podman')('10.88.0.5', `${OTHERS}\r\neth0`); // Podman's default network: not Gantry's
    mkdirSync(state.results);
    for (const name of [`${NETWORK}-${GONE}-eth0`, `${NETWORK}-${LIVE}-eth0`, `podman-${OTHERS}-eth0`])
      writeFileSync(path.join(state.results, name), '{"kind":"cniCacheV1"}');

    const files = await containerFiles(state);
    const rel = (f: { path: string }) => path.relative(root, f.path);
    assert.deepEqual(
      files.map((f) => [rel(f), f.container]).sort(),
      [
        [`networks/${NETWORK}/10.89.0.2`, GONE],
        [`networks/${NETWORK}/10.89.0.7`, LIVE],
        [`results/${NETWORK}-${GONE}-eth0`, GONE],
        [`results/${NETWORK}-${LIVE}-eth0`, LIVE],
      ].sort(),
    );
    assert.deepEqual(
      orphanedLeases(files, new Set([LIVE, OTHERS]))
        .map(rel)
        .sort(),
      [`networks/${NETWORK}/10.89.0.2`, `results/${NETWORK}-${GONE}-eth0`],
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a machine where CNI never made a network has nothing to look at', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'gantry-cni-'));
  try {
    assert.deepEqual(
      await containerFiles({ leases: path.join(root, 'networks'), results: path.join(root, 'results') }),
      [],
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
