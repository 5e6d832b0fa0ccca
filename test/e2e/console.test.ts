import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { LabelledQuery } from '../../src/catalog/types.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { loadConfig } from '../../src/config/config.js';
import { createEngine } from '../../src/eval/engine.js';
import { tune } from '../../src/eval/tune.js';
import { CHROMIUM, launchChromium } from '../helpers/browser.js';
import { stdioFixtureServer } from '../helpers/mcp.js';
import { startHttpFixture } from '../fixtures/mcp/http-server.js';
import { startOAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { eventually } from '../helpers/processes.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

const QUERIES_FILE = path.join(REPO_ROOT, 'test/fixtures/queries.jsonl');
const pct = (value: number) => `${(value * 100).toFixed(1)}%`;

/** Polls a check in the test process (the page re-renders asynchronously), failing with the last value seen. */
async function until<T>(check: () => Promise<T>, accept: (value: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await check();
    if (accept(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what}: not seen within ${timeoutMs} ms; last value: ${JSON.stringify(last)}`);
}

// Its own test, so a missing browser is a counted failure with the fix in its message, not only cancelled tests.
it('Chromium is installed for the console tests', () => {
  assert.ok(existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}: install it with "apt-get install -y chromium" (.ci/run does) or set CHROMIUM_PATH`);
});

/**
 * The web console end to end: a real toolrouter on the fixture catalog, the page in Debian's headless Chromium.
 * Expected values come from the API and the eval code, never from the page itself.
 */
describe('web console (headless Chromium)', () => {
  let api: RunningRouter;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  const shownNames = (target = page) => target.locator('#results li').evaluateAll((items) => items.map((item) => item.getAttribute('data-name')));
  const apiNames = async (body: Record<string, unknown>) => {
    const response = await api.post('/v1/tools/search', { mode: 'hybrid', ...body });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body.results as any[];
  };
  const setSlider = async (bm25: number, vector: number) => {
    await page.locator('#bm25-weight').fill(String(bm25));
    await page.locator('#vector-weight').fill(String(vector));
  };

  before(async () => {
    // Launched first: without Chromium the suite fails here, with the install command in the message.
    browser = await launchChromium();
    api = await startRouter();
    const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${api.url}/console/`);
  });

  after(async () => {
    await browser?.close();
    await api?.close();
  });

  it('serves the page and its files at /console with a restrictive content security policy', async () => {
    for (const route of ['/console', '/console/']) {
      const response = await fetch(api.url + route);
      assert.equal(response.status, 200, route);
      assert.match(response.headers.get('content-type') ?? '', /text\/html/);
      assert.match(response.headers.get('content-security-policy') ?? '', /script-src 'self'/);
      assert.match(await response.text(), /<title>toolrouter console<\/title>/);
    }
    const script = await fetch(`${api.url}/console/app.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /javascript/);
    assert.equal((await fetch(`${api.url}/console/missing.js`)).status, 404);
  });

  it('shows the catalog: sources, tool count, catalog and index hash, index state, upstreams', async () => {
    const catalog = (await api.request('GET', '/v1/catalog')).body;
    const status = (await api.request('GET', '/v1/index/status')).body;
    await until(() => page.getByTestId('tool-count').textContent(), (text) => text === String(fixtureTools().length), 'tool count');
    assert.equal(await page.getByTestId('catalog-hash').textContent(), catalog.catalogHash);
    assert.equal(await page.getByTestId('index-hash').textContent(), status.indexedHash);
    assert.equal(await page.getByTestId('index-state').textContent(), 'ready');
    assert.equal(await page.getByTestId('index-model').textContent(), status.model);
    const sources = await page.locator('[data-testid="sources"] tbody tr').allTextContents();
    assert.deepEqual(sources, [`fixture${fixtureTools().length}`]);
    assert.match(await page.locator('[data-testid="upstreams"] tbody').textContent() ?? '', /none configured/);
  });

  it('search results appear for a query, with the API\'s scores, and a tool expands to its full definition', async () => {
    const query = 'send a message to the team channel';
    await page.locator('#query').fill(query);
    const expected = await apiNames({ query, top_k: 10 });
    assert.ok(expected.length > 0);
    await page.locator(`#results[data-query="${query}"]`).waitFor();
    assert.deepEqual(await until(() => shownNames(), (shown) => JSON.stringify(shown) === JSON.stringify(expected.map((hit) => hit.name)), 'API order'), expected.map((hit) => hit.name));

    const first = page.locator('#results li').first();
    assert.equal(await first.locator('[data-signal="fused"] .bar-value').textContent(), expected[0].score.toFixed(3));
    assert.equal(await first.locator('[data-signal="bm25"] .bar-value').textContent(), expected[0].scores.bm25.toFixed(2));
    assert.equal(await first.locator('[data-signal="vector"] .bar-value').textContent(), expected[0].scores.vector.toFixed(3));
    // BM25 bars are relative to the list's best BM25 score: the top lexical match fills its bar.
    const bm25Widths = await page.locator('[data-signal="bm25"] .fill').evaluateAll((fills) => fills.map((fill) => fill.getAttribute('style')));
    assert.ok(bm25Widths.includes('width: 100%;'), JSON.stringify(bm25Widths));

    await first.locator('details.definition summary').click();
    const definition = JSON.parse((await first.getByTestId('definition').textContent()) ?? '');
    const { score: _score, scores: _scores, ...tool } = expected[0];
    assert.deepEqual(definition, tool);
    assert.ok(definition.inputSchema, 'the full definition includes the input schema');
  });

  it('moving the weight sliders re-ranks live, and the fusion switch is sent', async () => {
    // A query whose BM25-only and vector-only rankings differ, found through the API rather than assumed.
    const queries = readFileSync(QUERIES_FILE, 'utf8').split('\n').filter(Boolean).map((line) => (JSON.parse(line) as LabelledQuery).query);
    let chosen: { query: string; lexical: string[]; semantic: string[] } | undefined;
    for (const query of queries) {
      const lexical = (await apiNames({ query, top_k: 5, weights: { bm25: 1, vector: 0 } })).map((hit) => hit.name);
      const semantic = (await apiNames({ query, top_k: 5, weights: { bm25: 0, vector: 1 } })).map((hit) => hit.name);
      // Single-signal weights score lower on the calibrated scale, so min_score may leave fewer than 5 of either.
      if (lexical.length >= 2 && semantic.length >= 2 && lexical[0] !== semantic[0]) {
        chosen = { query, lexical, semantic };
        break;
      }
    }
    assert.ok(chosen, 'no fixture query ranks differently by BM25 and by vectors');

    await page.locator('#top-k').fill('5');
    await page.locator('#query').fill(chosen.query);
    await setSlider(1, 0);
    assert.deepEqual(await until(() => shownNames(), (shown) => JSON.stringify(shown) === JSON.stringify(chosen.lexical), 'BM25-only order'), chosen.lexical);
    await setSlider(0, 1);
    assert.deepEqual(await until(() => shownNames(), (shown) => JSON.stringify(shown) === JSON.stringify(chosen.semantic), 'vector-only order'), chosen.semantic);
    assert.equal(await page.locator('#bm25-value').textContent(), '0.00');

    await setSlider(0.5, 0.5);
    const sent = page.waitForRequest((request) => request.url().endsWith('/v1/tools/search') && request.postDataJSON()?.fusion === 'rrf');
    await page.locator('input[name="fusion"][value="rrf"]').check();
    assert.deepEqual((await sent).postDataJSON().weights, { bm25: 0.5, vector: 0.5 });
    const rrf = (await apiNames({ query: chosen.query, top_k: 5, weights: { bm25: 0.5, vector: 0.5 }, fusion: 'rrf' })).map((hit) => hit.name);
    assert.deepEqual(await until(() => shownNames(), (shown) => JSON.stringify(shown) === JSON.stringify(rrf), 'RRF order'), rrf);
  });

  it('an evaluation of an uploaded file shows the numbers the eval code computes, and apply changes the server defaults', async () => {
    await page.locator('#queries-file').setInputFiles(QUERIES_FILE);
    await until(() => page.locator('#queries-text').inputValue(), (text) => text.length > 0, 'file read into the text box');
    await page.locator('#grid-steps').selectOption('5');
    await page.locator('#run-eval').click();
    const rows = page.locator('[data-testid="eval-table"] tbody tr');
    await until(() => rows.count(), (count) => count === 12, 'evaluation table');

    const queries = readFileSync(QUERIES_FILE, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as LabelledQuery);
    const engine = await createEngine(fixtureTools(), { config: loadConfig({}), embedder: api.router.embedder });
    const expected = await tune(engine, queries, { steps: 5 });
    const shown = await rows.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 6).map((td) => td.textContent)));
    assert.deepEqual(
      shown,
      expected.rows.map((row) => [row.fusion, String(row.weights.bm25), String(row.weights.vector), pct(row.recallAt1), pct(row.recallAt5), row.mrr.toFixed(3)]),
    );
    const best = await page.getByTestId('eval-best').textContent();
    assert.match(best ?? '', new RegExp(`${expected.best.fusion}, bm25 ${expected.best.weights.bm25} / vector ${expected.best.weights.vector}.*MRR ${expected.best.mrr.toFixed(3)}`));
    assert.equal(await page.locator('[data-testid="eval-table"] tr.best').count(), 1);
    // One chart per fusion method, each with a line per metric.
    assert.equal(await page.locator('svg.chart').count(), 2);
    assert.equal(await page.locator('svg.chart[data-fusion="weighted"] polyline').count(), 3);

    await page.getByTestId('apply-best').click();
    await until(() => page.getByTestId('settings-status').textContent(), (text) => /^applied/.test(text ?? ''), 'apply status');
    const settings = (await api.request('GET', '/v1/search/settings')).body;
    assert.deepEqual(
      { weights: settings.weights, fusion: settings.fusion, source: settings.source },
      { weights: expected.best.weights, fusion: expected.best.fusion, source: 'applied' },
    );
    // The playground now starts from the applied defaults.
    assert.equal(Number(await page.locator('#bm25-weight').inputValue()), expected.best.weights.bm25);

    await page.locator('#reset-settings').click();
    await until(async () => (await api.request('GET', '/v1/search/settings')).body.source, (source) => source === 'config', 'reset');
    assert.deepEqual(pageErrors, []);
  });

  it('lists upstream MCP servers with their state, tool count and last error', async () => {
    const gateway = await startRouter({
      mcp: { servers: { demo: stdioFixtureServer(), broken: { command: process.execPath, args: ['-e', 'process.exit(3)'] } } },
    });
    const other = await browser.newPage();
    try {
      const servers = await eventually(
        async () => (await gateway.request('GET', '/v1/mcp/servers')).body.servers as any[],
        (list) => list.some((server) => server.name === 'demo' && server.state === 'connected') && list.some((server) => server.name === 'broken' && server.lastError),
      );
      await other.goto(`${gateway.url}/console/`);
      const rows = other.locator('[data-testid="upstreams"] tbody tr');
      await until(() => rows.count(), (count) => count === 2, 'upstream rows');
      for (const server of servers) {
        const cells = await rows.filter({ hasText: server.name }).locator('td').allTextContents();
        // The broken server keeps retrying, so its state flips between down and connecting while the page loads.
        const states = server.name === 'broken' ? ['down', 'connecting'] : [server.state];
        assert.deepEqual([cells[0], cells[1], cells[3]], [server.name, server.transport, String(server.tools)]);
        assert.ok(states.includes(cells[2] ?? ''), `${server.name} shown as ${cells[2]}`);
      }
      const demo = servers.find((server) => server.name === 'demo');
      assert.ok(demo.tools > 0);
      assert.match((await rows.filter({ hasText: 'broken' }).locator('td').nth(4).textContent()) ?? '', /\S/);
      const sources = await other.locator('[data-testid="sources"] tbody tr').allTextContents();
      assert.ok(sources.includes(`demo${demo.tools}`), JSON.stringify(sources));
    } finally {
      await other.close();
      await gateway.close();
    }
  });

  it('Servers: add an HTTP server, see its state, revision and tools, reconnect and remove it; no horizontal overflow at 1280 and 390 px', async () => {
    const tracker = await startHttpFixture();
    const gateway = await startRouter({ mcp: { servers: { demo: stdioFixtureServer() } } });
    const other = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    other.on('pageerror', (error) => errors.push(error.message));
    try {
      await gateway.router.mcp.upstreams.settled();
      await other.goto(`${gateway.url}/console/`);
      const rows = other.locator('[data-testid="upstreams"] tbody tr');
      await until(() => rows.count(), (count) => count === 1, 'the configured server');
      // A server from the config file can be reconnected, not removed.
      assert.deepEqual(await rows.first().locator('button').allTextContents(), ['reconnect']);

      await other.locator('#server-name').fill('tracker');
      await other.locator('#server-url').fill(tracker.url);
      await other.locator('#server-header').fill('Authorization');
      await other.locator('#server-header-value').fill('Bearer console-secret');
      await other.locator('#add-server-button').click();
      const status = await eventually(
        async () => gateway.router.mcp.upstreams.statusOf('tracker'),
        (value) => value?.state === 'connected',
        15_000,
      );
      await other.locator('#refresh-servers').click();
      const row = other.locator('tr[data-server="tracker"]');
      await until(async () => (await row.locator('td').allTextContents()).slice(0, 8), (cells) => cells[2] === 'connected', 'tracker connected on the page');
      const cells = await row.locator('td').allTextContents();
      assert.deepEqual(cells.slice(0, 7), ['tracker', 'http', 'connected', String(status!.tools), '', status!.revision, 'runtime']);
      assert.equal(await other.locator('#server-header-value').inputValue(), '', 'the secret is not left in the form');
      assert.equal((await other.content()).includes('console-secret'), false);

      for (const width of [1280, 390]) {
        await other.setViewportSize({ width, height: 900 });
        // Read from the page's root element (the test's tsconfig has no DOM types).
        const overflow = await other.locator('html').evaluate((root: { scrollWidth: number; clientWidth: number }) => ({ scroll: root.scrollWidth, client: root.clientWidth }));
        assert.ok(overflow.scroll <= overflow.client, `no horizontal overflow at ${width} px: ${JSON.stringify(overflow)}`);
      }

      await row.locator('button[data-action="reconnect"]').click();
      await until(async () => other.locator('[data-testid="servers-status"]').textContent(), (text) => text === 'reconnect: tracker', 'reconnect done');
      await eventually(async () => gateway.router.mcp.upstreams.statusOf('tracker')?.state, (state) => state === 'connected', 15_000);
      await row.locator('button[data-action="remove"]').click();
      await until(() => rows.count(), (count) => count === 1, 'tracker removed');
      assert.equal(gateway.router.mcp.upstreams.statusOf('tracker'), undefined);
      assert.deepEqual(errors, []);
    } finally {
      await other.close();
      await gateway.close();
      await tracker.close();
    }
  });

  it('Servers: Connect authorizes an OAuth server in a new window, which lands on /oauth/callback; the server then lists its tools', async () => {
    const protectedServer = await startOAuthFixture();
    const gateway = await startRouter({ mcp: { servers: { linear: { url: protectedServer.url, auth: 'oauth' } }, reconnect: { initialMs: 50, maxMs: 400 }, startupWaitMs: 0 } });
    const other = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    other.on('pageerror', (error) => errors.push(error.message));
    try {
      await eventually(async () => gateway.router.mcp.upstreams.statusOf('linear')?.state, (state) => state === 'needs_authorization', 15_000);
      await other.goto(`${gateway.url}/console/`);
      const row = other.locator('tr[data-server="linear"]');
      await until(async () => (await row.locator('td').allTextContents())[2], (state) => state === 'needs_authorization', 'the server waits for authorization');
      assert.match((await row.locator('td').allTextContents())[4] ?? '', /^needs authorization \(never_connected\)/);
      assert.deepEqual(await row.locator('button').allTextContents(), ['connect', 'reconnect']);

      const popup = other.context().waitForEvent('page');
      await row.locator('button[data-action="connect"]').click();
      const authorization = await popup;
      // The fixture's authorization server approves at once and sends the window back to toolrouter's callback.
      await authorization.waitForURL((url) => url.pathname === '/oauth/callback', { timeout: 15_000 });
      assert.equal(new URL(authorization.url()).origin, gateway.url);
      const status = await eventually(async () => gateway.router.mcp.upstreams.statusOf('linear'), (value) => value?.state === 'connected', 15_000);
      assert.ok(status!.tools > 0, 'the protected server listed its tools');
      await until(async () => (await row.locator('td').allTextContents())[2], (state) => state === 'connected', 'connected on the page');
      assert.equal(protectedServer.counts().authorizations, 1);
      await authorization.close();
      assert.deepEqual(errors, []);
    } finally {
      await other.close();
      await gateway.close();
      await protectedServer.close();
    }
  });

  it('with ADMIN_KEY set: shows the 401 until a key is entered, then works with it', async () => {
    const adminKey = 'console-admin-key-0123456789';
    const guarded = await startRouter({ adminKey });
    await guarded.indexed();
    const other = await browser.newPage();
    try {
      await other.goto(`${guarded.url}/console/`);
      const catalogError = other.locator('[data-error="catalog"]');
      await catalogError.waitFor({ state: 'visible' });
      assert.equal(await catalogError.getAttribute('data-status'), '401');
      assert.match((await catalogError.textContent()) ?? '', /^401 Unauthorized \(unauthorized\): .*enter a valid API key/);
      assert.match((await other.locator('#banner').textContent()) ?? '', /401 Unauthorized/);

      await other.locator('#api-key').fill(adminKey);
      await other.locator('#api-key').dispatchEvent('change');
      await until(() => other.getByTestId('index-state').textContent(), (text) => text === 'ready', 'catalog with the key');
      assert.equal(await catalogError.isHidden(), true);
      assert.equal(await other.locator('#banner').isHidden(), true);
      assert.match((await other.getByTestId('defaults-note').textContent()) ?? '', /server defaults: weighted/);
    } finally {
      await other.close();
      await guarded.close();
    }
  });

  it('sends the key as a bearer token on every API request and shows 401 and 403 clearly', async () => {
    const keyed = await browser.newPage();
    try {
      const seen: { url: string; authorization: string | undefined }[] = [];
      keyed.on('request', (request) => {
        if (new URL(request.url()).pathname.startsWith('/v1/')) seen.push({ url: request.url(), authorization: request.headers().authorization });
      });
      await keyed.goto(`${api.url}/console/`);
      await keyed.locator('#api-key').fill('console-test-key-0123456789');
      await keyed.locator('#api-key').dispatchEvent('change');
      // Kept for the session: a reload sends it from the start.
      seen.length = 0;
      await keyed.reload();
      await until(() => keyed.getByTestId('tool-count').textContent(), (text) => text === String(fixtureTools().length), 'catalog after reload');
      assert.ok(seen.length >= 3, JSON.stringify(seen));
      assert.deepEqual(seen.filter((request) => request.authorization !== 'Bearer console-test-key-0123456789'), []);

      await keyed.route('**/v1/eval', (route) =>
        route.fulfill({ status: 401, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unauthorized', message: 'missing or unknown API key' } }) }),
      );
      await keyed.locator('#queries-text').fill('{"query": "read a file", "expected": ["fs__read_file"]}');
      await keyed.locator('#run-eval').click();
      const tuningError = keyed.locator('[data-error="tuning"]');
      await tuningError.waitFor({ state: 'visible' });
      assert.equal(await tuningError.getAttribute('data-status'), '401');
      assert.match((await tuningError.textContent()) ?? '', /401 Unauthorized \(unauthorized\): missing or unknown API key — enter a valid API key/);
      assert.match((await keyed.locator('#banner').textContent()) ?? '', /401 Unauthorized/);

      await keyed.route('**/v1/search/settings', (route) =>
        route.request().method() === 'PUT'
          ? route.fulfill({ status: 403, contentType: 'application/json', body: JSON.stringify({ error: { code: 'forbidden', message: 'admin key required' } }) })
          : route.continue(),
      );
      await keyed.unroute('**/v1/eval');
      await keyed.locator('#run-eval').click();
      await keyed.getByTestId('apply-best').click();
      await until(() => tuningError.getAttribute('data-status'), (status) => status === '403', '403 shown');
      assert.match((await tuningError.textContent()) ?? '', /403 Forbidden \(forbidden\): admin key required — .*admin key/);
      assert.equal((await api.request('GET', '/v1/search/settings')).body.source, 'config', 'nothing was applied');

      // A bad line is named by its line number before anything is sent.
      await keyed.locator('#queries-text').fill('{"query": "read a file", "expected": ["fs__read_file"]}\n\n{not json');
      await keyed.locator('#run-eval').click();
      await until(() => tuningError.textContent(), (text) => /line 3: invalid JSON/.test(text ?? ''), 'JSONL error');
    } finally {
      await keyed.close();
    }
  });
});
