import { Command, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import type { LabelledQuery, Tool } from './catalog/types.js';
import { ConfigError, loadConfig, PROJECT_ROOT } from './config/config.js';
import { checkConfig, formatConfig } from './config/check.js';
import { ensureOfflineModel } from './embedding/offline-model.js';
import { FastMcpBm25, LiteLlmTokenOverlap } from './eval/baselines.js';
import { loadCatalogFile, loadQueries } from './eval/datasets.js';
import { createEngine } from './eval/engine.js';
import { evaluate, formatTable, type EvalResult } from './eval/metrics.js';
import { RANKED_DEPTH, tune } from './eval/tune.js';
import { replayFeedback, splitForFeedback } from './eval/feedback.js';
import { SEARCH_MODES, type SearchMode } from './search/search.js';
import { createToolrouter, listen } from './server.js';
import { reserveStdoutForProtocol, serveStdio } from './mcp/stdio.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { gracefulShutdown } from './shutdown.js';

const program = new Command()
  .name('toolrouter')
  .description('Semantic tool router for LLM agents: hybrid BM25 + embedding search over MCP tool catalogs')
  .option('--config <file>', 'config file, YAML or JSON (the same as TOOLROUTER_CONFIG; environment variables still win)')
  .hook('preAction', () => {
    const file = program.opts<{ config?: string }>().config;
    // Through the environment, so every command (and the worker module) loads it the same way.
    if (file !== undefined) process.env.TOOLROUTER_CONFIG = path.resolve(file);
  });

program
  .command('serve', { isDefault: true })
  .description('run the HTTP API (with the in-process indexer when REDIS_URL is unset)')
  .action(async () => {
    const config = loadConfig();
    const router = await createToolrouter(config);
    const server = await listen(router);
    // In-flight requests finish first; then MCP sessions, upstream connections (child processes) and Redis close.
    const shutdown = gracefulShutdown(server, () => router.close(), { timeoutMs: config.shutdownTimeoutMs, log: router.log });
    const stop = () => void shutdown().then((code) => process.exit(code));
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });

program
  .command('stdio')
  .description('serve the MCP gateway over stdin/stdout for one client (logs go to stderr)')
  .action(async () => {
    reserveStdoutForProtocol();
    await serveStdio(await createToolrouter(loadConfig()));
  });

program
  .command('worker')
  .description('run a BullMQ index worker (needs REDIS_URL)')
  .action(async () => {
    await import('../workers/indexer.js');
  });

program
  .command('eval')
  .description('print Recall@1, Recall@5 and MRR for each search mode against labelled queries')
  .requiredOption('--catalog <file>', 'tools: JSON list, {tools}, MetaTool tools.json or dir, LiveMCPBench tools.json')
  .requiredOption('--queries <file>', 'labelled queries: JSONL {query, expected: [names]} or MetaTool queries.csv')
  .addOption(new Option('--mode <mode>', 'evaluate one mode only').choices([...SEARCH_MODES, 'baselines']))
  .option('--limit <n>', 'evaluate only the first n queries', positiveInteger)
  .option('--feedback <file>', 'replay these labelled queries as feedback, then evaluate hybrid again with it')
  .option('--feedback-split', 'replay every other query of --queries as feedback and evaluate on the rest')
  .action(async (options: { catalog: string; queries: string; mode?: SearchMode | 'baselines'; limit?: number } & FeedbackOptions) => {
    const data = loadEvalData(options.catalog, options.queries, options.limit);
    const { tools } = data;
    const { queries, feedback } = feedbackQueries(data.queries, options);
    const modes: SearchMode[] = options.mode && options.mode !== 'baselines' ? [options.mode] : ['bm25', 'vector', 'hybrid'];
    const rows: { label: string; n: number; 'R@1': string; 'R@5': string; MRR: string }[] = [];
    const engine = options.mode === 'baselines' ? undefined : await createEngine(tools);
    for (const mode of engine ? modes : []) {
      const result = await withProgress(`${mode}`, queries.length, (onProgress) =>
        evaluate(
          async (query) => (await engine!.search.search({ query, mode, topK: RANKED_DEPTH })).results.map((hit) => hit.tool.name),
          queries,
          { onProgress },
        ),
      );
      rows.push(row(`toolrouter ${mode}`, result));
    }
    if (engine && feedback) {
      const events = await withProgress('replaying', feedback.length, (onProgress) =>
        replayFeedback(engine.feedback!, feedback, (name) => engine.catalog.get(name) !== undefined, onProgress),
      );
      console.error(`feedback: ${events} events from ${feedback.length} queries`);
      const result = await withProgress('feedback', queries.length, (onProgress) =>
        evaluate(
          async (query) => (await engine.search.search({ query, mode: 'hybrid', topK: RANKED_DEPTH })).results.map((hit) => hit.tool.name),
          queries,
          { onProgress },
        ),
      );
      rows.push(row('toolrouter hybrid + feedback', result));
    }
    if (!options.mode || options.mode === 'baselines') {
      const fastmcp = new FastMcpBm25(tools);
      const litellm = new LiteLlmTokenOverlap(tools);
      rows.push(row('baseline fastmcp-bm25', await evaluate((query) => fastmcp.search(query, RANKED_DEPTH), queries)));
      rows.push(row('baseline litellm-overlap', await evaluate((query) => litellm.search(query, RANKED_DEPTH), queries)));
    }
    console.log(`catalog: ${tools.length} tools, queries: ${queries.length}${engine ? `, model: ${engine.embedder.modelId}` : ''}`);
    console.log(formatTable(rows));
  });

program
  .command('tune')
  .description('grid-search fusion method and weights on labelled queries and print the best setting')
  .requiredOption('--catalog <file>', 'tool catalog (same formats as eval)')
  .requiredOption('--queries <file>', 'labelled queries (same formats as eval)')
  .option('--steps <n>', 'grid resolution for the bm25/vector weight split', positiveInteger, 10)
  .option('--limit <n>', 'use only the first n queries', positiveInteger)
  .option('--feedback <file>', 'replay these labelled queries as feedback first, and search the feedback weight too')
  .option('--feedback-split', 'replay every other query of --queries as feedback and tune on the rest')
  .action(async (options: { catalog: string; queries: string; steps: number; limit?: number } & FeedbackOptions) => {
    const data = loadEvalData(options.catalog, options.queries, options.limit);
    const { tools } = data;
    const { queries, feedback } = feedbackQueries(data.queries, options);
    const engine = await createEngine(tools);
    if (feedback) await replayFeedback(engine.feedback!, feedback, (name) => engine.catalog.get(name) !== undefined);
    const { rows, best } = await withProgress('retrieving', queries.length, (onProgress) =>
      tune(engine, queries, { steps: options.steps, onProgress, feedback: feedback !== undefined }),
    );
    console.log(`catalog: ${tools.length} tools, queries: ${queries.length}, model: ${engine.embedder.modelId}`);
    const feedbackLabel = (weight: number | undefined) => (weight === undefined ? '' : ` feedback=${weight}`);
    console.log(
      formatTable(rows.map((r) => row(`${r.fusion} bm25=${r.weights.bm25} vector=${r.weights.vector}${feedbackLabel(r.weights.feedback)}`, r))),
    );
    console.log(
      `best: fusion=${best.fusion} weights={bm25: ${best.weights.bm25}, vector: ${best.weights.vector}` +
        `${best.weights.feedback === undefined ? '' : `, feedback: ${best.weights.feedback}`}} ` +
        `(R@1 ${pct(best.recallAt1)}, R@5 ${pct(best.recallAt5)}, MRR ${best.mrr.toFixed(3)})`,
    );
  });

program
  .command('bench')
  .description('run the benchmarks (bench/run.ts; options such as --sizes 1000,10000 --quick --no-write pass through)')
  .allowUnknownOption()
  .allowExcessArguments()
  .helpOption(false)
  .action(async (_options: unknown, command: Command) => {
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), path.join(PROJECT_ROOT, 'bench/run.ts'), ...command.args], {
      stdio: 'inherit',
    });
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    process.exitCode = code ?? (signal ? 1 : 0);
  });

program
  .command('config')
  .description('inspect the configuration')
  .command('check')
  .description('validate the configuration (file from --config or TOOLROUTER_CONFIG, then environment) and print it with secrets masked')
  .addOption(new Option('--format <format>', 'output format').choices(['yaml', 'json']).default('yaml'))
  .action((options: { format: 'yaml' | 'json' }) => {
    let checked;
    try {
      checked = checkConfig();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      const source = process.env.TOOLROUTER_CONFIG ? ` (${process.env.TOOLROUTER_CONFIG} and the environment)` : ' (environment)';
      console.error(`toolrouter: configuration is invalid${source}, ${error.problems.length} problem(s):`);
      for (const problem of error.problems) console.error(`  - ${problem}`);
      process.exitCode = 2;
      return;
    }
    for (const key of checked.unknown) console.error(`warning: unknown setting ${key} (ignored; a typo?)`);
    process.stdout.write(formatConfig(checked.config, options.format));
  });

program
  .command('models')
  .description('manage embedding models')
  .command('build')
  .description('build the offline GloVe model into models/ (skipped when present unless --force)')
  .option('--force', 'rebuild even when the model exists')
  .action(async (options: { force?: boolean }) => {
    const dir = await ensureOfflineModel(path.join(PROJECT_ROOT, 'models'), { force: options.force === true });
    console.log(`offline model ready in ${dir}`);
  });

interface FeedbackOptions {
  feedback?: string;
  feedbackSplit?: boolean;
}

/** The queries to evaluate, and those to replay as feedback first (none without --feedback / --feedback-split). */
function feedbackQueries(queries: LabelledQuery[], options: FeedbackOptions): { queries: LabelledQuery[]; feedback?: LabelledQuery[] } {
  if (options.feedback !== undefined && options.feedbackSplit) throw new Error('use either --feedback or --feedback-split, not both');
  if (options.feedbackSplit) {
    const { feedback, evaluation } = splitForFeedback(queries);
    return { queries: evaluation, feedback };
  }
  return options.feedback === undefined ? { queries } : { queries, feedback: loadQueries(options.feedback) };
}

function loadEvalData(catalogFile: string, queriesFile: string, limit?: number): { tools: Tool[]; queries: LabelledQuery[] } {
  const tools = loadCatalogFile(catalogFile);
  const names = new Set(tools.map((tool) => tool.name));
  const all = loadQueries(queriesFile);
  const answerable = all.filter((query) => query.expected.some((name) => names.has(name)));
  const queries = answerable.slice(0, limit);
  const dropped = all.length - answerable.length;
  if (dropped > 0) console.error(`note: ${dropped} queries name no tool in the catalog and were skipped`);
  if (queries.length === 0) throw new Error('no labelled query names a tool of this catalog');
  return { tools, queries };
}

async function withProgress<T>(label: string, total: number, work: (onProgress: (done: number) => void) => Promise<T>): Promise<T> {
  if (!process.stderr.isTTY) return work(() => {});
  const bar = new cliProgress.SingleBar(
    { format: `${label.padEnd(10)} [{bar}] {value}/{total}`, stream: process.stderr },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  try {
    return await work((done) => bar.update(done));
  } finally {
    bar.stop();
  }
}

function row(label: string, result: EvalResult) {
  return { label, n: result.n, 'R@1': pct(result.recallAt1), 'R@5': pct(result.recallAt5), MRR: result.mrr.toFixed(3) };
}

function pct(value: number): string {
  return `${(value * 100).toFixed(1)}%`;
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError('must be a positive integer');
  return parsed;
}

program.parseAsync().catch((error: unknown) => {
  console.error(`toolrouter: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
