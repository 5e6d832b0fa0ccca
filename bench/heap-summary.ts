/**
 * What a V8 heap snapshot holds, by kind of object: `node --import tsx bench/heap-summary.ts FILE [rows]`. Prints the
 * snapshot's nodes grouped by type and constructor (or, for strings, by length band), with their count and summed
 * self size, largest first. Snapshots of a 100k-tool service are over 1 GB of JSON, past what JSON.parse takes as one
 * string, so the two big arrays (`nodes`, `strings`) are read from the file's bytes directly.
 */
import { readFileSync } from 'node:fs';

const [file, rowsArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: heap-summary FILE [rows]\n');
  process.exit(2);
}
const bytes = readFileSync(file);

/** The snapshot's `meta` (field names and node types) sits in the first few KB, before the arrays. */
const headEnd = bytes.indexOf('"nodes":');
const head = bytes.subarray(0, headEnd).toString('utf8');
const meta = JSON.parse(/"meta":(\{.*?\}),"node_count"/s.exec(head)?.[1] ?? 'null') as {
  node_fields: string[];
  node_types: [string[], ...unknown[]];
} | null;
if (!meta) throw new Error('no snapshot meta found');
const fields = meta.node_fields;
const stride = fields.length;
const typeAt = fields.indexOf('type');
const nameAt = fields.indexOf('name');
const sizeAt = fields.indexOf('self_size');
const typeNames = meta.node_types[0];

/** The integers of the array that starts after `key` (`"nodes":[` … `]`). */
function ints(key: string): number[] {
  let at = bytes.indexOf(key) + key.length;
  const out: number[] = [];
  let value = 0;
  let inNumber = false;
  for (; at < bytes.length; at++) {
    const c = bytes[at]!;
    if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      inNumber = true;
    } else {
      if (inNumber) out.push(value);
      value = 0;
      inNumber = false;
      if (c === 93) break; // ]
    }
  }
  return out;
}

/** The strings array: JSON strings separated by commas, parsed one at a time. */
function strings(): string[] {
  let at = bytes.lastIndexOf('"strings":[') + '"strings":['.length;
  const out: string[] = [];
  while (bytes[at] !== 93) {
    while (bytes[at] !== 34) at++;
    let end = at + 1;
    while (bytes[end] !== 34) end += bytes[end] === 92 ? 2 : 1;
    out.push(JSON.parse(bytes.subarray(at, end + 1).toString('utf8')) as string);
    at = end + 1;
    while (bytes[at] === 44 || bytes[at] === 10 || bytes[at] === 13) at++;
  }
  return out;
}

const nodes = ints('"nodes":[');
const names = strings();
const groups = new Map<string, { count: number; bytes: number }>();
let total = 0;
for (let i = 0; i < nodes.length; i += stride) {
  const type = typeNames[nodes[i + typeAt]!] ?? '?';
  const size = nodes[i + sizeAt]!;
  total += size;
  let key: string;
  if (type === 'string' || type === 'concatenated string' || type === 'sliced string') {
    const length = names[nodes[i + nameAt]!]?.length ?? 0;
    key = `${type} (${length < 16 ? '<16' : length < 64 ? '16-63' : length < 256 ? '64-255' : length < 4096 ? '256-4095' : '4096+'} chars)`;
  } else {
    key = `${type} ${type === 'object' || type === 'native' || type === 'closure' || type === 'array' ? names[nodes[i + nameAt]!] : ''}`.trim();
  }
  const group = groups.get(key) ?? { count: 0, bytes: 0 };
  group.count++;
  group.bytes += size;
  groups.set(key, group);
}
const rows = Number(rowsArg ?? 40);
process.stdout.write(`${(nodes.length / stride).toLocaleString()} nodes, ${(total / 1e6).toFixed(1)} MB of self size\n`);
for (const [key, group] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, rows)) {
  process.stdout.write(`${(group.bytes / 1e6).toFixed(1).padStart(8)} MB ${group.count.toLocaleString().padStart(12)}  ${key.slice(0, 100)}\n`);
}
