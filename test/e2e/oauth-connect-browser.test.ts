import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { launchChromium } from '../helpers/browser.js';
import { eventually } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/**
 * The connect page in a real browser (headless Chromium), on a service with ADMIN_KEY: the form, the cookie it sets
 * and the redirects after it must work as browsers apply them (CSP on form redirects, cookie scoping), which plain
 * fetch calls do not check. Two browser contexts are two people's browsers: nothing is shared between them.
 */

const ADMIN = 'connect-admin-key-0123456789';

describe('OAuth connect page in a browser', () => {
  let browser: Browser;
  let upstream: OAuthFixture;
  let gateway: RunningRouter;

  const authorize = async (): Promise<string> => {
    const reply = await fetch(`${gateway.url}/v1/mcp/servers/linear/authorize`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(reply.status, 200);
    return ((await reply.json()) as { authorization_url: string }).authorization_url;
  };

  before(async () => {
    browser = await launchChromium();
    upstream = await startOAuthFixture();
    gateway = await startRouter({ adminKey: ADMIN, mcp: { servers: { linear: { url: upstream.url, auth: 'oauth' } }, reconnect: { initialMs: 50, maxMs: 400 }, startupWaitMs: 0 } });
  });

  after(async () => {
    await browser?.close();
    await gateway?.close();
    await upstream?.close();
  });

  it('a forwarded authorization URL completes nothing in another browser; the admin\'s own browser connects the server', async () => {
    // The admin's browser passes the connect page, but the authorization server's URL it is sent to ends up with
    // someone else (held here before the browser follows it).
    const admin = await browser.newContext();
    const other = await browser.newContext();
    try {
      const adminPage = await admin.newPage();
      let leaked: string | undefined;
      // The form's answer is sent to toolrouter for real; the redirect it carries is held, not followed (Playwright does
      // not route a redirect's next hop).
      await adminPage.route('**/oauth/connect/**', async (route) => {
        if (route.request().method() !== 'POST') return route.continue();
        const response = await route.fetch({ maxRedirects: 0 });
        assert.equal(response.status(), 303, await response.text());
        leaked = response.headers().location;
        await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>held</p>' });
      });
      await adminPage.goto(await authorize());
      await adminPage.fill('input[name="key"]', ADMIN);
      await adminPage.click('button[type="submit"]');
      await eventually(async () => leaked, (url) => url !== undefined, 10_000);

      const otherPage = await other.newPage();
      const landed = await otherPage.goto(leaked!);
      assert.equal(new URL(otherPage.url()).pathname, '/oauth/callback');
      assert.equal(landed?.status(), 403);
      assert.match(await otherPage.textContent('body') ?? '', /did not open the authorization link/);
      assert.equal(gateway.router.mcp.upstreams.statusOf('linear')?.state, 'needs_authorization', 'nothing was linked');

      // The honest walk, all in the admin's browser.
      const again = await admin.newPage();
      await again.goto(await authorize());
      assert.match(await again.textContent('body') ?? '', /Enter the admin key/);
      await again.fill('input[name="key"]', ADMIN);
      await again.click('button[type="submit"]');
      await again.waitForURL((url) => url.pathname === '/oauth/callback', { timeout: 15_000 });
      assert.match(await again.textContent('body') ?? '', /now authorized for the MCP server "linear"/);
      await eventually(async () => gateway.router.mcp.upstreams.statusOf('linear')?.state, (state) => state === 'connected', 15_000);
    } finally {
      await admin.close();
      await other.close();
    }
  });
});
