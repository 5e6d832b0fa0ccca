/**
 * The SHA-256 chain over audit records: each record's `hash` covers the previous record's hash and the record's own
 * canonical JSON, so editing, removing or reordering a record breaks every hash after it. Pure functions: the stores
 * link records as they append them, `toolrouter audit verify` walks them.
 */
import { createHash } from 'node:crypto';
import type { AuditRecord } from './types.js';

/** A record before it is linked: everything but where it is (`id`) and its place in the chain (`prev`, `hash`). */
export type AuditBody = Omit<AuditRecord, 'id' | 'prev' | 'hash'>;

/** JSON with object keys sorted at every depth and undefined members left out: one text per value, on any instance. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(',')}}`;
}

/** The hash a record with this body must carry after `prev`. */
export function chainHash(prev: string, body: AuditBody): string {
  return createHash('sha256').update(prev).update('\n').update(canonicalJson({ ...body, prev })).digest('hex');
}

/** Links bodies after `prev`, in order: what a store appends. */
export function link(prev: string, bodies: readonly AuditBody[]): { prev: string; hash: string; body: AuditBody }[] {
  const linked = [];
  for (const body of bodies) {
    const hash = chainHash(prev, body);
    linked.push({ prev, hash, body });
    prev = hash;
  }
  return linked;
}

/** The stored record's body: what its hash covers. */
export function bodyOf(record: AuditRecord): AuditBody {
  const { id: _id, prev: _prev, hash: _hash, ...body } = record;
  return body;
}

export interface ChainBreak {
  id: string;
  reason: string;
}

/**
 * Walks records oldest first and answers the first that breaks the chain: its hash does not match its content, or its
 * `prev` is not the hash of the record before it. The first record's `prev` is trusted (older records may have been
 * pruned by retention).
 */
export class ChainVerifier {
  private last: string | undefined;
  checked = 0;

  check(record: AuditRecord): ChainBreak | undefined {
    this.checked++;
    if (this.last !== undefined && record.prev !== this.last) {
      return { id: record.id, reason: `prev is ${record.prev.slice(0, 12)}…, but the record before it hashes to ${this.last.slice(0, 12)}… (a record was removed, inserted or reordered)` };
    }
    const expected = chainHash(record.prev, bodyOf(record));
    if (record.hash !== expected) return { id: record.id, reason: `its content does not match its hash (the record was edited)` };
    this.last = record.hash;
    return undefined;
  }
}
