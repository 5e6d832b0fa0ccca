/**
 * Writes docs/console.png: the console's playground on the fixture catalog, with a query typed and one tool's
 * definition open. `npm run docs:console` (needs Chromium, like the console tests).
 */
import path from 'node:path';
import { REPO_ROOT } from './paths.js';
import { launchChromium, waitForCount } from './browser.js';
import { fixtureTools, startRouter } from './router.js';

const api = await startRouter();
const browser = await launchChromium();
try {
  const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
  if (put.status !== 200) throw new Error(`PUT fixture: ${put.status} ${JSON.stringify(put.body)}`);
  await api.indexed();
  const page = await browser.newPage({ viewport: { width: 1280, height: 1200 }, deviceScaleFactor: 1 });
  await page.goto(`${api.url}/console/`);
  await page.getByTestId('tool-count').filter({ hasText: String(fixtureTools().length) }).waitFor();
  await page.locator('#top-k').fill('5');
  await page.locator('#query').fill('send a message to the team channel');
  await page.locator('#results[data-query="send a message to the team channel"] li').first().waitFor();
  await waitForCount(page.locator('#results li'), 5);
  const out = path.join(REPO_ROOT, 'docs/console.png');
  await page.locator('#playground').screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await api.close();
}
