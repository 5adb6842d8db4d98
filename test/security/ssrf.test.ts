/**
 * Server-side request forgery, as a tenant with an ordinary project key tries it: every route where
 * the tenant gives a URL that the platform itself fetches (a model upload from a URL, audio by URL
 * for a transcription or a translation), asked for the platform's own machine and network in every
 * spelling (loopback, private ranges, cloud metadata, this machine's own interface addresses, a name
 * that resolves to a private address), other schemes, credentials in the URL and odd ports.
 *
 * Each request is refused with a 400 naming the field (the audio routes: after the job that fetches
 * has failed, since the API answers once it ended), and a listener the test runs on every address
 * of this machine (`::`, dual-stack, the port each URL names) counts zero connections once every
 * request has been answered and every job it started has ended.
 *
 * Not tested here: a redirect from a public server to a private address (the fetch follows
 * redirects by hand and checks each hop as it checks the first, providers/remote/fetch-remote.ts),
 * nor a name that resolves publicly when checked and privately when connected to. Both need a
 * server at a public address, and this machine reaches nothing but itself; fetchRemote has no
 * resolver to inject, and the connection-time check is covered in test/models/remote-fetch.test.ts.
 */
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import ipaddr from 'ipaddr.js';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let listener: Server;
let port: number;
/** Connections the listener accepted (any protocol): what reached this machine from a fetch. */
const reached: string[] = [];
const sockets = new Set<Socket>();

before(async () => {
  p = await startTestPlatform({ speech: true, env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'false' } });
  t = await createTenant(p.db);
  listener = createServer((socket) => {
    reached.push(`${socket.remoteAddress} -> ${socket.localAddress}`);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
  });
  // `::` without ipv6Only: every IPv4 and IPv6 address of this machine, loopback or not.
  await new Promise<void>((r) => listener.listen({ port: 0, host: '::', ipv6Only: false }, r));
  port = (listener.address() as AddressInfo).port;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => listener.close(() => r()));
  await p.stop();
});

/** What a refusal says: the address is private, the scheme or credentials are refused, or the name resolves to nothing. */
const REFUSED = /private address|Only http and https|credentials|not a URL|could not be resolved|ENOTFOUND/;

/** A port of this machine's own services (PostgreSQL, Temporal) from the address the platform uses. */
const portOf = (address: string) => new URL(address.includes('://') ? address : `tcp://${address}`).port;

/**
 * Every URL an attacker would try, each aimed at the listener where an address of this machine is
 * named. A URL the platform fetched would show in `reached`.
 */
async function attackerUrls(): Promise<string[]> {
  const loopback = [
    `http://127.0.0.1:${port}/model.tar`,
    `http://127.1:${port}/`,
    `http://127.0.0.2:${port}/`,
    `http://localhost:${port}/`,
    `http://LOCALHOST:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://0:${port}/`,
    `http://[::]:${port}/`,
    `http://[::1]:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[0:0:0:0:0:ffff:7f00:1]:${port}/`,
    `http://[64:ff9b::7f00:1]:${port}/`, // NAT64
    `http://2130706433:${port}/`, // one decimal number
    `http://0x7f000001:${port}/`, // hexadecimal
    `http://0x7f.0.0.1:${port}/`,
    `http://0177.0.0.1:${port}/`, // octal
    `http://017700000001:${port}/`,
    `http://127.0.0.1.:${port}/`, // trailing dot
    `http://%31%32%37.0.0.1:${port}/`, // percent-encoded
    `http://①②⑦.0.0.1:${port}/`, // full-width digits the URL parser folds
    `HTTP://127.0.0.1:${port}/`,
  ];
  const privateRanges = [
    'http://10.0.0.1/',
    'http://10.255.255.254:8080/',
    'http://172.16.0.1/',
    'http://172.31.255.254/',
    'http://192.168.0.1/',
    'http://100.64.0.1/', // carrier-grade NAT
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/', // cloud metadata
    'http://[fd00:ec2::254]/latest/meta-data/', // the IPv6 metadata address
    // The metadata server's name on one cloud; here it resolves to nothing, which must be a 400 too
    // (the audio routes answered it with a 500 after four tries of the lookup).
    'http://metadata.google.internal./computeMetadata/v1/',
    'http://[fc00::1]/',
    'http://[fd12:3456::1]/',
    'http://[fe80::1]/',
    'http://[::ffff:169.254.169.254]/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://[::ffff:10.0.0.1]/',
  ];
  // This machine's own addresses on its networks (the container networks' gateways among them):
  // the listener answers on each of them.
  const own = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a && !a.internal && !a.address.startsWith('fe80:'))
    .map((a) => (a!.family === 'IPv6' ? `http://[${a!.address}]:${port}/` : `http://${a!.address}:${port}/`));
  // A name that is not an address and resolves to one of this machine's: its own host name.
  const names = [`http://${hostname()}:${port}/`];
  const otherSchemes = [
    'file:///etc/passwd',
    `file://localhost/etc/passwd`,
    `ftp://127.0.0.1:${port}/model.tar`,
    `gopher://127.0.0.1:${port}/_GET%20/`,
    `dict://127.0.0.1:${port}/info`,
    `ws://127.0.0.1:${port}/`,
    'data:application/octet-stream;base64,AAAA',
    'javascript:alert(1)',
    `//127.0.0.1:${port}/`, // no scheme at all
  ];
  const credentials = [
    // A public address: what refuses it is the credentials, not the address.
    'http://user:password@93.184.215.14/model.tar',
    'https://token@93.184.215.14/model.tar',
    `http://user:password@127.0.0.1:${port}/`,
  ];
  const oddPorts = [
    `http://127.0.0.1:${portOf(process.env.DATABASE_URL!)}/`, // this installation's PostgreSQL
    `http://127.0.0.1:${portOf(p.config.temporal.address)}/`, // its Temporal
    `http://127.0.0.1:${new URL(p.baseUrl).port}/v1/system/status`, // its own API
    `http://localhost:22/`,
    'http://169.254.169.254:8080/',
    `http://[::1]:${port}/`,
  ];
  return [...loopback, ...privateRanges, ...own, ...names, ...otherSchemes, ...credentials, ...oddPorts];
}

describe('SSRF: URLs the platform fetches for a tenant', () => {
  let urls: string[];

  before(async () => {
    urls = await attackerUrls();
    // The name form only means something where the host name resolves to a private address.
    const resolved = await lookup(hostname(), { all: true });
    assert.ok(
      resolved.every((a) => ipaddr.process(a.address).range() !== 'unicast'),
      `${hostname()} resolves to ${JSON.stringify(resolved)}`,
    );
  });

  test('the listener counts what reaches it (the test can see a fetch)', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(await res.text(), 'ok');
    assert.equal(reached.length, 1);
    reached.length = 0;
  });

  test('a model upload from a URL: every form is a 400 naming remoteUrl, and no upload exists', async () => {
    const v2 = (method: string, path: string, json?: unknown) =>
      call(p.baseUrl, method, `/v2/projects/${t.projectId}${path}`, { key: t.key, json });
    const model = await v2('POST', '/models', {
      baseModelId: 'gantry/reference-byte-tiny',
      name: 'ssrf',
      type: 'model',
    });
    assert.equal(model.status, 200, JSON.stringify(model.body));
    for (const remoteUrl of urls) {
      const res = await v2('POST', '/models/uploads', { modelId: model.body.id, remoteUrl, token: 'hf_attacker' });
      assert.equal(res.status, 400, `${remoteUrl}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, 'remoteUrl', remoteUrl);
      assert.match(res.body.error.message, REFUSED, remoteUrl);
    }
    // Refused before anything was started: no upload, so no job that could fetch later.
    const uploads = await v2('GET', '/models/uploads');
    assert.equal(uploads.status, 200);
    assert.deepEqual(uploads.body.data, []);
    assert.deepEqual(reached, [], 'no connection reached this machine');
  });

  for (const route of ['transcriptions', 'translations'] as const) {
    test(`audio by URL (${route}): every form is a 400 naming file once its job has failed`, async () => {
      const jobs: string[] = [];
      for (const url of urls) {
        const form = new FormData();
        form.append('model', route === 'translations' ? 'openai/whisper-base' : 'openai/whisper-tiny.en');
        form.append('file', url);
        const res = await call(p.baseUrl, 'POST', `/v1/audio/${route}`, { key: t.key, body: form });
        assert.equal(res.status, 400, `${url}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.param, 'file', url);
        const job = res.headers.get('x-gantry-audio-request');
        if (job) {
          // The job ran and refused the URL itself.
          assert.equal(res.body.error.code, 'audio_url_unreachable', url);
          assert.match(res.body.error.message, REFUSED, url);
          jobs.push(job);
        } else {
          assert.match(res.body.error.message, /public http\(s\) URL/, url);
        }
      }
      assert.ok(jobs.length > urls.length / 2, `${jobs.length} of ${urls.length} URLs reached a job`);
      // Every job that was started has ended, failed: nothing is left that could still fetch.
      for (const job of jobs) {
        const run = await p.temporal.workflow.getHandle(`audio/${job}`).describe();
        assert.equal(run.status.name, 'FAILED', job);
      }
      assert.deepEqual(reached, [], 'no connection reached this machine');
    });
  }
});
