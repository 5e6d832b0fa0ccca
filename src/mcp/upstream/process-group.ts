/**
 * A stdio server's process and everything it starts, as one process group (POSIX). Servers are often launched through
 * a wrapper (`npx`, `uvx`, `sh -c`, `docker run`) that starts the real server as its own child: signalling the wrapper
 * alone leaves that child running after toolrouter has gone. The server is spawned as the leader of a new group
 * (`detached`), and ending it signals the whole group: stdin closed first (a server exits when its client goes), then
 * SIGTERM, then SIGKILL.
 */
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export interface EndGroupOptions {
  /**
   * How long the group gets after stdin is closed, and again after SIGTERM, before the next step.
   * @defaultValue 2000
   */
  graceMs?: number;
}

/** Whether any process of the group is still running. */
export function groupAlive(groupId: number): boolean {
  try {
    process.kill(-groupId, 0);
  } catch (error) {
    // EPERM: a process of the group exists but is not ours to signal (it changed user); it is there all the same.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A signal reaches zombies too: an orphan that exited stays one until PID 1 reaps it, and in a container whose PID 1
  // reaps nothing, that is forever. On Linux, only members that still run count.
  return process.platform === 'linux' ? runningMembers(groupId) > 0 : true;
}

/** Processes of the group that are not zombies, from /proc (Linux). */
export function runningMembers(groupId: number): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so fields are read after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === groupId && fields[0] !== 'Z' && fields[0] !== 'X') count++;
  }
  return count;
}

function signalGroup(groupId: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-groupId, signal);
  } catch {
    // The group is empty already.
  }
}

/** Resolves true once the group is empty, false after `ms`. Polled: a group has no event for its last member. */
async function groupGone(groupId: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (groupAlive(groupId)) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50).unref());
  }
  return true;
}

/**
 * Ends a server started as the leader of its own process group, and everything it started: stdin closed, then SIGTERM
 * to the group, then SIGKILL, each step only while some process of the group is left.
 */
export async function endGroup(child: ChildProcess, options: EndGroupOptions = {}): Promise<void> {
  const groupId = child.pid;
  if (groupId === undefined) return;
  const graceMs = options.graceMs ?? 2_000;
  try {
    child.stdin?.end();
  } catch {
    // Already closed.
  }
  if (await groupGone(groupId, graceMs)) return;
  signalGroup(groupId, 'SIGTERM');
  if (await groupGone(groupId, graceMs)) return;
  signalGroup(groupId, 'SIGKILL');
  await groupGone(groupId, graceMs);
}
