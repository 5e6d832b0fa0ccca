/**
 * The index worker process (`npm run worker`, the same as `toolrouter worker`): consumes index builds from the BullMQ
 * queue in Redis. Run as many as you like; each job is built by one of them.
 */
import { loadConfig } from '../src/config/config.js';
import { startIndexWorker } from '../src/index/redis/worker.js';
import { createLogger } from '../src/log.js';

const config = loadConfig();
const log = createLogger(config.logLevel);
try {
  const worker = await startIndexWorker(config, log);
  const stop = (signal: string) => {
    log.info({ signal }, 'index worker stopping after the current job');
    void worker.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (error) {
  log.fatal({ err: error }, 'index worker could not start');
  process.exit(1);
}
