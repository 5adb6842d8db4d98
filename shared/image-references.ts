/**
 * Deployment images, and which a project may run.
 *
 * A reference is read as Docker reads it (the grammar of github.com/distribution/reference, with
 * its normalization): `[registry/]repository[:tag][@digest]`, where the first component is the
 * registry only if it has a `.` or a `:`, is `localhost`, or has a capital letter; otherwise the
 * registry is Docker Hub (`docker.io`, and `library/` before a one-component repository). An image
 * id (64 hexadecimal digits) is not a reference.
 *
 * What a project may run (podman-runtime.ts pulls accordingly at every launch):
 * - `own`: its own path of the installation's registry, `<GANTRY_IMAGE_REGISTRY>/<project slug>/…`,
 *   pulled with the container host's credentials;
 * - `public`: an image anywhere else, pulled with no credentials at all, so only what its
 *   registry gives anyone;
 * - `platform`: an image the operator names for the platform itself (the model server's,
 *   GANTRY_MODEL_SERVER_IMAGE), the one exception: run from the host's copy when it has one, else
 *   pulled with the host's credentials; any project may run it;
 * - `foreign`: anything else of the installation's registry (another project's path, or outside
 *   every project's): never.
 */

const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const REGISTRY = new RegExp(`^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?$`);
const REMAINDER = new RegExp(
  `^(${PATH_COMPONENT}(?:/${PATH_COMPONENT})*)(?::([\\w][\\w.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`,
);
/** The distribution project's bound on `registry/repository`. */
const NAME_MAX = 255;
const DOCKER_HUB = 'docker.io';

export interface ImageReference {
  /** host[:port], lowercase (`docker.io` for Docker Hub). */
  registry: string;
  /** path/name, with `library/` for Docker Hub's one-component names. */
  repository: string;
  tag?: string;
  digest?: string;
}

/** The reference `image` is, normalized as Docker normalizes it; undefined when it is none. */
export function parseImageReference(image: string): ImageReference | undefined {
  if (/^[a-f0-9]{64}$/.test(image)) return undefined; // an image id
  const slash = image.indexOf('/');
  const first = slash === -1 ? '' : image.slice(0, slash);
  const named = slash !== -1 && (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase());
  if (named && !REGISTRY.test(first)) return undefined;
  const m = REMAINDER.exec(named ? image.slice(slash + 1) : image);
  if (!m) return undefined;
  let registry = named ? first.toLowerCase() : DOCKER_HUB;
  if (registry === 'index.docker.io') registry = DOCKER_HUB;
  const repository = registry === DOCKER_HUB && !m[1].includes('/') ? `library/${m[1]}` : m[1];
  if (registry.length + 1 + repository.length > NAME_MAX) return undefined;
  return { registry, repository, ...(m[2] ? { tag: m[2] } : {}), ...(m[3] ? { digest: m[3] } : {}) };
}

/** The reference in full: `registry/repository[:tag][@digest]`. */
export function formatImageReference(r: ImageReference): string {
  return `${r.registry}/${r.repository}${r.tag ? `:${r.tag}` : ''}${r.digest ? `@${r.digest}` : ''}`;
}

/** Where a project's images go in the installation's registry (GET /v1/image-repositories/base-path). */
export function projectImagePath(installationRegistry: string, projectSlug: string): string {
  return `${installationRegistry}/${projectSlug}`;
}

/** A registry path (`host[/path]`) as a registry and a repository prefix (`''`, or ending in `/`). */
function pathPrefix(path: string): { registry: string; prefix: string } | undefined {
  const r = parseImageReference(`${path}/x`);
  return r && { registry: r.registry, prefix: r.repository.slice(0, -1) };
}

export type ImageAccess =
  { kind: 'platform' } | { kind: 'own' | 'public'; reference: string } | { kind: 'foreign' | 'invalid'; why: string };

/** Whether, and how, a project may run `image` (the file's comment says what each answer means). */
export function imageAccess(
  image: string,
  o: {
    /** GANTRY_IMAGE_REGISTRY (host[/path]), if the installation has a registry. */
    installationRegistry?: string;
    /** The project's slug; undefined: no path of the installation's registry is its own. */
    projectSlug?: string;
    /** Images the operator names for the platform itself (GANTRY_MODEL_SERVER_IMAGE). */
    platformImages: readonly string[];
  },
): ImageAccess {
  if (o.platformImages.includes(image)) return { kind: 'platform' };
  const ref = parseImageReference(image);
  if (!ref) return { kind: 'invalid', why: 'it is not an image reference ([registry/]repository[:tag][@digest])' };
  const reference = formatImageReference(ref);
  const installation = o.installationRegistry ? pathPrefix(o.installationRegistry) : undefined;
  if (!installation || ref.registry !== installation.registry || !ref.repository.startsWith(installation.prefix))
    return { kind: 'public', reference };
  const own = o.projectSlug ? pathPrefix(projectImagePath(o.installationRegistry!, o.projectSlug)) : undefined;
  if (own && ref.repository.startsWith(own.prefix)) return { kind: 'own', reference };
  return {
    kind: 'foreign',
    why: `it is in this installation's registry outside this project's path${
      own ? ` (${projectImagePath(o.installationRegistry!, o.projectSlug!)}/)` : ''
    }`,
  };
}
