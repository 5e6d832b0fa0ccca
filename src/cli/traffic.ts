/** `toolrouter tune --from-traffic`: the grid evaluated by a running service on its own traffic labels. */
import { StartupError } from './startup.js';

export interface TrafficTuneOptions {
  /** The running service (its base URL). */
  url: string;
  /** Only searches at or after this time (ISO 8601). */
  since?: string;
  steps: number;
  /** The admin key; default ADMIN_KEY from the environment. */
  key?: string;
  /** Also apply the best setting (PUT /v1/search/settings). */
  apply?: boolean;
}

interface EvalRow {
  fusion: string;
  weights: { bm25: number; vector: number };
  n: number;
  recallAt1: number;
  recallAt5: number;
  mrr: number;
}

interface TrafficEval {
  source: { labels: number; first: string; last: string };
  current: EvalRow;
  best: EvalRow;
  rows: EvalRow[];
  skipped: unknown[];
  min_scores: ({ min_score: number } & Omit<EvalRow, 'fusion' | 'weights'>)[];
}

/**
 * Asks the service to evaluate its traffic labels (POST /v1/eval {from: "traffic"}): each answered search labelled by the
 * tool then called. Run against the service, not a file: the labels, catalog and index are the live ones.
 */
export async function runTuneFromTraffic(options: TrafficTuneOptions, print: (line: string) => void = console.log): Promise<void> {
  const key = options.key ?? process.env.ADMIN_KEY;
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) };
  const base = options.url.replace(/\/+$/, '');
  const body = { from: 'traffic', ...(options.since ? { since: options.since } : {}), grid: { steps: options.steps } };
  const answer = await request(`${base}/v1/eval`, { method: 'POST', headers, body: JSON.stringify(body) });
  const result = answer as TrafficEval;
  const { source } = result;
  print(`traffic: ${source.labels} labels (answered searches) from ${source.first} to ${source.last}; ${result.skipped.length} name tools no longer in the catalog`);
  print(['setting', 'n', 'R@1', 'R@5', 'MRR'].join('\t'));
  for (const row of result.rows) print([`${row.fusion} bm25=${row.weights.bm25} vector=${row.weights.vector}`, row.n, pct(row.recallAt1), pct(row.recallAt5), row.mrr.toFixed(3)].join('\t'));
  print(`current: ${setting(result.current)} (R@5 ${pct(result.current.recallAt5)}, MRR ${result.current.mrr.toFixed(3)})`);
  print(`best: ${setting(result.best)} (R@5 ${pct(result.best.recallAt5)}, MRR ${result.best.mrr.toFixed(3)})`);
  print(`min_score: ${result.min_scores.map((cut) => `${cut.min_score} → R@5 ${pct(cut.recallAt5)}`).join(', ')}`);
  if (options.apply) {
    await request(`${base}/v1/search/settings`, { method: 'PUT', headers, body: JSON.stringify({ weights: result.best.weights, fusion: result.best.fusion }) });
    print(`applied: ${setting(result.best)}`);
  }
}

async function request(url: string, init: RequestInit): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw new StartupError(`cannot reach ${url}: ${(error as Error).message} (is the service running? give its address with --url)`);
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const message = (parsed as { error?: { message?: string } } | undefined)?.error?.message ?? text.slice(0, 200);
    throw new StartupError(`${url} answered ${response.status}: ${message}`);
  }
  return parsed;
}

function setting(row: Pick<EvalRow, 'fusion' | 'weights'>): string {
  return `fusion=${row.fusion} weights={bm25: ${row.weights.bm25}, vector: ${row.weights.vector}}`;
}

function pct(value: number): string {
  return `${(value * 100).toFixed(1)}%`;
}
