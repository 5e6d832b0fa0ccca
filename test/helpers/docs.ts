import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './paths.js';

/** The user documentation: README.md and every page of docs/, as repository-relative paths. */
export function docFiles(): string[] {
  const pages = readdirSync(path.join(REPO_ROOT, 'docs')).filter((name) => name.endsWith('.md')).sort();
  return ['README.md', ...pages.map((name) => `docs/${name}`)];
}

/** Every documentation page's text, one after the other (tests that look for a snippet wherever it moved). */
export function readDocs(): string {
  return docFiles().map((file) => readFileSync(path.join(REPO_ROOT, file), 'utf8')).join('\n');
}

export interface FencedBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  text: string;
  /** The HTML comment directly above the fence (`<!-- yaml: partial -->`), if any, without its delimiters. */
  marker?: string;
}

/** The fenced code blocks of a page, with the comment that marks one (if any) on the line above its fence. */
export function fencedBlocks(file: string): FencedBlock[] {
  const lines = readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((line, j) => j > i && /^```\s*$/.test(line));
    if (end < 0) break;
    const above = /^<!--\s*(.*?)\s*-->$/.exec(lines[i - 1] ?? '');
    blocks.push({ file, line: i + 1, lang: open[1]!, text: lines.slice(i + 1, end).join('\n'), marker: above?.[1] });
    i = end;
  }
  return blocks;
}
