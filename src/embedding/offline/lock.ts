/** One builder at a time across processes (a lock file with a heartbeat), and clean-up after builders that died. */
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, open, readFile, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';

/** Temp dirs of builds whose process died (SIGKILL, OOM) are garbage; those of live processes are not ours. */
export async function removeStaleTemps(outDir: string): Promise<void> {
  const parent = path.dirname(outDir);
  const base = path.basename(outDir);
  if (!existsSync(parent)) return;
  for (const name of readdirSync(parent)) {
    const m = new RegExp(`^${escapeRegExp(base)}\\.(?:tmp|old)-(\\d+)-`).exec(name);
    if (m && !isAlive(Number(m[1]))) {
      await rm(path.join(parent, name), { recursive: true, force: true });
    }
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A holder refreshes its lock's mtime this often; a lock not refreshed for STALE_LOCK_MS is abandoned. */
const LOCK_HEARTBEAT_MS = 5_000;
const STALE_LOCK_MS = 60_000;

export async function withBuildLock<T>(dir: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const lockPath = `${dir}.lock`;
  await mkdir(path.dirname(dir), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fh = await open(lockPath, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number((await readFile(lockPath, 'utf8').catch(() => '')).trim());
      const age = Date.now() - ((await stat(lockPath).catch(() => null))?.mtimeMs ?? Date.now());
      // A dead pid proves the holder is gone. The heartbeat covers what the pid cannot: a lock left on a shared
      // volume by another container (its pid may be reused here) or a holder that died before writing its pid.
      if ((Number.isInteger(holder) && holder > 0 && !isAlive(holder)) || age > STALE_LOCK_MS) {
        await rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${lockPath} (held by pid ${holder || 'unknown'})`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(lockPath, now, now).catch(() => {});
  }, LOCK_HEARTBEAT_MS);
  heartbeat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(heartbeat);
    await rm(lockPath, { force: true });
  }
}
