/**
 * `toolrouter config schema`: the configuration's JSON Schema, or (`--format markdown`) the reference page
 * docs/configuration.md is written from (`npm run docs:config`).
 */
import { configJsonSchema } from '../config/json-schema.js';
import { configReference } from '../config/reference.js';

/** Where each section's purpose is explained, relative to docs/ (the reference page sits there). */
const SECTIONS: Record<string, { title: string; link: string }> = {
  redis: { title: 'Deployment: Redis in production', link: 'deployment.md#redis-in-production' },
  auth: { title: 'Security: signing in with OAuth', link: 'security.md#signing-in-with-oauth' },
  keys: { title: 'Security: virtual keys', link: 'security.md#virtual-keys' },
  security: { title: 'Security', link: 'security.md' },
  queue: { title: 'Deployment: the shared index pipeline', link: 'deployment.md#the-shared-index-pipeline-redis-and-workers' },
  ready: { title: 'Metrics: health and readiness', link: 'metrics.md#health-and-readiness' },
  worker: { title: 'Deployment', link: 'deployment.md' },
  limits: { title: 'Security: limits', link: 'security.md#limits' },
  catalog: { title: 'Search: the catalog', link: 'search.md#the-catalog' },
  embedding: { title: 'Embedding models', link: 'models.md' },
  search: { title: 'Search and tuning', link: 'search.md' },
  feedback: { title: 'Learning from usage', link: 'learning.md' },
  chat: { title: 'Chat proxies', link: 'chat-proxies.md' },
  mcp: { title: 'The MCP gateway', link: 'gateway.md' },
  analytics: { title: 'Analytics', link: 'analytics.md' },
};

const INTRO = `Every setting toolrouter accepts, as its schema says: type, default and accepted values. The file, the
environment variables that override it and \`toolrouter config check\` are described in
[The configuration file](config-file.md); what each section is for, on the page linked under its heading.
\`toolrouter config schema\` prints the same schema as JSON Schema (draft 2020-12), committed as
[config.schema.json](config.schema.json) for editors.`;

/** The text `config schema` prints: the JSON Schema, or the reference page (docs/configuration.md). */
export function configSchemaText(format: 'json' | 'markdown'): string {
  const schema = configJsonSchema();
  return format === 'markdown' ? configReference(schema, { sections: SECTIONS, intro: INTRO }) : `${JSON.stringify(schema, null, 2)}\n`;
}

export function configSchemaCommand(options: { format: 'json' | 'markdown' }): void {
  process.stdout.write(configSchemaText(options.format));
}
