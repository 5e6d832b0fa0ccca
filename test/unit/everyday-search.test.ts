import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Tool } from '../../src/catalog/types.js';
import { loadConfig } from '../../src/config/config.js';
import { loadCatalogFile } from '../../src/eval/datasets.js';
import { createEngine, type Engine } from '../../src/eval/engine.js';
import { adaptiveWeights, DEFAULT_ADAPTIVE_FUSION } from '../../src/search/fusion.js';
import { DEFAULT_CALIBRATION } from '../../src/search/calibration.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const tool = (name: string, description: string): Tool => ({ name, description, inputSchema: { type: 'object', properties: {} } });
const config = () => loadConfig({ TOOLROUTER_CONFIG: '' });

/** Issue 42: everyday requests meet their tools; each fusion signal counts as far as its evidence goes; learned usage survives min_score. */
describe('everyday search (issue 42)', () => {
  describe('a brand typed with capitals', () => {
    let engine: Engine;
    before(async () => {
      engine = await createEngine(
        [
          tool('git__git_init', 'Initialize a new git repository in a directory'),
          tool('git__git_status', 'Show the working tree status of a git repository'),
          tool('git__git_log', 'Show the commit log of a git repository'),
          tool('git__git_diff', 'Show changes between commits of a git repository'),
          tool('git__git_commit', 'Record changes to the git repository'),
          tool('trending__popular_repositories', 'Lists the repositories GitHub users starred most this week'),
          tool('trending__popular_developers', 'Lists the developers whose projects gained the most stars this week'),
        ],
        { config: config() },
      );
    });

    it('ranks like the same word in lower case, not like every tool that mentions git', async () => {
      for (const query of ['what is hot on GitHub', 'what is hot on github']) {
        for (const mode of ['bm25', 'hybrid'] as const) {
          const { results } = await engine.search.search({ query, mode, minScore: 0 });
          assert.equal(results[0]?.tool.name, 'trending__popular_repositories', `${mode}: ${query} → ${results.map((hit) => hit.tool.name).join(', ')}`);
        }
      }
    });
  });

  describe('fusion weighs each signal by its evidence', () => {
    const hits = (...scores: number[]) => scores.map((score, i) => ({ name: `t${i}`, score }));
    const decisive = hits(0.9, 0.5, 0.45, 0.4, 0.4, 0.35, 0.35, 0.3, 0.3, 0.3);
    const base = { bm25: 0.6, vector: 0.4 };

    it('scales BM25 down when its top candidate covers little of the query, and leaves it when it covers enough', () => {
      const thin = [{ name: 'a', score: 3.35, coverage: 0.1 }];
      const scaled = adaptiveWeights(decisive, base, DEFAULT_ADAPTIVE_FUSION, thin);
      assert.equal(scaled.vector, 0.4);
      assert.ok(Math.abs(scaled.bm25 - 0.6 * (0.1 / DEFAULT_ADAPTIVE_FUSION.lexicalCoverage)) < 1e-12, String(scaled.bm25));
      const covered = [{ name: 'a', score: 80, coverage: 0.7 }];
      assert.deepEqual(adaptiveWeights(decisive, base, DEFAULT_ADAPTIVE_FUSION, covered), base);
      // Only the top candidate's coverage counts: a stray full match further down does not restore the weight.
      assert.equal(adaptiveWeights(decisive, base, DEFAULT_ADAPTIVE_FUSION, [...thin, { name: 'b', score: 1, coverage: 1 }]).bm25, scaled.bm25);
    });

    it('leaves weights a caller set to 0 alone, and moves no weight to a vector ranking that is no surer', () => {
      const thin = [{ name: 'a', score: 1, coverage: 0.05 }];
      assert.deepEqual(adaptiveWeights(decisive, { bm25: 1, vector: 0 }, DEFAULT_ADAPTIVE_FUSION, thin), { bm25: 1, vector: 0 });
      assert.deepEqual(adaptiveWeights(decisive, { bm25: 0, vector: 1 }, DEFAULT_ADAPTIVE_FUSION, thin), { bm25: 0, vector: 1 });
      // Both thin: a flat vector top has no evidence to take BM25's place, so BM25 keeps its weight and the vector's falls.
      const flat = hits(...new Array(10).fill(0.4));
      assert.deepEqual(adaptiveWeights(flat, base, DEFAULT_ADAPTIVE_FUSION, thin), { bm25: 0.6, vector: 0 });
      // Partly sure (margin (0.6 − 0.5) / 0.5 = 0.2 of the 0.3 that counts fully): BM25 gives way by that share of
      // what its coverage asks, and the vector weight falls by the rest.
      const partly = hits(0.6, ...new Array(9).fill(0.5));
      const trust = 0.2 / DEFAULT_ADAPTIVE_FUSION.vectorMargin;
      const weighed = adaptiveWeights(partly, base, DEFAULT_ADAPTIVE_FUSION, thin);
      assert.ok(Math.abs(weighed.bm25 - 0.6 * (1 - (1 - 0.05 / DEFAULT_ADAPTIVE_FUSION.lexicalCoverage) * trust)) < 1e-12, JSON.stringify(weighed));
      assert.ok(Math.abs(weighed.vector - 0.4 * trust) < 1e-12, JSON.stringify(weighed));
      assert.deepEqual(adaptiveWeights(flat, base, { ...DEFAULT_ADAPTIVE_FUSION, lexicalCoverage: 0 }, thin), { bm25: 0.6, vector: 0 });
      assert.deepEqual(adaptiveWeights(decisive, base, { ...DEFAULT_ADAPTIVE_FUSION, enabled: false }, thin), base);
    });
  });

  describe('learned usage enters the calibrated score', () => {
    let engine: Engine;
    before(async () => {
      engine = await createEngine(loadCatalogFile(path.join(REPO_ROOT, 'test/fixtures/catalog.json')), { config: config() });
    });

    it('a tool three events tied to requests like this one survives the default min_score', async () => {
      const query = 'let the team know the build broke';
      const minScore = engine.search.settings.minScore!;
      const before = await engine.search.search({ query, topK: 10, minScore: 0 });
      const unlearned = before.results.find((hit) => hit.tool.name === 'slack__post_message');
      // Requests the feedback signal counts as like this one (cosine 0.95, 0.83, 0.63 with the offline model, over
      // feedback.minSimilarity 0.6). The three this test used before ("tell the team the build is done", "let the team
      // know the release shipped", "tell the team the tests broke") were 0.66, 0.36 and 0.51: one counted, and the
      // learned tool passed min_score only because the calibrated model of then scored every weak hit near 0.1, as it
      // did a query no tool fits (chat-search-tool.test.ts).
      for (const said of ['tell the team the build broke', 'let the team know the build failed', 'let the team know the tests broke']) {
        await engine.feedback!.record({ query: said, tool: 'slack__post_message', relevant: true, surface: 'replay' });
      }
      const { results } = await engine.search.search({ query, explain: true });
      const learned = results.find((hit) => hit.tool.name === 'slack__post_message');
      assert.ok(learned, `kept at min_score ${minScore}: ${results.map((hit) => `${hit.tool.name} ${hit.score.toFixed(3)}`).join(', ')}`);
      assert.ok(learned.features!.feedback > 0, 'the feedback signal reached the calibrated score');
      assert.ok(learned.score >= minScore);
      assert.ok(unlearned === undefined || learned.score > unlearned.score, `${unlearned?.score} → ${learned.score}`);
      // The shipped hybrid model reads feedback; bm25 and vector modes have none to read.
      assert.ok(DEFAULT_CALIBRATION.hybrid.weights.feedback > 0);
      assert.equal(DEFAULT_CALIBRATION.bm25.weights.feedback, 0);
    });
  });

  describe('a tool taught by explicit feedback shows at default settings (issue 48)', () => {
    let api: RunningRouter;
    before(async () => {
      api = await startRouter();
    });
    after(async () => {
      await api?.close();
    });

    it('three POST /v1/feedback events for paraphrases put Slack_PostMessage in the default answer, as without the cut', async () => {
      const catalog = [
        tool('Slack_PostMessage', 'Post a message to a Slack channel'),
        tool('Gmail_SendEmail', 'Send an email message'),
        tool('GitHub_CreateIssue', 'Create an issue in a GitHub repository'),
        tool('CI_GetBuildStatus', 'Get the status of the latest build: passed or broke'),
        tool('Calendar_CreateEvent', 'Create a calendar event'),
        tool('Drive_UploadFile', 'Upload a file to Google Drive'),
      ];
      assert.equal((await api.request('PUT', '/v1/catalog/sources/work', { tools: catalog })).status, 200);
      await api.indexed();
      for (const query of ['tell the team the build is done', 'let the team know the release shipped', 'tell the team the tests broke']) {
        assert.equal((await api.post('/v1/feedback', { query, tool: 'Slack_PostMessage' })).status, 201);
      }
      const query = 'let the team know the build broke';
      const names = (body: { results: { name: string; score: number }[] }) => body.results.map((hit) => `${hit.name} ${hit.score.toFixed(3)}`);
      const uncut = (await api.post('/v1/tools/search', { query, min_score: 0 })).body;
      const learned = uncut.results.findIndex((hit: { name: string }) => hit.name === 'Slack_PostMessage');
      assert.ok(learned >= 0 && learned < 5, `without the cut: ${names(uncut).join(', ')}`);
      // Ranked below a surer hit, its own estimate is low (under min_score before issue 48, which hid it); the default
      // cut judges the query, so the answer is the ranking's top 5.
      const answer = (await api.post('/v1/tools/search', { query })).body;
      assert.deepEqual(names(answer), names(uncut), `at default settings: ${names(answer).join(', ')}`);
      assert.ok(answer.results[learned].scores.feedback > 0, 'the learned tool carries its feedback signal');
    });
  });
});

