import { ADMIN_KEY } from './keys.js';
import { WorkerProcess, writeConfig } from './processes.js';
import { startRouter, type RunningRouter } from './router.js';

/** toolrouter as production runs it beside one Redis (single, Cluster or Sentinel): API instances and a worker process. */
export interface Deployment {
  /** The instances started so far, first the initial ones, then those `start` added. */
  apis: RunningRouter[];
  /** The first instance. */
  api: RunningRouter;
  worker: WorkerProcess;
  /** One more API instance on the same settings. */
  start(): Promise<RunningRouter>;
  /** Closes every instance, then signals the worker (SIGKILL unless `stopWorker` says otherwise). */
  close(): Promise<void>;
}

export interface DeploymentOptions {
  /** API instances to start at once (default 1). */
  apis?: number;
  /** How the worker is ended on close: SIGTERM lets it stop gracefully; SIGKILL when it may already be gone or stuck. */
  stopWorker?: NodeJS.Signals;
}

/** An admin-keyed deployment on `redis` (toolrouter's `redis` settings) under queue prefix `prefix`, ready to use. */
export async function deploy(redis: Record<string, unknown>, prefix: string, options: DeploymentOptions = {}): Promise<Deployment> {
  const settings = { adminKey: ADMIN_KEY, redis, queue: { prefix, attempts: 3, backoffMs: 100 } };
  const worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
  await worker.ready();
  const apis: RunningRouter[] = [];
  const start = async () => {
    const api = await startRouter(settings);
    apis.push(api);
    return api;
  };
  for (let i = 0; i < (options.apis ?? 1); i++) await start();
  return {
    apis,
    api: apis[0]!,
    worker,
    start,
    close: async () => {
      for (const api of apis) await api.close().catch(() => {});
      await worker.kill(options.stopWorker ?? 'SIGKILL');
    },
  };
}
