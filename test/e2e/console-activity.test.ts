import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };
const MISS = 'book a table at an italian restaurant for friday';

/** The console's Activity view and traffic tuning in Chromium, fed by a real MCP client's searches and calls. */
describe('console: Activity view and tuning from traffic', { timeout: 5 * 60_000 }, () => {
  let browser: Browser;
  let api: RunningRouter;
  let client: Client;
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-console-activity-'));
  const search = (query: string) => client.callTool({ name: 'search_tools', arguments: { query } });

  before(async () => {
    browser = await launchChromium();
    api = await startRouter({ mcp: { search: true, callTimeoutMs: 30_000, servers: { every: EVERYTHING } } });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
    client = new Client({ name: 'activity-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`)));
    await search('add two numbers and return their sum');
    await client.callTool({ name: 'call_tool', arguments: { name: 'every__get-sum', arguments: { a: 1, b: 2 } } });
    await search(MISS);
    await search(MISS);
    await api.router.analytics!.flush();
  });

  after(async () => {
    await client?.close().catch(() => {});
    await browser?.close();
    await api?.close();
    if (!process.env.KEEP_SCREENSHOTS) rmSync(dir, { recursive: true, force: true });
  });

  const overflow = (page: Page) => page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth') as Promise<number>;

  for (const width of [1280, 390]) {
    it(`at ${width} px: searches as they arrive, misses grouped, tools most called and never found, nothing off screen`, async (t) => {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      try {
        await page.goto(`${api.url}/console/`);
        const rows = page.locator('[data-testid="activity-searches"] tbody tr');
        await page.locator('[data-testid="activity-searches"] td[data-called="every__get-sum"]').waitFor();
        const before = await rows.count();
        assert.ok(before >= 3);
        const miss = page.locator('[data-testid="activity-misses"] tbody tr', { hasText: MISS });
        assert.equal(await miss.locator('td.num').textContent(), '2');
        assert.equal(await page.locator('[data-testid="activity-top-tools"] tbody tr').first().locator('td').first().textContent(), 'every__get-sum');
        assert.ok((await page.locator('[data-testid="activity-unused"] li').count()) > 0);
        assert.equal(await page.locator('[data-count="answered"]').textContent(), '1');
        // A search made while the page is open shows up on the next poll, marked as new.
        const fresh = `echo this message back ${width}`;
        await search(fresh);
        await page.locator('[data-testid="activity-searches"] tr.fresh', { hasText: fresh }).waitFor({ timeout: 15_000 });
        assert.equal(await rows.count(), before + 1);
        const file = path.join(dir, `activity-${width}.png`);
        await page.locator('#activity').screenshot({ path: file });
        t.diagnostic(`screenshot ${file}`);
        assert.ok((await overflow(page)) <= 0, `the page scrolls sideways at ${width} px`);
        const offScreen = await page.evaluate(`[...document.querySelectorAll('#activity td, #activity th')].filter((cell) => cell.getBoundingClientRect().right > window.innerWidth + 1 && cell.offsetParent !== null).length`);
        assert.equal(offScreen, 0, 'every visible cell of the Activity view is on screen');
      } finally {
        await page.close();
      }
    });
  }

  it('Tuning evaluates on traffic, says how many labels from when, and applies the chosen setting', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await page.goto(`${api.url}/console/`);
      await page.locator('#run-traffic-eval').click();
      const status = page.locator('[data-testid="eval-status"]');
      await page.locator('[data-testid="eval-best"]').waitFor();
      assert.match((await status.textContent()) ?? '', /traffic: 1 labels, from .+ to .+/);
      assert.match((await page.locator('[data-testid="eval-min-scores"]').textContent()) ?? '', /0\.075 → Recall@5/);
      await page.locator('[data-testid="eval-table"] tbody tr[data-fusion="rrf"][data-bm25="0.3"] button').click();
      await page.locator('[data-testid="settings-status"]', { hasText: 'applied' }).waitFor();
      const settings = (await api.request('GET', '/v1/search/settings')).body;
      assert.equal(settings.fusion, 'rrf');
      assert.equal(settings.weights.bm25, 0.3);
    } finally {
      await page.close();
    }
  });
});
