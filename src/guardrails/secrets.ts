import { lintSource } from '@secretlint/core';
import { secretLintProfiler } from '@secretlint/profiler';
import { creator as recommended } from '@secretlint/secretlint-rule-preset-recommend';
import type { ArgumentsAction, ResultsAction, ScanOutcome, SecretFinding, SecretGuard } from './types.js';

// secretlint profiles every run by default: performance marks that are never cleared (a million after ~10,000 scans,
// and the profiler keeps each entry too). A server scanning every call must not.
secretLintProfiler.setEnabled(false);

/** secretlint's recommended preset, with the AWS access key id rule on (the preset leaves it off). */
const CONFIG = {
  rules: [
    {
      id: '@secretlint/secretlint-rule-preset-recommend',
      rule: recommended,
      rules: [{ id: '@secretlint/secretlint-rule-aws', options: { enableIDScanRule: true } }],
    },
  ],
};

/** Between strings in the text scanned at once: no rule's match crosses a blank line and a NUL. */
const SEPARATOR = '\n\u0000\n';
/** Deepest nesting walked; deeper values are not scanned. */
const MAX_DEPTH = 32;

export interface SecretScannerOptions {
  arguments: ArgumentsAction;
  results: ResultsAction;
  /** Most bytes of strings scanned per value (mcp.maxResultBytes); the rest is not scanned. */
  maxBytes: number;
}

interface Found {
  path: string;
  value: string;
  /** Where the string starts in the scanned text. */
  offset: number;
}

/**
 * The secret guardrail over secretlint's recommended rules. Every string of a value is scanned in one lintSource call
 * (strings joined by a separator no rule matches across): secretlint's cost is mostly per call, so one call for the
 * whole value costs about what one short string does. Findings are mapped back to the strings they are in.
 */
export class SecretScanner implements SecretGuard {
  readonly arguments: ArgumentsAction;
  readonly results: ResultsAction;

  constructor(private readonly options: SecretScannerOptions) {
    this.arguments = options.arguments;
    this.results = options.results;
  }

  async scan<T>(value: T): Promise<ScanOutcome<T>> {
    const strings: Found[] = [];
    let offset = 0;
    const collect = (item: unknown, path: string, depth: number): void => {
      if (offset >= this.options.maxBytes) return;
      if (typeof item === 'string') {
        if (item.length < 8) return;
        strings.push({ path, value: item, offset });
        offset += item.length + SEPARATOR.length;
      } else if (Array.isArray(item) && depth < MAX_DEPTH) {
        item.forEach((element, index) => collect(element, `${path}[${index}]`, depth + 1));
      } else if (typeof item === 'object' && item !== null && depth < MAX_DEPTH) {
        for (const [key, element] of Object.entries(item)) collect(element, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, depth + 1);
      }
    };
    collect(value, '$', 0);
    if (strings.length === 0) return { findings: [], redacted: value };
    const content = strings.map((found) => found.value).join(SEPARATOR);
    let messages: { ruleId: string; range: readonly [number, number] | number[] }[];
    try {
      messages = (await lintSource({ source: { filePath: 'value.txt', content, contentType: 'text', ext: '.txt' }, options: { config: CONFIG, noPhysicFilePath: true, maskSecrets: true } })).messages;
    } catch {
      return { findings: [], redacted: value };
    }
    if (messages.length === 0) return { findings: [], redacted: value };
    const findings: SecretFinding[] = [];
    const cuts = new Map<string, { start: number; end: number; rule: string }[]>();
    for (const message of messages) {
      const [start, end] = message.range as [number, number];
      const owner = findOwner(strings, start);
      if (!owner) continue;
      findings.push({ rule: message.ruleId, path: owner.path });
      const list = cuts.get(owner.path) ?? [];
      list.push({ start: start - owner.offset, end: Math.min(end - owner.offset, owner.value.length), rule: message.ruleId });
      cuts.set(owner.path, list);
    }
    const replaced = new Map<string, string>();
    for (const found of strings) {
      const list = cuts.get(found.path);
      if (!list) continue;
      // Right to left, overlapping matches merged into the first.
      list.sort((a, b) => b.start - a.start);
      let text = found.value;
      let limit = Infinity;
      for (const cut of list) {
        const end = Math.min(cut.end, limit);
        if (end <= cut.start) continue;
        text = `${text.slice(0, cut.start)}[REDACTED:${cut.rule}]${text.slice(end)}`;
        limit = cut.start;
      }
      replaced.set(found.path, text);
    }
    return { findings, redacted: rebuild(value, '$', replaced, 0) as T };
  }
}

function findOwner(strings: readonly Found[], position: number): Found | undefined {
  let low = 0;
  let high = strings.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const found = strings[middle]!;
    if (position < found.offset) high = middle - 1;
    else if (position >= found.offset + found.value.length) low = middle + 1;
    else return found;
  }
  return undefined;
}

/** A copy of `value` with the replaced strings (only the containers on their paths are copied). */
function rebuild(value: unknown, path: string, replaced: ReadonlyMap<string, string>, depth: number): unknown {
  if (typeof value === 'string') return replaced.get(path) ?? value;
  if (depth >= MAX_DEPTH || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((element, index) => rebuild(element, `${path}[${index}]`, replaced, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [key, element] of Object.entries(value)) {
    copy[key] = rebuild(element, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, replaced, depth + 1);
  }
  return copy;
}
