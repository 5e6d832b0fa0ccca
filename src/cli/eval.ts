/** `toolrouter eval` and `toolrouter tune`: retrieval quality on labelled queries. */
import cliProgress from 'cli-progress';
import type { LabelledQuery, Tool } from '../catalog/types.js';
import { FastMcpBm25, LiteLlmTokenOverlap } from '../eval/baselines.js';
import { loadCatalogFile, loadQueries } from '../eval/datasets.js';
import { createEngine } from '../eval/engine.js';
import { replayFeedback, splitForFeedback } from '../eval/feedback.js';
import { evaluate, formatTable, type EvalResult } from '../eval/metrics.js';
import { RANKED_DEPTH, tune as tuneWeights } from '../eval/tune.js';
import { SEARCH_MODES, type SearchMode } from '../search/search.js';
import { loadConfig } from '../config/config.js';
import { StartupError } from './startup.js';

export interface FeedbackOptions {
  feedback?: string;
  feedbackSplit?: boolean;
}

export interface EvalOptions extends FeedbackOptions {
  catalog: string;
  queries: string;
  mode?: string;
  limit?: number;
}

export interface TuneOptions extends FeedbackOptions {
  catalog: string;
  queries: string;
  steps: number;
  limit?: number;
}

export async function runEval(options: EvalOptions): Promise<void> {
  const only = parseMode(options.mode);
  const data = loadEvalData(options.catalog, options.queries, options.limit);
  const { tools } = data;
  const { queries, feedback } = feedbackQueries(data.queries, options);
  const modes: SearchMode[] = only && only !== 'baselines' ? [only] : ['bm25', 'vector', 'hybrid'];
  const rows: { label: string; n: number; 'R@1': string; 'R@5': string; MRR: string }[] = [];
  const engine = only === 'baselines' ? undefined : await createEngine(tools, { config: evalConfig() });
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
  if (!only || only === 'baselines') {
    const fastmcp = new FastMcpBm25(tools);
    const litellm = new LiteLlmTokenOverlap(tools);
    rows.push(row('baseline fastmcp-bm25', await evaluate((query) => fastmcp.search(query, RANKED_DEPTH), queries)));
    rows.push(row('baseline litellm-overlap', await evaluate((query) => litellm.search(query, RANKED_DEPTH), queries)));
  }
  console.log(`catalog: ${tools.length} tools, queries: ${queries.length}${engine ? `, model: ${engine.embedder.modelId}` : ''}`);
  console.log(formatTable(rows));
}

export async function runTune(options: TuneOptions): Promise<void> {
  const data = loadEvalData(options.catalog, options.queries, options.limit);
  const { tools } = data;
  const { queries, feedback } = feedbackQueries(data.queries, options);
  const engine = await createEngine(tools, { config: evalConfig() });
  if (feedback) await replayFeedback(engine.feedback!, feedback, (name) => engine.catalog.get(name) !== undefined);
  const { rows, best } = await withProgress('retrieving', queries.length, (onProgress) =>
    tuneWeights(engine, queries, { steps: options.steps, onProgress, feedback: feedback !== undefined }),
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
}

/** The configuration eval and tune search with: the config file if one is given, then the environment. */
function evalConfig() {
  return loadConfig({ ...process.env, TOOLROUTER_CONFIG: process.env.TOOLROUTER_CONFIG ?? '' });
}

/** Checked here rather than with commander's choices, so `--help` need not load the search module. */
function parseMode(mode: string | undefined): SearchMode | 'baselines' | undefined {
  if (mode === undefined || mode === 'baselines' || (SEARCH_MODES as readonly string[]).includes(mode)) return mode as SearchMode | 'baselines' | undefined;
  throw new StartupError(`--mode must be one of ${[...SEARCH_MODES, 'baselines'].join(', ')}, got "${mode}"`);
}

/** The queries to evaluate, and those to replay as feedback first (none without --feedback / --feedback-split). */
function feedbackQueries(queries: LabelledQuery[], options: FeedbackOptions): { queries: LabelledQuery[]; feedback?: LabelledQuery[] } {
  if (options.feedback !== undefined && options.feedbackSplit) throw new StartupError('use either --feedback or --feedback-split, not both');
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
