/**
 * The audit trail without Redis: JSON Lines files under `<stateDir>/audit/`, one record a line, a new file when the
 * current one passes `rotateBytes` or the day changes; the chain runs on across files. Whole files are pruned, oldest
 * first, by age and by record count. One process writes a directory (as one instance runs without Redis).
 */
import { createReadStream } from 'node:fs';
import { appendFile, mkdir, readdir, readFile, stat, truncate, unlink } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { link, type AuditBody } from './chain.js';
import { IdClock, pageOf, type AuditPage, type AuditQuery, type AuditStore } from './store.js';
import type { AuditRecord } from './types.js';

export interface FileAuditStoreOptions {
  /** `<stateDir>/audit`. */
  dir: string;
  maxEntries: number;
  maxAgeDays: number;
  /** @defaultValue 16 MiB */
  rotateBytes?: number;
}

const FILE = /^audit-(\d{8})-(\d+)\.jsonl$/;

export class FileAuditStore implements AuditStore {
  private readonly ids = new IdClock();
  private current: { file: string; bytes: number; day: string } | undefined;
  private last: { id: string; hash: string } | undefined;
  private opened: Promise<void> | undefined;

  constructor(private readonly options: FileAuditStoreOptions) {}

  private open(): Promise<void> {
    this.opened ??= (async () => {
      await mkdir(this.options.dir, { recursive: true });
      const files = await this.files();
      const newest = files.at(-1);
      if (newest === undefined) return;
      const file = path.join(this.options.dir, newest);
      let text = await readFile(file, 'utf8');
      // A crash mid-append leaves a line without its newline: that record was never acknowledged. Cut it off, so the
      // next record starts on a line of its own and links after the last whole one.
      if (text !== '' && !text.endsWith('\n')) {
        text = text.slice(0, text.lastIndexOf('\n') + 1);
        await truncate(file, Buffer.byteLength(text));
      }
      const tail = text.trimEnd().split('\n').at(-1);
      if (tail) {
        const record = JSON.parse(tail) as AuditRecord;
        this.last = { id: record.id, hash: record.hash };
      }
      this.current = { file: newest, bytes: Buffer.byteLength(text), day: FILE.exec(newest)![1]! };
    })();
    return this.opened;
  }

  /** The trail's files, oldest first. */
  private async files(): Promise<string[]> {
    const names = (await readdir(this.options.dir).catch(() => [] as string[])).filter((name) => FILE.test(name));
    return names.sort((a, b) => {
      const [, aDay, aN] = FILE.exec(a)!;
      const [, bDay, bN] = FILE.exec(b)!;
      return aDay!.localeCompare(bDay!) || Number(aN) - Number(bN);
    });
  }

  async append(bodies: readonly AuditBody[]): Promise<void> {
    await this.open();
    const lines: string[] = [];
    let last = this.last;
    for (const { prev, hash, body } of link(last?.hash ?? '', bodies)) {
      const id = this.ids.next(last?.id);
      lines.push(JSON.stringify({ id, ...body, prev, hash }));
      last = { id, hash };
    }
    const text = lines.join('\n') + '\n';
    const file = await this.fileFor(Buffer.byteLength(text));
    await appendFile(path.join(this.options.dir, file), text, { mode: 0o600 });
    this.current!.bytes += Buffer.byteLength(text);
    this.last = last;
  }

  /** The file to append to: the current one, or a new one past the size bound or on a new day (then old ones are pruned). */
  private async fileFor(bytes: number): Promise<string> {
    const day = new Date().toISOString().slice(0, 10).replaceAll('-', '');
    const limit = this.options.rotateBytes ?? 16 * 1024 * 1024;
    if (this.current && this.current.day === day && this.current.bytes + bytes <= limit) return this.current.file;
    const n = this.current?.day === day ? Number(FILE.exec(this.current.file)![2]) + 1 : 0;
    this.current = { file: `audit-${day}-${n}.jsonl`, bytes: 0, day };
    await this.prune();
    return this.current.file;
  }

  /** Drops whole files, oldest first, past maxAgeDays or while the older files alone hold maxEntries records. */
  private async prune(): Promise<void> {
    const files = (await this.files()).filter((name) => name !== this.current?.file);
    const cutoff = Date.now() - this.options.maxAgeDays * 86_400_000;
    let kept = 0;
    for (const name of files.reverse()) {
      const file = path.join(this.options.dir, name);
      const { mtimeMs } = await stat(file);
      if (mtimeMs < cutoff || kept >= this.options.maxEntries) {
        await unlink(file);
        continue;
      }
      kept += (await readFile(file, 'utf8')).split('\n').length - 1;
    }
  }

  async read(query: AuditQuery): Promise<AuditPage> {
    await this.open();
    return pageOf(this.newestFirst(), query);
  }

  private async *newestFirst(): AsyncIterable<AuditRecord> {
    for (const name of (await this.files()).reverse()) {
      const lines = (await readFile(path.join(this.options.dir, name), 'utf8')).trimEnd().split('\n');
      for (let i = lines.length - 1; i >= 0; i--) if (lines[i]) yield parseLine(lines[i]!, name, i);
    }
  }

  async *scan(): AsyncIterable<AuditRecord> {
    for (const name of await this.files()) {
      const lines = createInterface({ input: createReadStream(path.join(this.options.dir, name), 'utf8'), crlfDelay: Infinity });
      let n = 0;
      for await (const line of lines) if (line.trim() !== '') yield parseLine(line, name, n++);
    }
  }

  async close(): Promise<void> {}
}

/** A line that is not a record still reaches verify, as a record whose hash cannot match. */
function parseLine(line: string, file: string, index: number): AuditRecord {
  try {
    return JSON.parse(line) as AuditRecord;
  } catch {
    return { id: `${file}:${index + 1}`, prev: '', hash: 'unreadable' } as AuditRecord;
  }
}
