import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { canonicalJson, ChainVerifier, type AuditBody } from '../../../src/audit/chain.js';
import { FileAuditStore } from '../../../src/audit/file-store.js';
import { AuditLog } from '../../../src/audit/log.js';
import { MemoryAuditStore, type AuditStore } from '../../../src/audit/store.js';
import type { AuditEvent, AuditRecord } from '../../../src/audit/types.js';

function event(n: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    time: new Date(Date.now() - 1000 + n).toISOString(),
    surface: 'rest',
    action: 'call_tool',
    caller: { kind: 'key', id: n % 2 === 0 ? 'k-even' : 'k-odd', groups: ['staff'] },
    tool: `files__tool_${n % 3}`,
    server: 'files',
    arguments: { path: `/data/${n}`, n },
    decision: n % 5 === 0 ? 'deny' : 'permit',
    policies: n % 5 === 0 ? ['contractors-never-delete'] : ['reads'],
    outcome: n % 5 === 0 ? 'not_run' : 'ok',
    ms: n,
    ...overrides,
  };
}

async function all(store: AuditStore): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  for await (const record of store.scan()) records.push(record);
  return records;
}

function verify(records: AuditRecord[]): { checked: number; broken?: { id: string; reason: string } } {
  const verifier = new ChainVerifier();
  for (const record of records) {
    const broken = verifier.check(record);
    if (broken) return { checked: verifier.checked, broken };
  }
  return { checked: verifier.checked };
}

describe('audit chain', () => {
  it('canonical JSON is the same text whatever the key order, at every depth', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (value) => {
        const reversed = Object.fromEntries(Object.entries(value).reverse());
        assert.equal(canonicalJson(value), canonicalJson(reversed));
        assert.deepEqual(JSON.parse(canonicalJson(value)), JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it('a linked trail verifies; an edited, removed or reordered record is named', async () => {
    const store = new MemoryAuditStore(1000);
    const log = new AuditLog({ store, instance: 'i1', settings: { arguments: 'full', queueSize: 100, required: false } });
    for (let n = 0; n < 20; n++) log.record(event(n));
    assert.equal(await log.flush(), true);
    const records = await all(store);
    assert.equal(records.length, 20);
    assert.deepEqual(verify(records), { checked: 20 });

    const edited = records.map((record) => ({ ...record }));
    edited[7] = { ...edited[7]!, decision: 'permit' === edited[7]!.decision ? 'deny' : 'permit' };
    assert.equal(verify(edited).broken?.id, records[7]!.id);
    assert.match(verify(edited).broken!.reason, /edited/);

    const removed = records.filter((_, index) => index !== 5);
    assert.equal(verify(removed).broken?.id, records[6]!.id);
    assert.match(verify(removed).broken!.reason, /removed, inserted or reordered/);

    const swapped = [...records];
    [swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!];
    assert.equal(verify(swapped).broken?.id, records[4]!.id);
  });

  it('keeps arguments as audit.arguments says: full, a hash of their canonical JSON, or not at all', async () => {
    const kept = async (mode: 'full' | 'hash' | 'off') => {
      const store = new MemoryAuditStore(1000);
      const log = new AuditLog({ store, instance: 'i1', settings: { arguments: mode, queueSize: 10, required: false } });
      log.record(event(1, { arguments: { b: 1, a: 'x' } }));
      log.record(event(2, { arguments: { a: 'x', b: 1 } }));
      await log.flush();
      return (await all(store)).map((record) => record.arguments);
    };
    assert.deepEqual(await kept('full'), [{ b: 1, a: 'x' }, { a: 'x', b: 1 }]);
    const [first, second] = await kept('hash');
    assert.match(String(first), /^sha256:[0-9a-f]{64}$/);
    assert.equal(first, second, 'the same arguments in another key order hash alike');
    assert.deepEqual(await kept('off'), [undefined, undefined]);
  });
});

describe('audit log: the queue in front of the store', () => {
  it('a full queue drops and counts instead of waiting; the call path is never held', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const inner = new MemoryAuditStore(1000);
    const slow: AuditStore = { ...inner, append: async (bodies: readonly AuditBody[]) => (await gate, inner.append(bodies)), read: (q) => inner.read(q), scan: () => inner.scan(), close: async () => {} };
    let dropped = 0;
    const log = new AuditLog({ store: slow, instance: 'i1', settings: { arguments: 'off', queueSize: 5, required: false }, metrics: { written: () => {}, dropped: () => dropped++ } });
    for (let n = 0; n < 12; n++) log.record(event(n));
    assert.equal(dropped, 7);
    release();
    await log.flush();
    assert.equal((await all(inner)).length, 5);
  });

  it('with required, a failing store stops accepting calls until it takes records again, and nothing queued is lost', async () => {
    const inner = new MemoryAuditStore(1000);
    let down = true;
    const flaky: AuditStore = {
      append: async (bodies) => {
        if (down) throw new Error('store unreachable');
        await inner.append(bodies);
      },
      read: (q) => inner.read(q),
      scan: () => inner.scan(),
      close: async () => {},
    };
    const log = new AuditLog({ store: flaky, instance: 'i1', settings: { arguments: 'off', queueSize: 100, required: true }, retryMs: 20 });
    assert.equal(log.accepting(), true);
    log.record(event(1));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(log.accepting(), false);
    log.record(event(2));
    down = false;
    assert.equal(await log.flush(), true);
    assert.equal(log.accepting(), true);
    const records = await all(inner);
    assert.deepEqual(records.map((record) => record.ms), [1, 2]);
    assert.deepEqual(verify(records), { checked: 2 });
  });

  it('without required, calls go on while the store fails', async () => {
    const failing: AuditStore = { append: async () => Promise.reject(new Error('down')), read: async () => ({ records: [] }), scan: async function* () {}, close: async () => {} };
    const log = new AuditLog({ store: failing, instance: 'i1', settings: { arguments: 'off', queueSize: 100, required: false }, retryMs: 20 });
    log.record(event(1));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(log.accepting(), true);
    assert.equal(log.pending, 1);
  });

  it('reads newest first, filtered, in pages whose cursor continues where the last stopped', async () => {
    const store = new MemoryAuditStore(1000);
    const log = new AuditLog({ store, instance: 'i1', settings: { arguments: 'off', queueSize: 100, required: false } });
    for (let n = 0; n < 30; n++) log.record(event(n));
    await log.flush();
    const seen: number[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await log.read({ limit: 4, caller: 'k-even', ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...page.records.map((record) => record.ms));
      if (page.next === undefined) break;
      cursor = page.next;
    }
    assert.deepEqual(seen, [28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0]);
    const denials = await log.read({ limit: 100, decision: 'deny' });
    assert.deepEqual(denials.records.map((record) => record.ms), [25, 20, 15, 10, 5, 0]);
    const none = await log.read({ limit: 100, since: Date.now() + 60_000 });
    assert.deepEqual(none.records, []);
  });
});

describe('audit files', () => {
  it('rotate by size, keep one chain across files, and reopen where they left off', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'tr-audit-')), 'audit');
    const first = new FileAuditStore({ dir, maxEntries: 100_000, maxAgeDays: 30, rotateBytes: 2000 });
    const log = new AuditLog({ store: first, instance: 'i1', settings: { arguments: 'full', queueSize: 1000, required: false } });
    // A batch goes into one file; each flush here is a batch.
    for (let n = 0; n < 40; n++) {
      log.record(event(n));
      if (n % 5 === 4) await log.flush();
    }
    assert.ok(readdirSync(dir).length > 3, `rotated into several files: ${readdirSync(dir).join(', ')}`);
    // A restart: a new store over the same directory links after the last record on disk.
    const second = new FileAuditStore({ dir, maxEntries: 100_000, maxAgeDays: 30, rotateBytes: 2000 });
    const again = new AuditLog({ store: second, instance: 'i2', settings: { arguments: 'full', queueSize: 1000, required: false } });
    for (let n = 40; n < 50; n++) again.record(event(n));
    await again.flush();
    const records = await all(second);
    assert.equal(records.length, 50);
    assert.deepEqual(verify(records), { checked: 50 });
    assert.equal((await second.read({ limit: 1 })).records[0]!.ms, 49);

    // One line edited on disk breaks the chain at that record.
    const file = readdirSync(dir).sort()[1]!;
    const lines = readFileSync(path.join(dir, file), 'utf8').trimEnd().split('\n');
    const target = JSON.parse(lines[0]!) as AuditRecord;
    lines[0] = JSON.stringify({ ...target, outcome: 'tool_error' });
    writeFileSync(path.join(dir, file), lines.join('\n') + '\n');
    assert.equal(verify(await all(second)).broken?.id, target.id);
  });

  it('after a crash mid-line, the cut line is dropped and new records link after the last whole one', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'tr-audit-')), 'audit');
    const first = new AuditLog({ store: new FileAuditStore({ dir, maxEntries: 100_000, maxAgeDays: 30 }), instance: 'i1', settings: { arguments: 'off', queueSize: 100, required: false } });
    for (let n = 0; n < 3; n++) first.record(event(n));
    await first.flush();
    const [file] = readdirSync(dir);
    writeFileSync(path.join(dir, file!), readFileSync(path.join(dir, file!), 'utf8') + '{"id":"17', { flag: 'w' });
    const store = new FileAuditStore({ dir, maxEntries: 100_000, maxAgeDays: 30 });
    const again = new AuditLog({ store, instance: 'i2', settings: { arguments: 'off', queueSize: 100, required: false } });
    again.record(event(3));
    assert.equal(await again.flush(), true);
    const records = await all(store);
    assert.deepEqual(records.map((record) => record.ms), [0, 1, 2, 3]);
    assert.deepEqual(verify(records), { checked: 4 });
  });

  it('prune whole files beyond maxEntries, oldest first; what is left still verifies', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'tr-audit-')), 'audit');
    const store = new FileAuditStore({ dir, maxEntries: 1000, maxAgeDays: 30, rotateBytes: 4000 });
    const log = new AuditLog({ store, instance: 'i1', settings: { arguments: 'off', queueSize: 10_000, required: false } });
    for (let n = 0; n < 3000; n++) log.record(event(n));
    await log.flush(20_000);
    const records = await all(store);
    assert.ok(records.length < 3000 && records.length >= 1000, `kept ${records.length}`);
    assert.equal(records.at(-1)!.ms, 2999);
    assert.deepEqual(verify(records), { checked: records.length });
  });
});
