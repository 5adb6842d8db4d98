/**
 * Whether a string is an OCI image reference, by the grammar of the
 * distribution project's `reference` package (what Podman and Docker parse
 * references with):
 *
 *   reference    := name [ ":" tag ] [ "@" digest ]
 *   name         := [ domain "/" ] path-component [ "/" path-component ]*   (255 characters at most)
 *   domain       := host [ ":" port ]   host := domain-name | "[" IPv6 "]"
 *   path-component := [a-z0-9]+ ( ( [._] | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag          := [\w][\w.-]{0,127}
 *   digest       := algorithm ":" [0-9a-fA-F]{32,}
 *
 * A deployment's image is a tenant's string that Gantry hands to `podman`:
 * one that starts with `-` would be read as an option (`--privileged`), and one
 * with a space or a comma is no image at all. The API refuses anything else
 * (400 naming `image`), and the runtime checks again before Podman sees it.
 *
 * Parsed piece by piece, each piece matched by an anchored pattern whose parts
 * cannot overlap, so the time taken grows with the length and no more.
 */

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_COMPONENT = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$/;
const IPV6_HOST = /^\[[a-fA-F0-9:]+\]$/;
const PORT = /^[0-9]+$/;
const TAG = /^\w[\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
const NAME_MAX = 255;

function isDomain(s: string): boolean {
  const port = /:([^:\]]*)$/.exec(s);
  const host = port && !s.endsWith(']') ? s.slice(0, port.index) : s;
  if (port && !s.endsWith(']') && !PORT.test(port[1])) return false;
  return IPV6_HOST.test(host) || host.split('.').every((c) => DOMAIN_COMPONENT.test(c));
}

/** Why `ref` is not an image reference, or undefined when it is one. */
export function imageReferenceProblem(ref: string): string | undefined {
  let name = ref;
  const at = name.indexOf('@');
  if (at >= 0) {
    if (!DIGEST.test(name.slice(at + 1))) return 'its digest (after @) is not algorithm:hex';
    name = name.slice(0, at);
  }
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/') && !name.endsWith(']')) {
    if (!TAG.test(name.slice(colon + 1))) return 'its tag is not letters, digits, _ . - (128 at most)';
    name = name.slice(0, colon);
  }
  if (!name) return 'it names no repository';
  if (name.length > NAME_MAX) return `its name is longer than ${NAME_MAX} characters`;
  const parts = name.split('/');
  const pathFrom = parts.length > 1 && isDomain(parts[0]) ? 1 : 0;
  if (!parts.slice(pathFrom).every((p) => PATH_COMPONENT.test(p)))
    return 'its repository path is not lowercase letters and digits separated by / . _ or -';
  return undefined;
}
