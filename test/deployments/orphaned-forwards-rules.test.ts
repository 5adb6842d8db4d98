/**
 * Which nat rules the sweep of leftover port forwards takes out
 * (providers/containers/podman/orphaned-port-forwards.ts), on rules as `iptables -t nat -S` printed
 * them on this project's test machine: a leftover of a Gantry replica network, the rules of a
 * running replica, and those of a network that is not Gantry's. (The sweep on real Podman and
 * iptables: podman-network-leftovers.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { orphanedForwards } from '../../providers/containers/podman/orphaned-port-forwards';

const GONE = 'c292c50364193d33fd137d66db125023fb0baf15d6ee204f87a92391a5598629';
const LIVE = 'e42992398b4f1415cec6bb901a9f862604dcc708e47c0a2f607b9437b3493e05';
const OTHER = '86cc7521c68b20a7c9f97dd4cd176c41e13008f986736be8056aca8cbb28dab8';

/** One container's rules as CNI makes them: masquerade chain, port forward chain, and the jumps to them. */
const containerRules = (network: string, id: string, hash: string, port: number, address: string) => [
  `-N CNI-DN-${hash.slice(0, 21)}`,
  `-N CNI-${hash}`,
  `-A POSTROUTING -s ${address}/32 -m comment --comment "name: \\"${network}\\" id: \\"${id}\\"" -j CNI-${hash}`,
  `-A CNI-DN-${hash.slice(0, 21)} -s 10.89.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport ${port} -j CNI-HOSTPORT-SETMARK`,
  `-A CNI-DN-${hash.slice(0, 21)} -d 127.0.0.1/32 -p tcp -m tcp --dport ${port} -j DNAT --to-destination ${address}:8000`,
  `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"${network}\\" id: \\"${id}\\"" -m multiport --dports ${port} -j CNI-DN-${hash.slice(0, 21)}`,
  `-A CNI-${hash} -d 10.89.0.0/24 -m comment --comment "name: \\"${network}\\" id: \\"${id}\\"" -j ACCEPT`,
  `-A CNI-${hash} ! -d 224.0.0.0/4 -m comment --comment "name: \\"${network}\\" id: \\"${id}\\"" -j MASQUERADE`,
];

const NAT = [
  '-P PREROUTING ACCEPT',
  '-N CNI-HOSTPORT-DNAT',
  '-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
  ...containerRules('gantry-c530dd6104a9d1fe', GONE, 'd911e3af558535f5bd4220bc', 40311, '10.89.0.2'),
  ...containerRules('gantry-f7913071f8d018bb', LIVE, '8bec67296c48f7407a38d09e', 43865, '10.89.0.5'),
  ...containerRules('podman', OTHER, 'f891eda7ae68318dc3584dd8', 41000, '10.88.0.70'),
  '',
].join('\n');

describe('the rules the sweep of leftover port forwards takes out', () => {
  test("a gone container's jumps are deleted and its two chains flushed and removed, in one commit", () => {
    const { containers, script } = orphanedForwards(NAT, new Set([LIVE]));
    assert.deepEqual(containers, [GONE]);
    assert.equal(
      script,
      [
        '*nat',
        `-D POSTROUTING -s 10.89.0.2/32 -m comment --comment "name: \\"gantry-c530dd6104a9d1fe\\" id: \\"${GONE}\\"" -j CNI-d911e3af558535f5bd4220bc`,
        `-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"gantry-c530dd6104a9d1fe\\" id: \\"${GONE}\\"" -m multiport --dports 40311 -j CNI-DN-d911e3af558535f5bd422`,
        '-F CNI-d911e3af558535f5bd4220bc',
        '-X CNI-d911e3af558535f5bd4220bc',
        '-F CNI-DN-d911e3af558535f5bd422',
        '-X CNI-DN-d911e3af558535f5bd422',
        'COMMIT',
        '',
      ].join('\n'),
    );
  });

  test("a network that is not Gantry's is left alone, even when Podman does not know its container", () => {
    const { containers, script } = orphanedForwards(NAT, new Set([GONE, LIVE]));
    assert.deepEqual(containers, []);
    assert.equal(script, '', 'nothing to run');
  });

  test('no rules of Gantry at all: nothing to do', () => {
    assert.deepEqual(orphanedForwards('-P PREROUTING ACCEPT\n', new Set()), { containers: [], script: '' });
  });
});
