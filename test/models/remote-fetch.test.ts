/**
 * The outbound fetch of user-given URLs (model uploads, audio by URL): only
 * public addresses however they are written, checked where the connection is
 * made (so a name cannot resolve one way for the check and another for the
 * connection), and a source token that does not follow a redirect to another
 * origin. Real sockets on this machine.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  RemoteFetchRefused,
  checkRemoteUrl,
  fetchRemote,
  isPublicAddress,
  remoteFetch,
} from '../../providers/remote/fetch-remote';

const publicOnly = { allowPrivateHosts: false, maxBytes: 1 << 30 };
const anyHost = { allowPrivateHosts: true, maxBytes: 1 << 30 };

describe('remote fetch: public addresses only', () => {
  let server: Server;
  let port: number;
  const seen: Array<{ host: string | undefined; url: string | undefined; headers: IncomingHttpHeaders }> = [];

  before(async () => {
    server = createServer((req, res) => {
      seen.push({ host: req.headers.host, url: req.url, headers: req.headers });
      // /hop/<host> redirects to the same port on <host>: another origin when the name differs.
      const hop = /^\/hop\/(.+)$/.exec(req.url ?? '');
      if (hop) {
        res.writeHead(302, { location: `http://${hop[1]}:${port}/landed` });
        return res.end();
      }
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  test('private, loopback and metadata addresses are refused in every spelling', async () => {
    for (const url of [
      'http://127.0.0.1/x',
      'http://10.1.2.3/x',
      'http://192.168.0.1/',
      'http://100.64.0.1/',
      'http://[::1]/',
      'http://169.254.169.254/latest',
      'http://localhost/x',
      'http://0177.0.0.1/', // octal, read as 127.0.0.1
      'http://2130706433/', // one number, read as 127.0.0.1
      'http://[::ffff:127.0.0.1]/', // IPv4-mapped IPv6, which the URL parser rewrites to ::ffff:7f00:1
      'http://[::ffff:169.254.169.254]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[64:ff9b::7f00:1]/', // NAT64 of 127.0.0.1
      'http://[::7f00:1]/', // IPv4-compatible IPv6 of 127.0.0.1 (deprecated, still routed by some stacks)
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'http://0.0.0.0/',
    ]) {
      await assert.rejects(checkRemoteUrl(url, publicOnly), /private address/, url);
    }
    assert.equal((await checkRemoteUrl('http://93.184.215.14/x.tar', publicOnly)).hostname, '93.184.215.14');
    assert.equal(isPublicAddress('2606:4700:4700::1111'), true);
    assert.equal(isPublicAddress('not an address'), false);
  });

  test('the connection itself is checked: a name that reaches a private address is refused there', async () => {
    // No check of the URL first: what protects a name that is public when checked and private when
    // connected to (DNS rebinding) is the lookup the connection makes.
    const before = seen.length;
    await assert.rejects(remoteFetch(new URL(`http://localhost:${port}/`), publicOnly), (err) => {
      assert.ok(err instanceof RemoteFetchRefused, String(err));
      assert.match(err.message, /private address \(127\.0\.0\.1\)/);
      return true;
    });
    assert.equal(seen.length, before, 'no request reached the server');
    // The same fetch where the installation allows private hosts reaches it.
    const res = await remoteFetch(new URL(`http://localhost:${port}/`), anyHost);
    assert.equal(await res.text(), 'ok');
  });

  test('a source token goes to its own origin only, not to a redirect elsewhere', async () => {
    const token = 'hf_secret-for-one-origin';
    const same = await fetchRemote(`http://127.0.0.1:${port}/hop/127.0.0.1`, anyHost, { token });
    same.body.resume();
    const landedSame = seen.at(-1)!;
    assert.equal(landedSame.url, '/landed');
    assert.equal(landedSame.headers.authorization, `Bearer ${token}`, 'the same origin gets it');

    const other = await fetchRemote(`http://127.0.0.1:${port}/hop/localhost`, anyHost, { token });
    other.body.resume();
    const landedOther = seen.at(-1)!;
    assert.equal(landedOther.host, `localhost:${port}`);
    assert.equal(landedOther.headers.authorization, undefined, 'another origin does not');
    assert.equal(seen.at(-2)!.headers.authorization, `Bearer ${token}`, 'the first hop had it');
  });
});
