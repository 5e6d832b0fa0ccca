/**
 * Processes as Linux shows them in /proc, read independently of the code under test: whether a pid still runs (a
 * zombie does not: where PID 1 reaps nothing, an ended orphan stays one), and a process's children, for checking that
 * everything a stdio upstream started is gone.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

interface Stat {
  state: string;
  ppid: number;
  pgrp: number;
}

function stat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

/** True while the process exists and is not a zombie. */
export function running(pid: number): boolean {
  const state = stat(pid)?.state;
  return state !== undefined && state !== 'Z' && state !== 'X';
}

/** The process group a pid belongs to (undefined once it is gone). */
export function groupOf(pid: number): number | undefined {
  return stat(pid)?.pgrp;
}

/** The running children of a process. */
export function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = stat(Number(entry));
    if (child && child.ppid === pid && child.state !== 'Z') found.push(Number(entry));
  }
  return found;
}

/**
 * A launcher as `npx` is one: a shell that starts the real server as its child and waits for it (never `exec`), and
 * writes its own pid to $WRAPPER_PID_FILE when set. Returns the script's path.
 */
export function npxStyleWrapper(): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-wrapper-')), 'wrapper.sh');
  writeFileSync(
    file,
    ['#!/bin/sh', 'if [ -n "$WRAPPER_PID_FILE" ]; then echo $$ > "$WRAPPER_PID_FILE"; fi', 'echo "wrapper: starting $1" >&2', '"$@"', 'echo "wrapper: server ended" >&2', ''].join('\n'),
  );
  chmodSync(file, 0o755);
  return file;
}
