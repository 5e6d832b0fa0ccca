import path from 'node:path';
import express, { Router } from 'express';

/**
 * The web console's static files at /console, from `dir` (the assembly passes src/package-root.ts's consoleDir()). The page holds no data: everything it shows comes from the API with
 * the caller's key, so serving the files themselves needs no key (a browser cannot add one to a navigation).
 */
export function consoleRoutes(dir: string): Router {
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
  // Browsers ask the root for an icon on any page of the origin (the API's JSON too): the console's, not a 404.
  router.get('/favicon.ico', (_req, res) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.type('image/svg+xml').sendFile(path.join(dir, 'favicon.svg'), { maxAge: 86_400_000 });
  });
  return router;
}
