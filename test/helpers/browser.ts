import { existsSync } from 'node:fs';
import { chromium, type Browser, type Locator } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Debian's Chromium, headless, with nothing that reaches the network on its own. Missing Chromium is an error, not a
 * skip: the console's end-to-end tests are the only thing that checks the page works.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it with "apt-get install -y chromium" (.ci/run does) or set CHROMIUM_PATH`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Waits until `locator` matches exactly `count` elements. Polls from Node rather than with `page.waitForFunction(string)`:
 * a string predicate is evaluated inside the page, which the console's Content-Security-Policy (no 'unsafe-eval') refuses.
 */
export async function waitForCount(locator: Locator, count: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = await locator.count();
  while (seen !== count) {
    if (Date.now() > deadline) throw new Error(`expected ${count} elements for ${String(locator)}, still ${seen} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    seen = await locator.count();
  }
}
