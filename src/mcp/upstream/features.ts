import type { Client } from '@modelcontextprotocol/client';
import { UriTemplate } from '@modelcontextprotocol/sdk/shared/uriTemplate.js';
import type { Prompt, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';

/**
 * What an upstream offers besides tools: resources, resource templates and prompts, as it last listed them (under its
 * own names), and whether it takes resource subscriptions.
 */
export interface UpstreamFeatures {
  resources: Resource[];
  templates: ResourceTemplate[];
  prompts: Prompt[];
  subscribe: boolean;
}

export const NO_FEATURES: UpstreamFeatures = { resources: [], templates: [], prompts: [], subscribe: false };

/** Guards against an upstream whose cursors never end; also bounds what one server can make us hold. */
const MAX_PAGES = 100;
const MAX_ITEMS = 10_000;

/** Lists everything the server's capabilities announce; what it does not announce stays empty. */
export async function listFeatures(client: Client, timeoutMs: number): Promise<UpstreamFeatures> {
  const capabilities = client.getServerCapabilities() ?? {};
  // Past the v2 client's result cache: a re-list after list_changed must see the server's lists as they are now.
  const options = { timeout: timeoutMs, cacheMode: 'bypass' as const };
  const resources = capabilities.resources
    ? await allPages(async (cursor) => {
        const page = await client.listResources(cursor === undefined ? undefined : { cursor }, options);
        return { items: page.resources, nextCursor: page.nextCursor };
      })
    : [];
  const templates = capabilities.resources
    ? await allPages(async (cursor) => {
        const page = await client.listResourceTemplates(cursor === undefined ? undefined : { cursor }, options);
        return { items: page.resourceTemplates, nextCursor: page.nextCursor };
      })
    : [];
  const prompts = capabilities.prompts
    ? await allPages(async (cursor) => {
        const page = await client.listPrompts(cursor === undefined ? undefined : { cursor }, options);
        return { items: page.prompts, nextCursor: page.nextCursor };
      })
    : [];
  return { resources, templates, prompts, subscribe: capabilities.resources?.subscribe === true };
}

async function allPages<T>(fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string }>): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES && items.length < MAX_ITEMS; page++) {
    const result = await fetchPage(cursor);
    items.push(...result.items);
    if (!result.nextCursor || result.nextCursor === cursor) break;
    cursor = result.nextCursor;
  }
  return items.slice(0, MAX_ITEMS);
}

/**
 * Whether a resource URI is this server's: one it listed, or one its templates produce. URIs are not namespaced (a
 * resource link in a tool result must stay readable as it is); names are.
 */
export function servesUri(features: UpstreamFeatures, uri: string): boolean {
  if (features.resources.some((resource) => resource.uri === uri)) return true;
  return features.templates.some((template) => {
    try {
      return new UriTemplate(template.uriTemplate).match(uri) !== null;
    } catch {
      // An upstream's malformed template matches nothing.
      return false;
    }
  });
}
