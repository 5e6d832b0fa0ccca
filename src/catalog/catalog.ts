import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { canonicalText, searchableText, type SearchableText } from './text.js';
import type { CatalogTool, Tool } from './types.js';
import type { SchemaLimits } from './schema-limits.js';
import { inSlices, mergeSorted, sortInSlices } from './slices.js';
import { SOURCE_NAME_PATTERN, validateTools, validateToolsInSlices } from './validate.js';
import { ToolrouterError } from '../errors.js';

/** A catalog tool with its derived text, computed once when the tool enters the catalog. */
export interface CatalogEntry extends CatalogTool {
  /** What search sees; the embedder's text is derived from it at index time (`embeddingText`), not kept here. */
  text: SearchableText;
  /** SHA-256 of the canonical searchable text: the unit the catalog hash is made of. */
  textHash: string;
}

/** Longest source description kept (characters); an upstream's longer `instructions` are cut to it. */
export const MAX_SOURCE_DESCRIPTION = 2_000;

/** What a source says of itself, cut to the bound and with whitespace runs folded. */
export function foldDescription(text: string | undefined): string | undefined {
  const folded = text?.replace(/\s+/g, ' ').trim();
  return folded ? folded.slice(0, MAX_SOURCE_DESCRIPTION) : undefined;
}

/** A source as the catalog lists it: what it says of itself and how many tools it has. */
export interface SourceSummary {
  source: string;
  server?: string;
  description?: string;
  tools: number;
}

/** An immutable view of the catalog at one moment: what an index is built from. */
export interface CatalogSnapshot {
  catalogHash: string;
  entries: readonly CatalogEntry[];
}

export class CatalogConflictError extends ToolrouterError {
  override readonly name = 'CatalogConflictError';
  constructor(message: string) {
    super('conflict', message);
  }
}

export class CatalogSourceError extends ToolrouterError {
  override readonly name = 'CatalogSourceError';
  constructor(message: string) {
    super('invalid_request', message);
  }
}

export interface CatalogOptions {
  /** Separator between server and tool in qualified names; used to index the server part on its own. */
  separator?: string;
  /** Bounds on tool schemas (limits.*); null for trusted snapshots. Default: DEFAULT_SCHEMA_LIMITS. */
  limits?: SchemaLimits | null;
}

export interface CatalogEvents {
  change: [CatalogSnapshot];
}

/**
 * Every tool from every source, by qualified name. Sources replace their tools as a whole, so a source is always
 * consistent with itself; a name may belong to one source only.
 */
export class Catalog extends EventEmitter<CatalogEvents> {
  /** Per source: its entries and their text hashes sorted (what the catalog hash is made of, merged across sources). */
  private readonly sources = new Map<string, { server?: string; description?: string; entries: CatalogEntry[]; hashes: string[] }>();
  private readonly byName = new Map<string, CatalogEntry>();
  private current: CatalogSnapshot | undefined;
  private readonly separator: string;
  private readonly limits: SchemaLimits | null | undefined;
  /** Source names owned by something other than the REST API (upstream MCP servers), with who owns them. */
  private readonly reserved = new Map<string, string>();

  constructor(options: CatalogOptions = {}) {
    super();
    this.separator = options.separator ?? '__';
    this.limits = options.limits;
  }

  /**
   * Validates tools for a source and checks their names against other sources, changing nothing: what `setSource`
   * would accept, so a caller can store them elsewhere first.
   */
  check(source: string, input: unknown): Tool[] {
    checkSourceName(source);
    const tools = validateTools(input, this.limits);
    this.checkClashes(source, tools);
    return tools;
  }

  /** `check` with the event loop handed back every few milliseconds: for catalogs from requests, which may be huge. */
  async checkInSlices(source: string, input: unknown): Promise<Tool[]> {
    checkSourceName(source);
    const tools = await validateToolsInSlices(input, this.limits);
    this.checkClashes(source, tools);
    return tools;
  }

  /**
   * Replaces all tools of one source. Validates first and changes nothing on error.
   * @param server the upstream MCP server the tools came from, if any (indexed as its own field).
   * @param description what the source says of itself (indexed on each of its tools as the `context` field).
   */
  setSource(source: string, input: unknown, server?: string, description?: string): CatalogSnapshot {
    const tools = this.check(source, input);
    const about = foldDescription(description);
    const entries = tools.map((tool) => this.toEntry(tool, source, server, about));
    return this.replace(source, server, about, entries, entries.map((entry) => entry.textHash).sort());
  }

  /**
   * `setSource` for a request's catalog: validation and each tool's searchable text (seconds at 100,000 tools) are
   * done in slices with other requests served in between, and the source is replaced in one step at the end, with the
   * name clashes checked again then (another source may have taken a name meanwhile).
   * @param validated the tools are what `checkInSlices` returned (already validated, so not again).
   */
  async setSourceInSlices(
    source: string,
    input: unknown,
    options: { server?: string; description?: string; validated?: boolean } = {},
  ): Promise<CatalogSnapshot> {
    const { server, validated = false } = options;
    const about = foldDescription(options.description);
    checkSourceName(source);
    let tools: Tool[];
    if (validated) tools = input as Tool[];
    else tools = await validateToolsInSlices(input, this.limits);
    const entries: CatalogEntry[] = new Array<CatalogEntry>(tools.length);
    await inSlices(tools.length, (i) => (entries[i] = this.toEntry(tools[i]!, source, server, about)));
    const hashes = await sortInSlices(entries.map((entry) => entry.textHash));
    this.checkClashes(source, tools);
    return this.replace(source, server, about, entries, hashes);
  }

  private checkClashes(source: string, tools: readonly Tool[]): void {
    // Only the clashes are collected: an object per tool was 100,000 of them for a large PUT, nearly always for none.
    const listed: string[] = [];
    for (const tool of tools) {
      const owner = this.byName.get(tool.name)?.source;
      if (owner !== undefined && owner !== source && listed.length < 10) listed.push(`"${tool.name}" (source "${owner}")`);
    }
    if (listed.length > 0) throw new CatalogConflictError(`tool names already belong to another source: ${listed.join(', ')}`);
  }

  /** @param hashes the entries' text hashes, sorted. */
  private replace(source: string, server: string | undefined, description: string | undefined, entries: CatalogEntry[], hashes: string[]): CatalogSnapshot {
    const previous = this.sources.get(source);
    for (const entry of previous?.entries ?? []) this.byName.delete(entry.tool.name);
    for (const entry of entries) this.byName.set(entry.tool.name, entry);
    this.sources.set(source, { server, ...(description === undefined ? {} : { description }), entries, hashes });
    return this.changed();
  }

  /** Removes a source; returns false when there was no such source. */
  removeSource(source: string): boolean {
    const previous = this.sources.get(source);
    if (!previous) return false;
    for (const entry of previous.entries) this.byName.delete(entry.tool.name);
    this.sources.delete(source);
    this.changed();
    return true;
  }

  /**
   * Marks a source name as owned by a component (an upstream MCP server), even while it has no tools, so the REST API
   * can refuse to overwrite or delete it. The owner itself still calls setSource/removeSource.
   */
  reserveSource(source: string, owner: string): void {
    if (!SOURCE_NAME_PATTERN.test(source)) {
      throw new CatalogSourceError(`source name "${source}" must be 1-64 characters of A-Z, a-z, 0-9, "_", "-" or "."`);
    }
    const holder = this.reserved.get(source);
    if (holder !== undefined && holder !== owner) throw new CatalogConflictError(`source "${source}" is already reserved by ${holder}`);
    if (holder === undefined && this.sources.has(source)) {
      throw new CatalogConflictError(`source "${source}" already exists as a static source; it cannot also be ${owner}`);
    }
    this.reserved.set(source, owner);
  }

  /** Gives a reserved name up (an upstream server removed at run time); its tools must already be gone. */
  releaseSource(source: string, owner: string): void {
    if (this.reserved.get(source) === owner) this.reserved.delete(source);
  }

  /** Who owns a reserved source name, or undefined for names free for static sources. */
  reservedBy(source: string): string | undefined {
    return this.reserved.get(source);
  }

  hasSource(source: string): boolean {
    return this.sources.has(source);
  }

  sourceNames(): string[] {
    return [...this.sources.keys()];
  }

  /** What a source says of itself, if it said anything. */
  sourceDescription(source: string): string | undefined {
    return this.sources.get(source)?.description;
  }

  /** Every source with its description and tool count, in catalog order. */
  sourceSummaries(): SourceSummary[] {
    return [...this.sources].map(([source, { server, description, entries }]) => ({
      source,
      ...(server === undefined ? {} : { server }),
      ...(description === undefined ? {} : { description }),
      tools: entries.length,
    }));
  }

  get(name: string): CatalogEntry | undefined {
    return this.byName.get(name);
  }

  get size(): number {
    return this.byName.size;
  }

  /** Entries in catalog order: sources in the order they were first added, tools in the order each source gave. */
  snapshot(): CatalogSnapshot {
    if (this.current === undefined) {
      const sources = [...this.sources.values()];
      // Each source's hashes are kept sorted, so the catalog's sorted list is a merge, not a sort of every tool's hash.
      const sorted = sources.map((source) => source.hashes).reduce<string[]>((all, hashes) => (all.length === 0 ? hashes : mergeSorted(all, hashes)), []);
      this.current = { catalogHash: hashOfSorted(sorted), entries: sources.flatMap((source) => source.entries) };
    }
    return this.current;
  }

  private changed(): CatalogSnapshot {
    const before = this.current?.catalogHash;
    this.current = undefined;
    const snapshot = this.snapshot();
    // Listeners (the index) care about searchable content; re-putting identical tools is not a change.
    if (snapshot.catalogHash !== before) this.emit('change', snapshot);
    return snapshot;
  }

  private toEntry(tool: Tool, source: string, server: string | undefined, description: string | undefined): CatalogEntry {
    const text = searchableText(tool, server, this.separator, description);
    return {
      tool,
      source,
      ...(server === undefined ? {} : { server }),
      text,
      textHash: sha256(canonicalText(tool.name, text)),
    };
  }
}

function checkSourceName(source: string): void {
  if (!SOURCE_NAME_PATTERN.test(source)) {
    throw new CatalogSourceError('source name must be 1-64 characters of A-Z, a-z, 0-9, "_", "-" or "."');
  }
}

/**
 * The catalog hash: SHA-256 over the sorted per-tool hashes of canonical searchable text. Sorting makes it
 * independent of source order; hashing the text (not only names) makes a changed description a new catalog.
 */
export function catalogHash(entries: readonly Pick<CatalogEntry, 'textHash'>[]): string {
  return hashOfSorted(entries.map((entry) => entry.textHash).sort());
}

/** The catalog hash of text hashes already sorted: one update over their concatenation (the same digest as one each). */
function hashOfSorted(sorted: readonly string[]): string {
  return createHash('sha256').update(sorted.join('')).digest('hex');
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
