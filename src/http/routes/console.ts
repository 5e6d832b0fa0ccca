import { fileURLToPath } from 'node:url';
import express, { Router } from 'express';

/** src/console beside the sources; `npm run build` copies it to dist/src/console, beside the compiled modules. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * The web console's static files at /console. The page holds no data: everything it shows comes from the API with
 * the caller's key, so serving the files themselves needs no key (a browser cannot add one to a navigation).
 */
export function consoleRoutes(dir: string = CONSOLE_DIR): Router {
  const router = Router();
  router.use(
    '/console',
    (_req, res, next) => {
      // Only our own files and the API on this origin; no inline script, so injected markup could not run.
      res.setHeader('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Referrer-Policy', 'no-referrer');
      next();
    },
    express.static(dir, { index: 'index.html', redirect: true, fallthrough: true, cacheControl: true, maxAge: 0 }),
  );
  return router;
}
