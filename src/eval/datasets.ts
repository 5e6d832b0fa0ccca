/**
 * Loaders for labelled evaluation data: the MetaTool and LiveMCPBench datasets kept beside the repository (never
 * inside it), generic catalog files for `npm run eval -- --catalog`, and JSONL query files.
 *
 * Every loader returns tools that satisfy the MCP rules the rest of toolrouter relies on (name pattern, object input
 * schema), so an eval run exercises the same catalog code as production instead of tripping over dataset quirks.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { CsvError as CsvParseError, parse as parseCsvSync } from 'csv-parse/sync';
import type { JsonSchemaObject, LabelledQuery, Tool, ToolAnnotations } from '../catalog/types.js';

/** The MCP tool-name rule (1–128 of `A-Za-z0-9_.-`). */
export const MCP_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const MAX_NAME_LENGTH = 128;

// ---------------------------------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------------------------------

export class CsvError extends Error {
  override readonly name = 'CsvError';
}

/** Line breaks as the datasets use them (written on Windows, macOS and Linux): CRLF, LF or a lone CR. */
const LINE_BREAK = /\r\n|\n|\r/g;

/**
 * RFC 4180 CSV (csv-parse): comma-separated, records end in CRLF, LF or CR, fields may be quoted with `"` and a quoted
 * field may hold commas, newlines and doubled quotes. Leniencies for files written by hand or by Python's `csv` module:
 * a `"` inside an unquoted field is literal, and so is a quoted field with text after its closing quote (`"x"y` is
 * read as it stands); records may differ in length. A leading BOM is dropped and blank lines are skipped (they carry
 * no record). An unterminated quote is an error, because silently swallowing the rest of the file would hide a
 * corrupt dataset.
 */
export function parseCsv(text: string): string[][] {
  try {
    return parseCsvSync(text, {
      bom: true,
      relax_quotes: true,
      relax_column_count: true,
      skip_empty_lines: true,
      record_delimiter: ['\r\n', '\n', '\r'],
    }) as string[][];
  } catch (error) {
    if (error instanceof CsvParseError && error.code === 'CSV_QUOTE_NOT_CLOSED') {
      throw new CsvError(`unterminated quoted field in the record starting on line ${unfinishedRecordLine(text, error)}`);
    }
    if (error instanceof CsvParseError) throw new CsvError(error.message);
    throw error;
  }
}

/**
 * csv-parse names the line where the file ended; the line to look at is where the unfinished record began: after the
 * bytes of the complete records (`bytes`) and any blank lines that followed them.
 */
function unfinishedRecordLine(text: string, error: CsvParseError): number {
  const consumed = (error as CsvParseError & { bytes?: number }).bytes ?? 0;
  const bytes = Buffer.from(text, 'utf8');
  const done = bytes.subarray(0, consumed).toString('utf8');
  const rest = bytes.subarray(consumed).toString('utf8');
  const leadingBreaks = /^(?:\r\n|\n|\r)*/.exec(rest)![0];
  return 1 + (done.match(LINE_BREAK)?.length ?? 0) + (leadingBreaks.match(LINE_BREAK)?.length ?? 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Names and tool normalisation
// ---------------------------------------------------------------------------------------------------------------

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/**
 * Maps an arbitrary server key or tool name onto the MCP name alphabet: every run of characters outside
 * `A-Za-z0-9_.-` becomes one `_` (`Ant Design Components` → `Ant_Design_Components`, `PDF&URLTool` →
 * `PDF_URLTool`). A name with no ASCII letter or digit left (e.g. entirely Chinese) becomes `h_<sha256 prefix>` so
 * that distinct names stay distinct. Valid names are returned unchanged, so applying it twice is harmless.
 */
export function sanitizeName(raw: string): string {
  if (MCP_TOOL_NAME.test(raw)) return raw;
  const replaced = raw.replace(/[^A-Za-z0-9_.-]+/g, '_');
  const name = /[A-Za-z0-9]/.test(replaced) ? replaced : `h_${shortHash(raw)}`;
  return fitLength(name, raw);
}

/** Keeps names within 128 characters; the hash suffix keeps two long names with a common prefix apart. */
function fitLength(name: string, original: string): string {
  if (name.length <= MAX_NAME_LENGTH) return name;
  return `${name.slice(0, MAX_NAME_LENGTH - 9)}_${shortHash(original)}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const EMPTY_SCHEMA = (): JsonSchemaObject => ({ type: 'object', properties: {} });

/**
 * Object schema for a tool: kept as given when it already is one; a schema without `type` gets `type: 'object'`
 * (common in hand-written catalogs and what MCP clients assume anyway); anything else is replaced by the empty
 * object schema, because MCP requires tool input to be an object and a non-object schema cannot describe one.
 */
function objectSchema(value: unknown): { schema: JsonSchemaObject; fixed: boolean } {
  if (isPlainObject(value)) {
    if (value.type === 'object') return { schema: value as JsonSchemaObject, fixed: false };
    if (value.type === undefined) return { schema: { ...value, type: 'object' } as JsonSchemaObject, fixed: true };
  }
  return { schema: EMPTY_SCHEMA(), fixed: value !== undefined };
}

/** Null-valued hints (LiveMCPBench has `"destructiveHint": null`, `"title": null`) are not valid MCP; drop them. */
function cleanAnnotations(value: unknown): ToolAnnotations | undefined {
  if (!isPlainObject(value)) return undefined;
  const out: ToolAnnotations = {};
  for (const [key, v] of Object.entries(value)) if (v !== null && v !== undefined) out[key] = v;
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * Builds a Tool from a raw MCP tool object. Only MCP Tool fields are kept (name, title, description, inputSchema,
 * outputSchema, annotations, _meta); an output schema that is not an object schema is dropped rather than guessed.
 */
function toTool(raw: Record<string, unknown>, name: string, counters?: { schemaFixed: number }): Tool {
  const { schema, fixed } = objectSchema(raw.inputSchema);
  if (fixed && counters) counters.schemaFixed += 1;
  const tool: Tool = { name, inputSchema: schema };
  if (typeof raw.title === 'string') tool.title = raw.title;
  if (typeof raw.description === 'string') tool.description = raw.description;
  if (isPlainObject(raw.outputSchema) && raw.outputSchema.type === 'object') {
    tool.outputSchema = raw.outputSchema as JsonSchemaObject;
  }
  const annotations = cleanAnnotations(raw.annotations);
  if (annotations) tool.annotations = annotations;
  if (isPlainObject(raw._meta)) tool._meta = raw._meta;
  return tool;
}

function readText(file: string): string {
  const text = readFileSync(file, 'utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function readJson(file: string): unknown {
  const text = readText(file);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${file}: invalid JSON: ${(error as Error).message}`, { cause: error });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// MetaTool
// ---------------------------------------------------------------------------------------------------------------

export interface MetaToolReport {
  /** Data rows in queries.csv (header excluded). */
  rows: number;
  /** Queries returned. */
  queries: number;
  /** Rows dropped because their tool is not a key of tools.json, and which names those were. */
  droppedUnknownTool: number;
  unknownTools: Record<string, number>;
  /** Rows dropped because the query text was blank. */
  droppedEmpty: number;
  /** Tool names changed to satisfy the MCP name rule (queries are relabelled the same way). */
  renamedTools: { from: string; to: string }[];
  /** Query texts that occur on more than one row, and how many of those carry different tools. */
  duplicateQueryTexts: number;
  conflictingQueryTexts: number;
}

export interface MetaToolOptions {
  /**
   * Merge rows with the same query text into one query whose `expected` is the union of their tools. Off by default
   * so results stay comparable with papers that score every row.
   */
  mergeDuplicates?: boolean;
}

function metaToolCatalog(map: Record<string, unknown>, file: string): { tools: Tool[]; renames: Map<string, string> } {
  const tools: Tool[] = [];
  const renames = new Map<string, string>();
  const used = new Set<string>();
  for (const [rawName, description] of Object.entries(map)) {
    if (typeof description !== 'string') throw new Error(`${file}: description of "${rawName}" is not a string`);
    let name = sanitizeName(rawName);
    for (let k = 2; used.has(name); k += 1) name = fitLength(`${sanitizeName(rawName)}_${k}`, `${rawName}#${k}`);
    used.add(name);
    if (name !== rawName) renames.set(rawName, name);
    tools.push({ name, description, inputSchema: EMPTY_SCHEMA() });
  }
  return { tools, renames };
}

interface CsvQueryRow {
  query: string;
  tool: string;
  line: number;
}

/** Reads MetaTool's `Query,Tool` CSV (columns found by header name, so column order does not matter). */
function readQueryCsv(file: string): CsvQueryRow[] {
  const records = parseCsv(readText(file));
  const header = records[0];
  if (!header) throw new Error(`${file}: empty CSV`);
  const names = header.map((h) => h.trim().toLowerCase());
  const qi = names.indexOf('query');
  const ti = names.indexOf('tool');
  if (qi < 0 || ti < 0) throw new Error(`${file}: expected a "Query,Tool" header, got "${header.join(',')}"`);
  return records.slice(1).map((r, i) => ({ query: (r[qi] ?? '').trim(), tool: (r[ti] ?? '').trim(), line: i + 2 }));
}

/**
 * MetaTool: `tools.json` maps tool name → description (tools get an empty object input schema, since MetaTool has
 * none) and `queries.csv` labels each query with one tool. Names are made MCP-valid with {@link sanitizeName}
 * (MetaTool has `PDF&URLTool`) and the queries are relabelled to match.
 */
export function loadMetaTool(
  dir: string,
  opts: MetaToolOptions = {},
): { tools: Tool[]; queries: LabelledQuery[]; report: MetaToolReport } {
  const toolsFile = join(dir, 'tools.json');
  const map = readJson(toolsFile);
  if (!isPlainObject(map)) throw new Error(`${toolsFile}: expected an object mapping tool name to description`);
  const { tools, renames } = metaToolCatalog(map, toolsFile);
  const known = new Set(Object.keys(map));

  const rows = readQueryCsv(join(dir, 'queries.csv'));
  const report: MetaToolReport = {
    rows: rows.length,
    queries: 0,
    droppedUnknownTool: 0,
    unknownTools: {},
    droppedEmpty: 0,
    renamedTools: [...renames].map(([from, to]) => ({ from, to })),
    duplicateQueryTexts: 0,
    conflictingQueryTexts: 0,
  };

  const byText = new Map<string, Set<string>>();
  const rowCount = new Map<string, number>();
  const queries: LabelledQuery[] = [];
  for (const row of rows) {
    if (row.query === '') {
      report.droppedEmpty += 1;
      continue;
    }
    if (!known.has(row.tool)) {
      report.droppedUnknownTool += 1;
      report.unknownTools[row.tool] = (report.unknownTools[row.tool] ?? 0) + 1;
      continue;
    }
    const tool = renames.get(row.tool) ?? row.tool;
    const labels = byText.get(row.query);
    if (labels) labels.add(tool);
    else byText.set(row.query, new Set([tool]));
    rowCount.set(row.query, (rowCount.get(row.query) ?? 0) + 1);
    if (!opts.mergeDuplicates) queries.push({ query: row.query, expected: [tool] });
  }
  for (const [text, labels] of byText) {
    if ((rowCount.get(text) ?? 0) > 1) report.duplicateQueryTexts += 1;
    if (labels.size > 1) report.conflictingQueryTexts += 1;
    if (opts.mergeDuplicates) queries.push({ query: text, expected: [...labels] });
  }
  report.queries = queries.length;
  return { tools, queries, report };
}

// ---------------------------------------------------------------------------------------------------------------
// LiveMCPBench
// ---------------------------------------------------------------------------------------------------------------

export interface LiveMcpBenchOptions {
  /** Between server key and tool name; default `__` (toolrouter's upstream namespacing). */
  separator?: string;
}

export interface LiveMcpBenchReport {
  servers: number;
  /** Tool definitions in the file, before de-duplication. */
  toolsSeen: number;
  tools: number;
  /** Server keys and tool names that had to be changed to satisfy the MCP name rule. */
  sanitisedServerKeys: { from: string; to: string }[];
  sanitisedToolNames: { server: string; from: string; to: string }[];
  /** Identical definitions under the same qualified name, of which one is kept. */
  duplicatesDropped: number;
  /** Different definitions that collided on a qualified name; later ones get a `_2`, `_3`… suffix. */
  renamed: { from: string; to: string }[];
  /** Input schemas that were missing or not object schemas and were fixed. */
  schemaFixed: number;
  /** Tools without a description (kept: they are real upstream tools; name and parameters still describe them). */
  emptyDescriptions: number;
}

function isLiveMcpBench(data: unknown): data is Record<string, unknown>[] {
  return (
    Array.isArray(data) &&
    data.length > 0 &&
    data.every(
      (server) =>
        isPlainObject(server) &&
        isPlainObject(server.tools) &&
        Object.values(server.tools).every((entry) => isPlainObject(entry) && Array.isArray(entry.tools)),
    )
  );
}

function liveMcpBenchTools(
  data: unknown,
  file: string,
  opts: LiveMcpBenchOptions,
): { tools: Tool[]; report: LiveMcpBenchReport } {
  if (!isLiveMcpBench(data)) {
    throw new Error(`${file}: not the LiveMCPBench format (an array of servers with tools.<server>.tools[])`);
  }
  const separator = opts.separator ?? '__';
  if (!/^[A-Za-z0-9_.-]*$/.test(separator)) {
    throw new Error(`separator "${separator}" would produce names outside the MCP name alphabet`);
  }
  const report: LiveMcpBenchReport = {
    servers: 0,
    toolsSeen: 0,
    tools: 0,
    sanitisedServerKeys: [],
    sanitisedToolNames: [],
    duplicatesDropped: 0,
    renamed: [],
    schemaFixed: 0,
    emptyDescriptions: 0,
  };
  const tools: Tool[] = [];
  // Qualified name → canonical JSON of the raw definition, to tell exact duplicates from real collisions.
  const seen = new Map<string, string>();

  for (const entry of data) {
    for (const [serverKey, server] of Object.entries(entry.tools as Record<string, Record<string, unknown>>)) {
      report.servers += 1;
      const serverName = sanitizeName(serverKey);
      if (serverName !== serverKey) report.sanitisedServerKeys.push({ from: serverKey, to: serverName });
      for (const raw of server.tools as unknown[]) {
        report.toolsSeen += 1;
        if (!isPlainObject(raw) || typeof raw.name !== 'string' || raw.name === '') {
          throw new Error(`${file}: server "${serverKey}" has a tool without a name`);
        }
        const toolName = sanitizeName(raw.name);
        if (toolName !== raw.name) report.sanitisedToolNames.push({ server: serverKey, from: raw.name, to: toolName });
        const base = fitLength(`${serverName}${separator}${toolName}`, `${serverKey}${separator}${raw.name}`);
        const fingerprint = JSON.stringify(raw);
        const previous = seen.get(base);
        if (previous === fingerprint) {
          report.duplicatesDropped += 1;
          continue;
        }
        let name = base;
        for (let k = 2; seen.has(name); k += 1) name = fitLength(`${base}_${k}`, `${base}#${k}`);
        if (name !== base) report.renamed.push({ from: base, to: name });
        seen.set(name, fingerprint);
        const tool = toTool(raw, name, report);
        if (!tool.description?.trim()) report.emptyDescriptions += 1;
        tools.push(tool);
      }
    }
  }
  report.tools = tools.length;
  return { tools, report };
}

/** LiveMCPBench's server list, with the report of what had to be fixed (see {@link loadLiveMcpBench}). */
export function loadLiveMcpBenchWithReport(
  file: string,
  opts: LiveMcpBenchOptions = {},
): { tools: Tool[]; report: LiveMcpBenchReport } {
  return liveMcpBenchTools(readJson(file), file, opts);
}

/**
 * LiveMCPBench's `tools.json`: an array of servers, each with `tools.<serverKey>.tools[]` real MCP tool definitions.
 * Tools are qualified `serverKey__tool` like toolrouter namespaces upstream tools, with both parts passed through
 * {@link sanitizeName} (the dataset has a server key with spaces, `Ant Design Components`). Input schemas are kept
 * as given; null annotation values are dropped.
 */
export function loadLiveMcpBench(file: string, opts: LiveMcpBenchOptions = {}): Tool[] {
  return loadLiveMcpBenchWithReport(file, opts).tools;
}

// ---------------------------------------------------------------------------------------------------------------
// Generic catalog and query files
// ---------------------------------------------------------------------------------------------------------------

function mcpToolList(list: unknown[], file: string): Tool[] {
  const names = new Set<string>();
  return list.map((raw, i) => {
    if (!isPlainObject(raw) || typeof raw.name !== 'string' || raw.name === '') {
      throw new Error(`${file}: tools[${i}] is not an MCP tool (it needs a non-empty string "name")`);
    }
    if (names.has(raw.name)) throw new Error(`${file}: duplicate tool name "${raw.name}"`);
    names.add(raw.name);
    return toTool(raw, raw.name);
  });
}

/**
 * Loads a tool catalog for evaluation, detecting its format:
 * (a) a JSON array of MCP tools, (b) `{tools: [...]}`, (c) a MetaTool-style object mapping name → description,
 * (d) LiveMCPBench's server list, (e) a directory holding MetaTool's `tools.json` (+ `queries.csv`).
 * MCP tool names in (a) and (b) are used as given, as toolrouter does for static sources.
 */
export function loadCatalogFile(file: string): Tool[] {
  if (statSync(file).isDirectory()) {
    const toolsFile = join(file, 'tools.json');
    if (!existsSync(toolsFile)) throw new Error(`${file}: directory has no tools.json`);
    return loadCatalogFile(toolsFile);
  }
  const data = readJson(file);
  if (isLiveMcpBench(data)) return liveMcpBenchTools(data, file, {}).tools;
  if (Array.isArray(data)) return mcpToolList(data, file);
  if (isPlainObject(data)) {
    if (Array.isArray(data.tools)) return mcpToolList(data.tools, file);
    const values = Object.values(data);
    if (values.length > 0 && values.every((v) => typeof v === 'string')) return metaToolCatalog(data, file).tools;
  }
  throw new Error(
    `${file}: unrecognised catalog format (expected an array of MCP tools, {tools: [...]}, a name → description ` +
      'map, or the LiveMCPBench server list)',
  );
}

/**
 * Labelled queries: JSONL with one `{query, expected: [names]}` per line (blank lines skipped), or MetaTool's
 * `queries.csv` (by extension) mapped to `{query, expected: [Tool]}` with tool names sanitised exactly as
 * {@link loadCatalogFile} sanitises MetaTool's catalog, so the two line up.
 */
export function loadQueries(file: string): LabelledQuery[] {
  if (extname(file).toLowerCase() === '.csv') {
    return readQueryCsv(file)
      .filter((row) => row.query !== '')
      .map((row) => {
        if (row.tool === '') throw new Error(`${file}:${row.line}: empty Tool`);
        return { query: row.query, expected: [sanitizeName(row.tool)] };
      });
  }
  const queries: LabelledQuery[] = [];
  readText(file)
    .split(/\r?\n/)
    .forEach((text, i) => {
      const where = `${file}:${i + 1}`;
      if (text.trim() === '') return;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        throw new Error(`${where}: invalid JSON: ${(error as Error).message}`, { cause: error });
      }
      if (!isPlainObject(value)) throw new Error(`${where}: expected an object {query, expected}`);
      const { query, expected } = value;
      if (typeof query !== 'string' || query.trim() === '') throw new Error(`${where}: "query" must be a non-empty string`);
      if (
        !Array.isArray(expected) ||
        expected.length === 0 ||
        !expected.every((e): e is string => typeof e === 'string' && e !== '')
      ) {
        throw new Error(`${where}: "expected" must be a non-empty array of tool names`);
      }
      queries.push({ query, expected });
    });
  return queries;
}

// ---------------------------------------------------------------------------------------------------------------
// Sources with descriptions (server context)
// ---------------------------------------------------------------------------------------------------------------

/** A catalog source for evaluation: its tools and what it says of itself, as an upstream or a PUT would. */
export interface EvalSource {
  source: string;
  description?: string;
  tools: Tool[];
}

/**
 * A catalog file as sources: LiveMCPBench as one source per server, described by its entry's name, category and
 * description (what a server's `instructions` or a source's `description` would say); any other format as one source,
 * split by server prefix (`server<separator>tool`) when `descriptions` (JSON: server → description) names servers.
 */
export function loadCatalogSources(file: string, options: { descriptions?: string; separator?: string } = {}): EvalSource[] {
  const separator = options.separator ?? '__';
  const data = statSync(file).isDirectory() ? undefined : readJson(file);
  if (data !== undefined && isLiveMcpBench(data)) {
    const sources: EvalSource[] = [];
    const { tools } = liveMcpBenchTools(data, file, { separator });
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const taken = new Set<string>();
    for (const entry of data) {
      const about = [entry.name, entry.category, entry.description].filter((part): part is string => typeof part === 'string' && part.trim() !== '');
      for (const serverKey of Object.keys(entry.tools as Record<string, unknown>)) {
        const prefix = `${sanitizeName(serverKey)}${separator}`;
        const own = [...byName.values()].filter((tool) => tool.name.startsWith(prefix) && !taken.has(tool.name));
        for (const tool of own) taken.add(tool.name);
        if (own.length === 0) continue;
        sources.push({ source: sanitizeName(serverKey).slice(0, 64), ...(about.length > 0 ? { description: about.join(' — ') } : {}), tools: own });
      }
    }
    return sources;
  }
  const tools = loadCatalogFile(file);
  if (options.descriptions === undefined) return [{ source: 'eval', tools }];
  const described = readJson(options.descriptions);
  if (!isPlainObject(described)) throw new Error(`${options.descriptions}: expected an object mapping server to description`);
  const groups = new Map<string, Tool[]>();
  for (const tool of tools) {
    const cut = separator === '' ? -1 : tool.name.indexOf(separator);
    const server = cut > 0 ? tool.name.slice(0, cut) : 'eval';
    groups.set(server, [...(groups.get(server) ?? []), tool]);
  }
  return [...groups].map(([source, own]) => {
    const description = described[source];
    return { source, ...(typeof description === 'string' ? { description } : {}), tools: own };
  });
}
