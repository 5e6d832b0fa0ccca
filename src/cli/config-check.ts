/** `toolrouter config check`: the effective configuration, secrets masked, with every problem and unknown key. */
import { formatConfig, inspectConfig, maskSecrets } from '../config/check.js';
import { describeRedis } from '../redis/connection.js';
import { source, type StartOptions } from './startup.js';

export function configCheck(options: StartOptions & { format: 'yaml' | 'json' }): void {
  const { config, problems, leftOut } = inspectConfig();
  if (!config || problems.length > 0) {
    console.error(`toolrouter: configuration is invalid${source()}, ${problems.length} problem(s):`);
    for (const problem of problems) console.error(`  - ${problem}`);
    process.exitCode = 2;
    return;
  }
  // What serve would start without: said, but not a failure (serve starts, and lists them in GET /v1/mcp/servers).
  for (const entry of leftOut) console.error(`toolrouter: left out: ${entry.file}: server "${entry.server}": ${entry.reason}`);
  // Which of Redis's forms is in use, in words (the `redis` section below has the details, secrets masked).
  const redis = options.format === 'yaml' ? `# redis: ${describeRedis(config.redis)}\n` : '';
  process.stdout.write(redis + formatConfig(maskSecrets(config), options.format));
}
