import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { embeddingText, searchableText } from '../../src/catalog/text.js';
import type { Tool } from '../../src/catalog/types.js';

const FIXTURES = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures');

/**
 * Texts whose offline vectors are pinned by hash: the fixture catalog's tool texts (embedding text, name,
 * description), every fixture query, every distinct word of those alone, and edge cases (empty, whitespace, unknown
 * words, punctuation, non-Latin script, a text longer than the tokenizer's 2,048-token limit).
 */
export function pinnedTexts(): string[] {
  const { tools } = JSON.parse(readFileSync(path.join(FIXTURES, 'catalog.json'), 'utf8')) as { tools: Tool[] };
  const texts: string[] = [];
  for (const tool of tools) texts.push(embeddingText(searchableText(tool)), tool.name, tool.description ?? '');
  for (const file of ['queries.jsonl', 'livemcpbench-queries.jsonl']) {
    for (const line of readFileSync(path.join(FIXTURES, file), 'utf8').split('\n')) {
      if (line.trim() !== '') texts.push((JSON.parse(line) as { query: string }).query);
    }
  }
  const words = new Set(texts.join(' ').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean));
  texts.push(...[...words].sort());
  texts.push('', '   ', 'qzxvbnmw blorptastic', '!!! ??? ...', 'Überweisung an den Empfänger senden', '发送电子邮件', 'ｆｕｌｌ ｗｉｄｔｈ');
  texts.push(Array.from({ length: 2500 }, (_, i) => ['send', 'email', 'weather', 'invoice', 'calendar'][i % 5]).join(' ') + ' github');
  return texts;
}

/** SHA-256 over the vectors' float32 bytes, in order. */
export function vectorsHash(vectors: Float32Array[]): string {
  const hash = createHash('sha256');
  for (const v of vectors) hash.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  return hash.digest('hex');
}
