/**
 * Where a model server image has the reference model server: the Gantry image's paths
 * (Dockerfile), which scripts/build-model-server-image.ts's image keeps, so either can be
 * GANTRY_MODEL_SERVER_IMAGE.
 */
export const MODEL_SERVER_PYTHON = '/app/.venv/bin/python';
export const MODEL_SERVER_PYTHONPATH = '/app/trainers/reference';

/** Where the PyTorch model server's image (scripts/build-model-server-image.ts) has it. */
export const TORCH_MODEL_SERVER_PYTHON = '/app/.venv-torch/bin/python';
export const TORCH_MODEL_SERVER_PYTHONPATH = '/app/trainers/torch';

/**
 * The images the operator names for the platform itself (the model servers'): any project's
 * endpoint may run them (shared/image-references.ts).
 */
export function platformImages(c: { modelServerImage?: string; torchModelServerImage?: string }): string[] {
  return [c.modelServerImage, c.torchModelServerImage].filter((i): i is string => !!i);
}
