/** `toolrouter eval` and `toolrouter tune`: retrieval quality on labelled queries. */
import cliProgress from 'cli-progress';
import type { LabelledQuery, Tool } from '../catalog/types.js';
import { FastMcpBm25, LiteLlmTokenOverlap } from '../eval/baselines.js';
import { loadCatalogSources, loadQueries, type EvalSource } from '../eval/datasets.js';
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

export interface CatalogOptions {
  catalog: string;
  queries: string;
  limit?: number;
  /** JSON server → description for a catalog of `server__tool` names (LiveMCPBench carries its own). */
  descriptions?: string;
  /** false (`--no-context`): leave sources undescribed, to measure what server context adds. */
  context?: boolean;
}

export interface EvalOptions extends FeedbackOptions, CatalogOptions {
  mode?: string;
  /** Also report tokens per search_tools answer (top 5, default min_score), full vs brief definitions. */
  tokens?: boolean;
}

export interface TuneOptions extends FeedbackOptions, CatalogOptions {
  steps: number;
}

export async function runEval(options: EvalOptions): Promise<void> {
  const only = parseMode(options.mode);
  const data = loadEvalData(options);
  const { tools } = data;
  const { queries, feedback } = feedbackQueries(data.queries, options);
  const modes: SearchMode[] = only && only !== 'baselines' ? [only] : ['bm25', 'vector', 'hybrid'];
  const rows: { label: string; n: number; 'R@1': string; 'R@5': string; MRR: string }[] = [];
  const engine = only === 'baselines' ? undefined : await createEngine(data.sources, { config: evalConfig() });
  for (const mode of engine ? modes : []) {
    const result = await withProgress(`${mode}`, queries.length, (onProgress) =>
      evaluate(
        async (query) => (await engine!.search.search({ query, mode, topK: RANKED_DEPTH, minScore: 0 })).results.map((hit) => hit.tool.name),
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
        async (query) => (await engine.search.search({ query, mode: 'hybrid', topK: RANKED_DEPTH, minScore: 0 })).results.map((hit) => hit.tool.name),
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
  if (engine && options.tokens) {
    const { countTokens } = await import('gpt-tokenizer');
    const { briefTool } = await import('../search/coverage.js');
    let full = 0;
    let brief = 0;
    let answered = 0;
    for (const { query } of queries) {
      const { results } = await engine.search.search({ query, topK: 5, minScore: evalConfig().search.minScore });
      if (results.length > 0) answered++;
      full += countTokens(JSON.stringify(results.map((hit) => ({ ...hit.tool, score: hit.score }))));
      brief += countTokens(JSON.stringify(results.map((hit) => ({ ...briefTool(hit.tool), score: hit.score }))));
    }
    const per = (total: number) => (total / queries.length).toFixed(0);
    console.log(`tokens per answer (top 5 at the default min_score, o200k_base): full ${per(full)}, brief ${per(brief)}; ${answered} of ${queries.length} queries answered`);
  }
}

export async function runTune(options: TuneOptions): Promise<void> {
  const data = loadEvalData(options);
  const { tools } = data;
  const { queries, feedback } = feedbackQueries(data.queries, options);
  const engine = await createEngine(data.sources, { config: evalConfig() });
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

function loadEvalData(options: CatalogOptions): { tools: Tool[]; sources: EvalSource[]; queries: LabelledQuery[] } {
  const { queries: queriesFile, limit } = options;
  const described = loadCatalogSources(options.catalog, options.descriptions === undefined ? {} : { descriptions: options.descriptions });
  const sources = options.context === false ? described.map(({ source, tools }) => ({ source, tools })) : described;
  const tools = sources.flatMap((source) => source.tools);
  const names = new Set(tools.map((tool) => tool.name));
  const all = loadQueries(queriesFile);
  const answerable = all.filter((query) => query.expected.some((name) => names.has(name)));
  const queries = answerable.slice(0, limit);
  const dropped = all.length - answerable.length;
  if (dropped > 0) console.error(`note: ${dropped} queries name no tool in the catalog and were skipped`);
  if (queries.length === 0) throw new Error('no labelled query names a tool of this catalog');
  return { tools, sources, queries };
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

export interface CalibrateOptions {
  /** The shared datasets directory (MetaTool, LiveMCPBench). */
  datasets: string;
  /** The project's fixtures directory (catalog.json, queries.jsonl, livemcpbench-*.jsonl). */
  fixtures: string;
  /** Report with the shipped models instead of fitting new ones. */
  shipped?: boolean;
  /** Only these sets (comma-separated: fixture, livemcpbench, metatool). */
  sets?: string;
}

/**
 * `toolrouter calibrate`: fits the calibrated score on the first abstention split of every set, reports AUC and the
 * share of unanswerable queries turned away on the second, and picks min_score (BENCHMARKS.md, "Calibrated scores").
 */
export async function runCalibrate(options: CalibrateOptions): Promise<void> {
  const { join } = await import('node:path');
  const { existsSync } = await import('node:fs');
  const calibrate = await import('../eval/calibrate.js');
  const { DEFAULT_CALIBRATION } = await import('../search/calibration.js');
  const all = [
    {
      name: 'fixture',
      catalog: join(options.fixtures, 'catalog.json'),
      queries: [join(options.fixtures, 'queries.jsonl')],
      descriptions: join(options.fixtures, 'sources.json'),
    },
    {
      name: 'livemcpbench',
      catalog: join(options.datasets, 'livemcpbench', 'tools.json'),
      queries: [join(options.fixtures, 'livemcpbench-queries.jsonl'), join(options.fixtures, 'livemcpbench-agent-queries.jsonl')],
    },
    { name: 'metatool', catalog: join(options.datasets, 'metatool'), queries: [join(options.datasets, 'metatool', 'queries.csv')] },
  ];
  const only = options.sets?.split(',').map((name) => name.trim());
  const sets = all.filter((set) => !only || only.includes(set.name));
  const config = evalConfig();
  type Hits = Awaited<ReturnType<typeof calibrate.collectHits>>;
  const fit = new Map<string, Hits>();
  const report: { set: string; mode: string; hits: Hits }[] = [];
  const fitBySet: Hits[] = [];
  for (const set of sets) {
    const descriptions = 'descriptions' in set && set.descriptions && existsSync(set.descriptions) ? { descriptions: set.descriptions } : {};
    const units = calibrate.serverUnits(loadCatalogSources(set.catalog, descriptions), config.catalog.separator);
    const queries = set.queries.flatMap((file) => loadQueries(file));
    for (const half of [0, 1] as const) {
      const split = calibrate.abstentionSplit(units, queries, half);
      const engine = await createEngine(split.kept, { config });
      for (const mode of calibrate.CALIBRATION_MODES) {
        const hits = await withProgress(`${set.name} ${mode}`, split.answerable.length + split.unanswerable.length, () =>
          calibrate.collectHits(engine, split, mode),
        );
        // Each set weighs the same in the fit, however many queries it has (MetaTool has a hundred times the others).
        for (const query of hits) query.weight = 100 / hits.length;
        if (half === 1) report.push({ set: set.name, mode, hits });
        else {
          fit.set(mode, [...(fit.get(mode) ?? []), ...hits]);
          if (mode === 'hybrid') fitBySet.push(hits);
        }
      }
      console.error(`${set.name} half ${half}: ${split.kept.length} of ${units.length} servers kept, ${split.answerable.length} answerable, ${split.unanswerable.length} unanswerable`);
    }
  }
  const models = Object.fromEntries(
    calibrate.CALIBRATION_MODES.map((mode) => [mode, options.shipped ? DEFAULT_CALIBRATION[mode] : calibrate.fitModel(fit.get(mode) ?? [], mode)]),
  ) as typeof DEFAULT_CALIBRATION;
  // min_score: on the fit split in hybrid (the default mode), the threshold keeping 95% of answerable queries, each
  // set weighing the same (MetaTool alone would otherwise decide it).
  const minScore = calibrate.weightedThresholdKeeping(
    fitBySet.map((hits) => calibrate.topScores(hits.filter((q) => q.answerable), models.hybrid)),
  );
  const rows = report.map(({ set, mode, hits }) => {
    const positive = hits.map((query) => query.answerable);
    const raw = hits.map((query) => query.rawTop);
    const calibrated = calibrate.topScores(hits, models[mode as keyof typeof models]);
    const keep95 = calibrate.thresholdKeeping(calibrated, positive);
    const rawKeep95 = calibrate.thresholdKeeping(raw, positive);
    const atDefault = calibrate.atThreshold(calibrated, positive, minScore);
    return {
      label: `${set} ${mode}`,
      answerable: positive.filter(Boolean).length,
      unanswerable: positive.filter((p) => !p).length,
      'AUC raw': calibrate.auc(raw, positive).toFixed(3),
      'away@95 raw': pct(calibrate.atThreshold(raw, positive, rawKeep95).turnedAway),
      'AUC calibrated': calibrate.auc(calibrated, positive).toFixed(3),
      'away@95': pct(calibrate.atThreshold(calibrated, positive, keep95).turnedAway),
      'kept@min': pct(atDefault.kept),
      'away@min': pct(atDefault.turnedAway),
    };
  });
  console.log(`models (${options.shipped ? 'shipped' : 'fitted on the first split'}):\n${JSON.stringify(models)}`);
  console.log(`min_score (keeps 95% of answerable hybrid queries on the first split): ${minScore.toFixed(3)}`);
  console.log(formatTable(rows));
}
