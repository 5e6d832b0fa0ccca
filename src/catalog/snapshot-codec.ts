import { Catalog, type CatalogSnapshot } from './catalog.js';
import type { Tool } from './types.js';

interface EncodedSnapshot {
  catalogHash: string;
  separator: string;
  sources: { source: string; server?: string; description?: string; tools: Tool[] }[];
}

/** A snapshot as JSON, for a worker in another process to index exactly what the API saw. */
export function encodeSnapshot(snapshot: CatalogSnapshot, separator: string): string {
  const sources: EncodedSnapshot['sources'] = [];
  for (const entry of snapshot.entries) {
    let last = sources.at(-1);
    if (last?.source !== entry.source) {
      const description = entry.text.context === '' ? undefined : entry.text.context;
      last = {
        source: entry.source,
        ...(entry.server === undefined ? {} : { server: entry.server }),
        ...(description === undefined ? {} : { description }),
        tools: [],
      };
      sources.push(last);
    }
    last.tools.push(entry.tool);
  }
  return JSON.stringify({ catalogHash: snapshot.catalogHash, separator, sources } satisfies EncodedSnapshot);
}

/** Rebuilds the snapshot and checks it hashes to what the encoder saw, so a worker never indexes a different catalog. */
export function decodeSnapshot(json: string): CatalogSnapshot {
  const encoded = JSON.parse(json) as EncodedSnapshot;
  // Validated (with its limits) by the instance that stored it: limits here could only disagree with those.
  const catalog = new Catalog({ separator: encoded.separator, limits: null });
  for (const { source, server, description, tools } of encoded.sources) catalog.setSource(source, tools, server, description);
  const snapshot = catalog.snapshot();
  if (snapshot.catalogHash !== encoded.catalogHash) {
    throw new Error(`catalog snapshot hashes to ${snapshot.catalogHash}, expected ${encoded.catalogHash}`);
  }
  return snapshot;
}
