// An OCI hook (podman-engine.ts writes its configuration; container-storage.ts says why): before a
// replica's process starts, limits its container's writable layer to the bytes its annotation
// names. Runc runs it as root on the host, with the container's state on standard input.
//
// The layer is the container's own btrfs subvolume in Gantry's container storage; the limit is a
// btrfs quota on its exclusive bytes (what the container wrote, not the image it shares with
// others), so a write past it fails inside the container with EDQUOT. Any failure here fails the
// container's start: a replica never runs without its limit.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const ANNOTATION = 'gantry.writable-layer-bytes';

const state = JSON.parse(readFileSync(0, 'utf8'));
const bytes = state.annotations?.[ANNOTATION] ?? '';
if (!/^[1-9][0-9]{0,18}$/.test(bytes)) {
  console.error(`${ANNOTATION} is not a number of bytes: ${JSON.stringify(bytes)}`);
  process.exit(1);
}
const config = JSON.parse(readFileSync(path.join(state.bundle, 'config.json'), 'utf8'));
const layer = path.resolve(state.bundle, config.root.path);
execFileSync('btrfs', ['qgroup', 'limit', '-e', bytes, layer], {
  env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
