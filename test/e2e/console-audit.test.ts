import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { startFilesServer, type FilesServer } from '../fixtures/mcp/files-server.js';
import { launchChromium, waitForCount } from '../helpers/browser.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const POLICIES = `
@id("reads")
permit (principal, action == Action::"call_tool", resource) when { resource.readOnlyHint };
@id("write-under-data")
permit (principal, action == Action::"call_tool", resource)
when { resource.name == "write_file" && context.arguments has path && context.arguments.path like "/data/*" };
`;

/** The console's Audit view in Chromium, over the trail of real governed calls (REST face, a policy file, a fixture upstream). */
describe('console: Audit view', { timeout: 5 * 60_000 }, () => {
  let browser: Browser;
  let api: RunningRouter;
  let files: FilesServer;
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-console-audit-'));

  before(async () => {
    browser = await launchChromium();
    files = await startFilesServer();
    const policyFile = path.join(dir, 'policies.cedar');
    writeFileSync(policyFile, POLICIES);
    api = await startRouter({ policy: { files: [policyFile] }, mcp: { search: true, servers: { files: { url: files.url } } } });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
    const callTool = (name: string, args: Record<string, unknown>) => api.post('/mcp-rest/tools/call', { name, arguments: args });
    assert.equal((await callTool('files__read_file', { path: '/data/a' })).status, 200);
    assert.equal((await callTool('files__write_file', { path: '/data/b', content: 'x' })).status, 200);
    assert.equal((await callTool('files__write_file', { path: '/etc/hosts', content: 'x' })).status, 403);
    assert.equal((await callTool('files__delete_file', { path: '/data/c' })).status, 403);
    await api.router.audit!.flush();
  });

  after(async () => {
    await browser?.close();
    await api?.close();
    await files?.close();
    if (!process.env.KEEP_SCREENSHOTS) rmSync(dir, { recursive: true, force: true });
  });

  const overflow = (page: Page) => page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth') as Promise<number>;

  for (const width of [1280, 390]) {
    it(`at ${width} px: every attempt newest first, refusals marked, filters narrow it, nothing off screen`, async (t) => {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      try {
        await page.goto(`${api.url}/console/`);
        const rows = page.locator('[data-testid="audit-records"] tbody tr');
        await rows.nth(3).waitFor();
        assert.equal(await rows.count(), 4);
        assert.deepEqual(await rows.locator('td.decision').allTextContents(), ['deny', 'deny', 'permit', 'permit']);
        assert.equal(await page.locator('[data-testid="audit-records"] tr.refused').count(), 2);
        assert.match((await rows.first().textContent()) ?? '', /files__delete_file/);

        await page.selectOption('#audit-decision', 'permit');
        await page.fill('#audit-tool', 'files__write_file');
        await page.click('#audit-filters button[type="submit"]');
        await waitForCount(rows, 1);
        assert.match((await rows.first().textContent()) ?? '', /write-under-data/);

        const file = path.join(dir, `audit-${width}.png`);
        await page.locator('#audit').screenshot({ path: file });
        t.diagnostic(`screenshot ${file}`);
        assert.ok((await overflow(page)) <= 0, `the page scrolls sideways at ${width} px`);
        const offScreen = await page.evaluate(`[...document.querySelectorAll('#audit td, #audit th, #audit input, #audit select')].filter((cell) => cell.getBoundingClientRect().right > window.innerWidth + 1 && cell.offsetParent !== null).length`);
        assert.equal(offScreen, 0, 'every visible part of the Audit view is on screen');
      } finally {
        await page.close();
      }
    });
  }
});
