/**
 * The layering rule, run by `npm run lint` (dependency-cruiser over src/ and workers/).
 *
 * Data flows one way: catalog → index → search → faces, with the configuration assembled at the top and each module
 * handed its own slice. A module may import its own layer and the layers below it, never one above; and no import
 * cycle is allowed anywhere. Layers, bottom first (derived from what the code imports, see README "Layout"):
 *
 *   0 shared      src/redis/ (connection, keys, generation marker, the process's bus), src/telemetry/ (tracing, spans, token
 *                 accounting), log.ts, metrics.ts, shutdown.ts, errors.ts: plumbing any layer uses
 *   1 catalog     src/catalog: tools, sources, snapshots, schema checks
 *   2 embedding   src/embedding: text → vectors (local model, OpenAI-compatible server)
 *   3 index       src/indexing: catalog snapshots → BM25 + vector indexes, the in-process and Redis/BullMQ pipelines
 *   4 search      src/search: ranking and fusion over the live index (SearchService), fusion defaults
 *   5 services    src/feedback (learning from usage; feeds search through the FeedbackSignal seam search defines),
 *                 src/auth (keys, rate limits), src/analytics, and governance: src/policy (Cedar), src/guardrails
 *                 (secrets in arguments and results), src/audit (the hash-chained trail)
 *   6 eval        src/eval: retrieval quality and tuning over labelled queries
 *   7 codemode    src/codemode: the sandbox that runs model-written code over a narrow ToolHost (no MCP in it)
 *   8 faces       src/http (REST API), src/chat (OpenAI-compatible proxy), src/mcp (MCP gateway), src/console
 *   9 assembly    src/config, src/cli, src/cli.ts, src/server.ts, src/index.ts, src/package-root.ts, workers/
 *
 * Faces do not import each other except through the explicit seams below (the HTTP plumbing every face mounts on).
 * Inside the MCP face the folders are roles, and calls go one way (MCP_ROLES): server (what MCP clients talk to) →
 * gateway (virtual tools, search, calls) → upstream (connections to upstream servers, their OAuth) → relay (the
 * per-call client channel). src/mcp/index.ts assembles them; settings.ts and version.ts sit beside, for all roles.
 * src/package-root.ts (where the package is installed: models dir, console files, version) is read at the top only;
 * lower modules get paths handed in.
 *
 * KNOWN_EXCEPTIONS are violations that exist today in files other work is moving; each is allowed for exactly that
 * pair of files. TODO(lead): delete each entry once its move is merged; the rule then holds without it.
 */

/** @type {{ name: string, path: string }[]} bottom first; `path` is a regular expression on the file path. */
const LAYERS = [
  { name: 'shared', path: '^src/((log|metrics|shutdown|errors)\\.ts|(redis|telemetry)/[^/]+\\.ts)$' },
  // Stores of what a request leaves behind for a later one (STYLE habit 8): memory and Redis implementations.
  { name: 'state', path: '^src/state/' },
  { name: 'catalog', path: '^src/catalog/' },
  { name: 'embedding', path: '^src/embedding/' },
  { name: 'index', path: '^src/indexing/' },
  { name: 'search', path: '^src/search/' },
  { name: 'services', path: '^src/(feedback|auth|analytics|policy|audit|guardrails)/' },
  { name: 'eval', path: '^src/eval/' },
  { name: 'codemode', path: '^src/codemode/' },
  { name: 'faces', path: '^src/(http|chat|mcp|console)/' },
  { name: 'assembly', path: '^(src/(config|cli)/|src/(cli|server|index|package-root)\\.ts$|workers/)' },
];

/** The faces, each of which may use the others only through SEAMS. */
const FACES = [
  { name: 'http', path: '^src/http/' },
  { name: 'chat', path: '^src/chat/' },
  { name: 'mcp', path: '^src/mcp/' },
];

/** The MCP face's roles, bottom first: each may import its own folder and those below, never one above. */
const MCP_ROLES = [
  { name: 'relay', path: '^src/mcp/relay/' },
  { name: 'upstream', path: '^src/mcp/upstream/' },
  { name: 'gateway', path: '^src/mcp/gateway/' },
  { name: 'server', path: '^src/mcp/server/' },
];

/** HTTP plumbing every face mounts on: key checks and access (auth.ts), error shapes, body-depth checks, request logs. */
const SEAMS = '^src/http/(auth|errors|json-depth|request-log)\\.ts$';

/** `from` → `to`, exact files. */
const KNOWN_EXCEPTIONS = [
  // The MCP implementation version is a module constant read by three MCP modules at load; handing it down from the
  // assembly means threading it through the gateway, the upstream manager and both servers. TODO: do that.
  { from: '^src/mcp/version\\.ts$', to: '^src/package-root\\.ts$' },
];

/**
 * The chat face inside: a provider-free core (src/chat/core) and one folder per API (a Dialect each), which the routes
 * (src/chat/*.ts) put together. The core imports no dialect; a dialect imports the core, the chat settings, and the
 * folder it shares with its sibling API (`may`), never another dialect.
 */
const CHAT_CORE = '^src/chat/core/';
const CHAT_SETTINGS = '^src/chat/settings\\.ts$';
const CHAT_DIALECTS = [
  { name: 'openai', path: '^src/chat/openai/', may: [] },
  { name: 'openai-chat', path: '^src/chat/openai-chat/', may: ['^src/chat/openai/'] },
  { name: 'openai-responses', path: '^src/chat/openai-responses/', may: ['^src/chat/openai/'] },
  { name: 'anthropic', path: '^src/chat/anthropic/', may: [] },
];

const any = (paths) => (paths.length === 0 ? '^$' : paths.map((p) => `(${p})`).join('|'));

/**
 * A rule per (source, forbidden targets). Files with a known exception get the same rule minus exactly that target,
 * so an exception never widens into a general pass.
 */
function forbid(name, comment, fromPath, toPath) {
  const excepted = KNOWN_EXCEPTIONS.filter((e) => new RegExp(fromPath).test(e.from.replace(/^\^|\\|\$$/g, '')));
  const rules = [
    {
      name,
      comment,
      severity: 'error',
      from: { path: fromPath, pathNot: any(excepted.map((e) => e.from)) },
      to: { path: toPath },
    },
  ];
  for (const exception of excepted) {
    const others = KNOWN_EXCEPTIONS.filter((e) => e.from === exception.from).map((e) => e.to);
    rules.push({
      name,
      comment: `${comment} (known exceptions of this file excepted; see KNOWN_EXCEPTIONS)`,
      severity: 'error',
      from: { path: exception.from },
      to: { path: toPath, pathNot: any(others) },
    });
  }
  return rules;
}

const layerRules = LAYERS.slice(0, -1).flatMap((layer, i) =>
  forbid(
    `layer-${layer.name}-imports-upward`,
    `${layer.name} (layer ${i}) may import only its own layer and those below: ${LAYERS.slice(0, i + 1).map((l) => l.name).join(', ')}`,
    layer.path,
    any(LAYERS.slice(i + 1).map((l) => l.path)),
  ),
);

const faceRules = FACES.flatMap((face) =>
  forbid(
    `face-${face.name}-imports-another-face`,
    `the ${face.name} face may use other faces only through the shared HTTP seams (${SEAMS})`,
    face.path,
    `(${any(FACES.filter((f) => f !== face).map((f) => f.path))})`,
  ).map((rule) => ({ ...rule, to: { ...rule.to, pathNot: any([SEAMS, ...(rule.to.pathNot ? [rule.to.pathNot] : [])]) } })),
);

const mcpRoleRules = MCP_ROLES.slice(0, -1).flatMap((role) =>
  forbid(
    `mcp-${role.name}-imports-upward`,
    `src/mcp/${role.name} may import only its own role and those below: ${MCP_ROLES.slice(0, MCP_ROLES.indexOf(role) + 1).map((r) => r.name).join(', ')}`,
    role.path,
    any(MCP_ROLES.slice(MCP_ROLES.indexOf(role) + 1).map((r) => r.path)),
  ),
);

const chatRules = [
  {
    name: 'chat-core-imports-a-dialect',
    comment: 'src/chat/core is provider-free: what differs between APIs comes in through the Dialect interface',
    severity: 'error',
    from: { path: CHAT_CORE },
    to: { path: '^src/chat/', pathNot: any([CHAT_CORE, CHAT_SETTINGS]) },
  },
  ...CHAT_DIALECTS.map((dialect) => ({
    name: 'chat-dialect-imports-another-dialect',
    comment: `src/chat/${dialect.name} may import the chat core and settings${dialect.may.length > 0 ? ' and the folder it shares' : ''}, not another dialect or the routes`,
    severity: 'error',
    from: { path: dialect.path },
    to: { path: '^src/chat/', pathNot: any([CHAT_CORE, CHAT_SETTINGS, dialect.path, ...dialect.may]) },
  })),
];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle hides which module is the lower one; break it with a narrow interface at the seam.',
      severity: 'error',
      from: { path: '^(src|workers)/' },
      // Type-only cycles too: erased at compile time, they still hide which module is the lower one. A shared type
      // goes to a module below both (src/embedding/types.ts, each route's own options interface).
      to: { circular: true },
    },
    {
      name: 'package-root-only-at-the-top',
      comment: 'Where the package is installed is read by the assembly only; lower modules get paths handed in.',
      severity: 'error',
      from: { path: '^src/', pathNot: any([LAYERS.at(-1).path, ...KNOWN_EXCEPTIONS.filter((e) => e.to === '^src/package-root\\.ts$').map((e) => e.from)]) },
      to: { path: '^src/package-root\\.ts$' },
    },
    {
      name: 'not-in-a-layer',
      comment: 'Every source file belongs to a layer: add a new top-level file or folder to LAYERS.',
      severity: 'error',
      from: { path: '^src/', pathNot: any(LAYERS.map((l) => l.path)) },
      to: {},
    },
    ...layerRules,
    ...faceRules,
    ...mcpRoleRules,
    ...chatRules,
  ],
  options: {
    includeOnly: '^(src|workers)/',
    tsConfig: { fileName: 'tsconfig.json' },
    // Type-only imports count: a type from a higher layer ties the lower one to it as much as a value does.
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
