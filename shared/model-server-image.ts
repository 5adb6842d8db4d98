/**
 * Where a model server image has the reference model server: the Gantry image's paths
 * (Dockerfile), which scripts/build-model-server-image.ts's image keeps, so either can be
 * GANTRY_MODEL_SERVER_IMAGE.
 */
export const MODEL_SERVER_PYTHON = '/app/.venv/bin/python';
export const MODEL_SERVER_PYTHONPATH = '/app/trainers/reference';
