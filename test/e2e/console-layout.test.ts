import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { stdioFixtureServer } from '../helpers/mcp.js';
import { eventually } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

interface Layout {
  pageOverflow: number;
  tableWidth: number;
  revisionLines: number;
  offScreenButtons: number;
  /** Lines of the section's heading and of the table's caption: one each. */
  headingLines: number;
  lastErrors: string[];
  leftOut: string[];
}

/** Layout metrics of the servers section as laid out by Chromium (the screenshots are kept beside for people). */
async function layout(page: Page): Promise<Layout> {
  // A string, run in the page: the test's TypeScript has no DOM types.
  return (await page.evaluate(`(() => {
    const lines = (cell) => {
      if (!cell || !cell.textContent) return 0;
      const range = document.createRange();
      range.selectNodeContents(cell);
      return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
    };
    const rows = [...document.querySelectorAll('[data-testid="upstreams"] tbody tr[data-server]')];
    return {
      pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      tableWidth: document.querySelector('[data-testid="upstreams"]').getBoundingClientRect().width,
      revisionLines: Math.max(0, ...rows.map((row) => lines(row.querySelector('td[data-label="revision"]')))),
      headingLines: Math.max(lines(document.querySelector('#servers-title')), lines(document.querySelector('[data-testid="upstreams"] caption'))),
      offScreenButtons: [...document.querySelectorAll('#servers button')].filter((button) => button.getBoundingClientRect().right > window.innerWidth).length,
      lastErrors: rows.map((row) => row.querySelector('td.error-text')?.textContent ?? ''),
      leftOut: [...document.querySelectorAll('[data-testid="left-out"] li')].map((item) => item.textContent ?? ''),
    };
  })()`)) as Layout;
}

describe('console: the servers table at 1280 and 390 px', { timeout: 5 * 60_000 }, () => {
  let browser: Browser;
  let api: RunningRouter;
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-console-layout-'));

  before(async () => {
    browser = await launchChromium();
    const imported = path.join(dir, '.mcp.json');
    writeFileSync(imported, JSON.stringify({ mcpServers: { typo: { type: 'htp', url: 'http://127.0.0.1:9/mcp' } } }));
    // A server that answers (revision shown) and one nobody listens for (an error shown).
    const dead = await freePort();
    api = await startRouter({
      mcp: { import: [imported], servers: { files: stdioFixtureServer(), 'unreachable-server': { url: `http://127.0.0.1:${dead}/mcp` } }, reconnect: { initialMs: 60_000, maxMs: 60_000 } },
    });
    await eventually(
      async () => (await api.request('GET', '/v1/mcp/servers')).body as { servers: { name: string; state: string; lastError?: string }[] },
      (body) => body.servers.some((s) => s.name === 'files' && s.state === 'connected') && body.servers.some((s) => s.name === 'unreachable-server' && s.lastError),
      60_000,
    );
  });

  after(async () => {
    await browser?.close();
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px: no page overflow, buttons on screen, revision on one line, errors said once, left-out entries listed`, async (t) => {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      try {
        await page.goto(`${api.url}/console/`);
        await page.locator('[data-testid="upstreams"] tbody tr[data-server="files"]').waitFor();
        const file = path.join(dir, `servers-${width}.png`);
        await page.locator('#servers').screenshot({ path: file });
        const metrics = await layout(page);
        t.diagnostic(`${width} px: ${JSON.stringify(metrics)} (screenshot ${file})`);
        assert.ok(metrics.pageOverflow <= 0, `the page scrolls sideways by ${metrics.pageOverflow} px`);
        assert.equal(metrics.offScreenButtons, 0, 'every server button is on screen');
        assert.ok(metrics.tableWidth <= width, `the servers table is ${metrics.tableWidth} px wide`);
        assert.equal(metrics.revisionLines, 1, 'the revision (2025-11-25) is on one line');
        assert.equal(metrics.headingLines, 1, 'the heading and its button are on one line');
        for (const text of metrics.lastErrors) {
          const parts = text.split(': ');
          assert.ok(parts.every((part, i) => i === 0 || part !== parts[i - 1]), `an error repeats itself: ${text}`);
        }
        assert.ok(metrics.lastErrors.some((text) => text.length > 0), 'the unreachable server shows its error');
        assert.equal(metrics.leftOut.length, 1);
        assert.match(metrics.leftOut[0]!, /typo.*type: "htp" is not a transport/);
      } finally {
        await page.close();
      }
    });
  }
});
