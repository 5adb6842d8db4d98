/**
 * Composition of the HTTP API: request logging, authentication, body parsing,
 * the /v1 and /v2 routers, the OpenAPI document, and errors in the spec's shape.
 */
import express, { type Request, type Response } from 'express';
import swaggerUi from 'swagger-ui-express';
import type { ApiDeps } from './deps';
import { badRequest } from './errors';
import { authenticate, principalLookup } from './middleware/auth';
import { errorHandler, routeNotFound } from './middleware/errors';
import { requestLogging } from './middleware/request-context';
import { compileTrustProxy, rateLimits } from './middleware/rate-limit';
import { collapseVersionPrefix } from './middleware/version-prefix';
import { createHttpMetrics } from './metrics';
import { ServedSpeechModels } from './speech-models';
import { createRegistry, generateDocument } from './openapi/document';
import { ApiRouter, type RegisteredRoute } from './route';
import { addAccountRoutes, addTypedWhoamiRoute } from './routes/account';
import { addApiKeyRoutes } from './routes/api-keys';
import { addBillingAdminRoutes, addBillingUsageRoute } from './routes/billing';
import { addOrganizationMemberRoutes } from './routes/organization-members';
import { addProjectRoutes } from './routes/projects';
import { addClusterRemediationRoutes } from './routes/cluster-remediations';
import { addClusterStorageRoutes } from './routes/cluster-storage';
import { addClusterRoutes } from './routes/clusters';
import { addFleetRoutes } from './routes/fleet';
import { addQueueRoutes } from './routes/queue';
import { addBatchRoutes } from './routes/batches';
import { addEvaluationRoutes } from './routes/evaluations';
import { addDeploymentRoutes } from './routes/deployments';
import { addDeploymentVolumeRoutes } from './routes/deployment-volumes';
import { addStorageRoutes } from './routes/storage';
import { addRegistryModelRoutes } from './routes/models';
import { addModelUploadRoutes } from './routes/model-uploads';
import { addSupportedModelRoutes } from './routes/supported-models';
import { addEndpointRoutes, addRetiredEndpointRoutes } from './routes/endpoints';
import { addEndpointAdapterRoutes } from './routes/endpoint-adapters';
import { addEndpointAnalyticsRoutes } from './routes/endpoint-analytics';
import { addEndpointExperimentRoutes } from './routes/endpoint-experiments';
import { addRolloutRoutes } from './routes/rollouts';
import { addEndpointFaultRoutes } from './routes/endpoint-faults';
import { addModelConfigRoutes } from './routes/model-configs';
import { addAudioRoutes } from './routes/audio';
import { addModelCatalogRoutes } from './routes/model-catalog';
import { addModelFileTransferRoutes } from './routes/model-file-transfers';
import { addMultipartRoutes } from './routes/file-multipart';
import { addFileRoutes } from './routes/files';
import { addFineTuneDownloadRoutes } from './routes/fine-tune-downloads';
import { addFineTuneEstimateRoute } from './routes/fine-tune-estimate';
import { addFineTunePreviewRoute } from './routes/fine-tune-preview';
import { addFineTuneRoutes } from './routes/fine-tunes';
import { addSystemRoutes } from './routes/system';

/** Every route the API registered (for the check that the OpenAPI document lists them all). */
export function registeredRoutes(app: express.Express): RegisteredRoute[] {
  return app.locals.routes as RegisteredRoute[];
}

/** What the API's routers answer (method and documented path), read from Express's own route tables. */
export function dispatchedRoutes(app: express.Express): Array<{ method: string; path: string }> {
  return (app.locals.routers as ApiRouter[]).flatMap((r) => r.dispatched());
}

export function createApp(deps: ApiDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Behind a reverse proxy, the per-address rate limit needs the client's address, not the proxy's.
  if (deps.config.trustProxy) app.set('trust proxy', compileTrustProxy(deps.config.trustProxy));
  app.use(collapseVersionPrefix);
  app.use((deps.metrics ?? createHttpMetrics('api')).middleware);
  app.use(requestLogging(deps.logger));

  const registry = createRegistry();
  const v1 = new ApiRouter(registry, '/v1', deps.config.checkResponses);
  const v2 = new ApiRouter(registry, '/v2', deps.config.checkResponses);
  const v3 = new ApiRouter(registry, '/v3', deps.config.checkResponses);
  const unversioned = new ApiRouter(registry, '', deps.config.checkResponses);

  addAccountRoutes(v1);
  addAccountRoutes(unversioned, 'Unversioned'); // the spec names GET /whoami without a prefix
  addTypedWhoamiRoute(v3); // the Python CLI's identity call
  addProjectRoutes(v1, deps);
  addOrganizationMemberRoutes(v1, deps);
  addApiKeyRoutes(v1, deps);
  addBillingUsageRoute(v1, deps);
  addBillingUsageRoute(unversioned, deps, 'Unversioned'); // the spec names GET /billing/usage without a prefix
  addBillingAdminRoutes(v1, deps);
  addSystemRoutes(v1, deps);
  addMultipartRoutes(v1, deps); // before addFileRoutes: /files/multipart/... must not match /files/:id
  addFileRoutes(v1, deps);
  addFineTuneDownloadRoutes(v1, deps); // before addFineTuneRoutes' /fine-tunes/:id
  addFineTunePreviewRoute(v1, deps);
  addFineTuneEstimateRoute(v1, deps);
  addFineTuneRoutes(v1, deps);
  addClusterStorageRoutes(v1, deps); // before addClusterRoutes: /compute/clusters/storage/... is not a cluster id
  addClusterRoutes(v1, deps);
  addClusterRemediationRoutes(v1, deps);
  addFleetRoutes(v1, deps);
  addQueueRoutes(v1, deps);
  addDeploymentVolumeRoutes(v1, deps);
  addStorageRoutes(v1, deps);
  addDeploymentRoutes(v1, deps);
  const speechModels = deps.speechModels ?? new ServedSpeechModels(deps.db);
  addAudioRoutes(v1, deps, speechModels);
  addModelCatalogRoutes(v1, deps, speechModels);
  addModelUploadRoutes(v2, deps); // before the models: /models/uploads is not a model id
  addModelFileTransferRoutes(v2, v1, deps); // before the models: /models/upload/... and /models/download neither
  addRegistryModelRoutes(v2, deps);
  addSupportedModelRoutes(v2, deps);
  addModelConfigRoutes(v2, v1, deps);
  addEndpointAdapterRoutes(v2, deps);
  addEndpointExperimentRoutes(v2, deps);
  addEndpointAnalyticsRoutes(v2, deps);
  addRolloutRoutes(v2, deps);
  addEndpointRoutes(v2, deps);
  addRetiredEndpointRoutes(v1);
  addEndpointFaultRoutes(v1, deps);
  addBatchRoutes(v1, deps);
  addEvaluationRoutes(v1, deps);
  app.locals.routes = [v1, v2, v3, unversioned].flatMap((r) => r.routes);
  app.locals.routers = [v1, v2, v3, unversioned];

  // Public by design: liveness for orchestrators, and the API's own description.
  // Neither says anything about any project.
  app.get('/healthz', (_req: Request, res: Response) => {
    res.json({ status: 'ok' });
  });
  // Generated on first use: every route, including the ones added below, is registered by then.
  let document: ReturnType<typeof generateDocument> | undefined;
  const openapi = () => (document ??= generateDocument(registry));
  app.get('/v1/openapi.json', (_req: Request, res: Response) => {
    res.json(openapi());
  });
  app.use('/v1/docs', swaggerUi.serve, (req: Request, res: Response, next: express.NextFunction) =>
    swaggerUi.setup(openapi(), { customSiteTitle: 'Gantry API' })(req, res, next),
  );

  // Every request from here on passes the per-address limit first, pre-signed URLs included: a URL
  // that is its own credential is no way around the limits.
  const limits = rateLimits(deps.config);
  app.use(limits.beforeAuth);

  // Pre-signed URLs carry their own credential (an HMAC signature), not an API key.
  app.use('/v1', v1.signedRouter);

  // Everything else authenticates first, then parses bodies (no parsing for strangers).
  const json = express.json({ limit: deps.config.jsonBodyLimit, type: ['application/json', 'application/*+json'] });
  const form = express.urlencoded({ extended: false, limit: '64kb' });
  app.use(authenticate(principalLookup(deps)), limits.afterAuth, json, form);

  // The spec: "GET /compute/clusters/regions is not a route and returns HTTP 400".
  app.all('/v1/compute/clusters/regions', () => {
    throw badRequest(
      "'/compute/clusters/regions' is not a route. Regions are listed at GET /v1/compute/regions.",
      null,
      'invalid_route',
    );
  });

  app.use('/v1', v1.router);
  app.use('/v2', v2.router);
  app.use('/v3', v3.router);
  // The official SDK sends its v2 calls (beta.models, beta.endpoints) to the client's one baseURL
  // when it is set: a client configured with `<gantry>/v1` reaches them here.
  app.use('/v1', v2.router);
  app.use(unversioned.router);

  app.use(routeNotFound);
  app.use(errorHandler);
  return app;
}
