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
  if (engine && (!only || only === 'hybrid')) {
    // What a caller gets by default: hybrid cut at the configured min_score, so an answer dropped by the cut-off counts
    // as a miss (issue 42: the cut-off removed right answers).
    // The configured one, or the embedding model's calibration's (SearchService.settings).
    const minScore = engine.search.settings.minScore;
    const result = await withProgress('default', queries.length, (onProgress) =>
      evaluate(
        // No minScore in the request: a request's own drops each hit, the default cut judges the query.
        async (query) => (await engine.search.search({ query, mode: 'hybrid', topK: RANKED_DEPTH })).results.map((hit) => hit.tool.name),
        queries,
        { onProgress },
      ),
    );
    rows.push(row(`toolrouter hybrid at min_score ${minScore}`, result));
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
      const { results } = await engine.search.search({ query, topK: 5 });
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
  /** The shared datasets directory (MetaTool, LiveMCPBench, everyday). */
  datasets: string;
  /** The project's fixtures directory (catalog.json, queries.jsonl, livemcpbench-*.jsonl). */
  fixtures: string;
  /** Report with the shipped models instead of fitting new ones. */
  shipped?: boolean;
  /** Only these sets (comma-separated: fixture, livemcpbench, everyday, metatool). */
  sets?: string;
}

/**
 * `toolrouter calibrate`: for the configured embedding model, fits the calibrated score on one abstention split of
 * every set (each catalog with half its servers removed) and reports on the other, in both directions; fits how much
 * learned feedback raises the estimate; and picks the default min_score on the fit half's queries over the whole
 * catalogs, as the highest threshold costing at most RECALL_BUDGET of R@5 on every set (issue 48). The same is done
 * for the generic models (no absolute cosine), used for embedding models without a calibration of their own. The
 * reported R@5 loss is on the other half's queries (BENCHMARKS.md, "Calibrated scores").
 */
export async function runCalibrate(options: CalibrateOptions): Promise<void> {
  const { join } = await import('node:path');
  const { existsSync } = await import('node:fs');
  const calibrate = await import('../eval/calibrate.js');
  const { calibrationFor, GENERIC_CALIBRATION, GENERIC_FEATURES, MODE_FEATURES } = await import('../search/calibration.js');
  const livemcpbench = join(options.datasets, 'livemcpbench', 'tools.json');
  const all = [
    {
      name: 'fixture',
      catalog: join(options.fixtures, 'catalog.json'),
      queries: [join(options.fixtures, 'queries.jsonl')],
      descriptions: join(options.fixtures, 'sources.json'),
    },
    {
      name: 'livemcpbench',
      catalog: livemcpbench,
      queries: [join(options.fixtures, 'livemcpbench-queries.jsonl'), join(options.fixtures, 'livemcpbench-agent-queries.jsonl')],
    },
    { name: 'everyday', catalog: livemcpbench, queries: [join(options.datasets, 'everyday', 'queries.jsonl')] },
    { name: 'metatool', catalog: join(options.datasets, 'metatool'), queries: [join(options.datasets, 'metatool', 'queries.csv')] },
  ];
  const only = options.sets?.split(',').map((name) => name.trim());
  const sets = all.filter((set) => !only || only.includes(set.name));
  const config = evalConfig();
  type Hits = Awaited<ReturnType<typeof calibrate.collectHits>>;
  // Hits per split (0, 1), set and mode; and each set's queries over its whole catalog (hybrid), by query parity.
  const hitsBySplit: Map<string, Hits>[] = [new Map(), new Map()];
  const wholeByHalf: Map<string, Hits>[] = [new Map(), new Map()];
  const loaded: { name: string; sources: EvalSource[]; queries: LabelledQuery[] }[] = [];
  let model = '';
  for (const set of sets) {
    const descriptions = 'descriptions' in set && set.descriptions && existsSync(set.descriptions) ? { descriptions: set.descriptions } : {};
    const sources = loadCatalogSources(set.catalog, descriptions);
    const units = calibrate.serverUnits(sources, config.catalog.separator);
    const queries = set.queries.flatMap((file) => loadQueries(file));
    loaded.push({ name: set.name, sources, queries });
    for (const half of [0, 1] as const) {
      const split = calibrate.abstentionSplit(units, queries, half);
      const engine = await createEngine(split.kept, { config });
      model = engine.embedder.modelId;
      for (const mode of calibrate.CALIBRATION_MODES) {
        const hits = await withProgress(`${set.name} ${mode}`, split.answerable.length + split.unanswerable.length, () =>
          calibrate.collectHits(engine, split, mode),
        );
        // Each set weighs the same in the fit, however many queries it has (MetaTool has a hundred times the others).
        for (const query of hits) query.weight = 100 / Math.max(1, hits.length);
        hitsBySplit[half]!.set(`${set.name} ${mode}`, hits);
      }
      console.error(`${set.name} half ${half}: ${split.kept.length} of ${units.length} servers kept, ${split.answerable.length} answerable, ${split.unanswerable.length} unanswerable`);
    }
    const engine = await createEngine(sources, { config });
    for (const half of [0, 1] as const) {
      const mine = queries.filter((_, i) => i % 2 === half);
      wholeByHalf[half]!.set(set.name, await calibrate.collectHits(engine, { kept: sources, answerable: mine, unanswerable: [] }, 'hybrid'));
    }
  }
  const pooled = (half: 0 | 1, mode: string) => sets.flatMap((set) => hitsBySplit[half]!.get(`${set.name} ${mode}`) ?? []);
  // Learned usage: every other query of each set with labelled paraphrases replayed as feedback, the rest searched.
  const feedbackHits = await collectFeedbackHits(loaded.filter((set) => set.name === 'metatool' || set.name === 'fixture'), config);
  const kinds = [
    { label: `model ${model}`, shipped: calibrationFor(model), features: MODE_FEATURES },
    { label: 'generic (no absolute cosine)', shipped: GENERIC_CALIBRATION, features: GENERIC_FEATURES },
  ];
  for (const kind of kinds) {
    for (const [fitHalf, reportHalf] of [[0, 1], [1, 0]] as const) {
      const fitted = Object.fromEntries(
        calibrate.CALIBRATION_MODES.map((mode) => [
          mode,
          options.shipped ? kind.shipped.models[mode] : calibrate.fitModel(pooled(fitHalf, mode), mode, undefined, kind.features[mode]),
        ]),
      ) as typeof GENERIC_CALIBRATION.models;
      if (!options.shipped && feedbackHits.length > 0) fitted.hybrid = calibrate.fitFeedbackWeight(feedbackHits, fitted.hybrid);
      // Chosen on the fit half's queries over the whole catalogs (every one answerable there), judged on the other half.
      const minScore = calibrate.thresholdWithinLoss(
        sets.map((set) => wholeByHalf[fitHalf]!.get(set.name) ?? []),
        fitted.hybrid,
      );
      const rows = sets.flatMap((set) =>
        calibrate.CALIBRATION_MODES.map((mode) => {
          const hits = hitsBySplit[reportHalf]!.get(`${set.name} ${mode}`) ?? [];
          const positive = hits.map((query) => query.answerable);
          const raw = hits.map((query) => query.rawTop);
          const calibrated = calibrate.topScores(hits, fitted[mode]);
          const atDefault = calibrate.atThreshold(calibrated, positive, minScore);
          const whole = wholeByHalf[reportHalf]!.get(set.name) ?? [];
          return {
            label: `${set.name} ${mode}`,
            answerable: positive.filter(Boolean).length,
            unanswerable: positive.filter((p) => !p).length,
            'AUC raw': calibrate.auc(raw, positive).toFixed(3),
            'AUC calibrated': calibrate.auc(calibrated, positive).toFixed(3),
            'away@95': pct(calibrate.atThreshold(calibrated, positive, calibrate.thresholdKeeping(calibrated, positive)).turnedAway),
            'away@min': pct(atDefault.turnedAway),
            'R@5 lost@min (whole catalog)': mode === 'hybrid' ? `${(calibrate.recallLoss(whole, fitted.hybrid, minScore) * 100).toFixed(2)} pt of ${whole.length}` : '',
          };
        }),
      );
      const label = `split ${fitHalf + 1}`;
      console.log(`\n== ${kind.label}: fitted on ${label}, reported on split ${reportHalf + 1}`);
      console.log(`models (${options.shipped ? 'shipped' : `fitted on ${label}`}):\n${JSON.stringify(fitted)}`);
      console.log(
        `min_score (the highest costing at most ${calibrate.RECALL_BUDGET * 100} pt of R@5 on each set's ${label} queries, whole catalogs): ${(Math.floor(minScore * 1000) / 1000).toFixed(3)}`,
      );
      if (feedbackHits.length > 0) {
        const learned = feedbackHits.filter((query) => query.relevant[0] && query.features[0]!.feedback > 0);
        const kept = (model: typeof fitted.hybrid) => learned.filter((query) => calibrate.topScores([query], model)[0]! >= minScore).length;
        const without = { ...fitted.hybrid, weights: { ...fitted.hybrid.weights, feedback: 0 } };
        console.log(`learned tools ranked first with feedback: ${learned.length}; scoring at least min_score: ${kept(fitted.hybrid)} (without the feedback term: ${kept(without)})`);
      }
      console.log(formatTable(rows));
    }
  }
}

/** Hybrid top hits of every other query after the rest were replayed as feedback, over each set's full catalog. */
async function collectFeedbackHits(
  sets: readonly { name: string; sources: EvalSource[]; queries: LabelledQuery[] }[],
  config: ReturnType<typeof evalConfig>,
) {
  const calibrate = await import('../eval/calibrate.js');
  const all: Awaited<ReturnType<typeof calibrate.collectHits>> = [];
  for (const set of sets) {
    const engine = await createEngine(set.sources, { config });
    const { feedback, evaluation } = splitForFeedback(set.queries);
    await withProgress(`${set.name} replay`, feedback.length, (onProgress) =>
      replayFeedback(engine.feedback!, feedback, (name) => engine.catalog.get(name) !== undefined, onProgress),
    );
    const hits = await withProgress(`${set.name} fb`, evaluation.length, () =>
      calibrate.collectHits(engine, { kept: set.sources, answerable: evaluation, unanswerable: [] }, 'hybrid'),
    );
    for (const query of hits) query.weight = 100 / Math.max(1, hits.length);
    all.push(...hits);
  }
  return all;
}
