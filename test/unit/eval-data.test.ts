import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { LabelledQuery, Tool } from '../../src/catalog/types.js';
import { FastMcpBm25, LiteLlmTokenOverlap, fastMcpTokenize } from '../../src/eval/baselines.js';
import {
  CsvError,
  MCP_TOOL_NAME,
  loadCatalogFile,
  loadLiveMcpBench,
  loadLiveMcpBenchWithReport,
  loadMetaTool,
  loadQueries,
  parseCsv,
  sanitizeName,
} from '../../src/eval/datasets.js';
import { evaluate, formatTable } from '../../src/eval/metrics.js';
import { DATASETS_DIR } from '../helpers/paths.js';

const repoRoot = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const datasets = DATASETS_DIR;
const metatoolDir = join(datasets, 'metatool');
const liveMcpBenchFile = join(datasets, 'livemcpbench', 'tools.json');
const fixtures = join(repoRoot, 'test', 'fixtures');
const skipMetaTool = existsSync(join(metatoolDir, 'queries.csv')) ? false : `MetaTool dataset not found at ${metatoolDir}`;
const skipLiveMcpBench = existsSync(liveMcpBenchFile) ? false : `LiveMCPBench dataset not found at ${liveMcpBenchFile}`;

const scratch = mkdtempSync(join(tmpdir(), 'toolrouter-eval-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let fileCounter = 0;
function scratchFile(name: string, content: string): string {
  const dir = join(scratch, String((fileCounter += 1)));
  mkdirSync(dir);
  const file = join(dir, name);
  writeFileSync(file, content);
  return file;
}

function tool(name: string, description?: string, properties?: Record<string, { description?: string }>): Tool {
  return { name, ...(description !== undefined ? { description } : {}), inputSchema: { type: 'object', properties } };
}

describe('parseCsv', () => {
  test('plain records with LF, CRLF and lone CR line ends', () => {
    assert.deepEqual(parseCsv('a,b\n1,2\r\n3,4\r5,6'), [
      ['a', 'b'],
      ['1', '2'],
      ['3', '4'],
      ['5', '6'],
    ]);
  });

  test('quoted fields keep commas, doubled quotes and newlines', () => {
    const text = 'Query,Tool\r\n"Hi, there",X\r\n"She said ""hi""",Y\r\n"two\r\nlines\nhere",Z\r\n';
    assert.deepEqual(parseCsv(text), [
      ['Query', 'Tool'],
      ['Hi, there', 'X'],
      ['She said "hi"', 'Y'],
      ['two\r\nlines\nhere', 'Z'],
    ]);
  });

  test('empty fields, trailing comma, empty quoted field', () => {
    assert.deepEqual(parseCsv('a,,b,\n"",x\n'), [
      ['a', '', 'b', ''],
      ['', 'x'],
    ]);
  });

  test('BOM dropped, blank lines skipped, missing final newline tolerated', () => {
    assert.deepEqual(parseCsv('\uFEFFh1,h2\n\n\r\nv1,v2'), [
      ['h1', 'h2'],
      ['v1', 'v2'],
    ]);
  });

  test('leniencies: a stray quote in an unquoted field and text after a closing quote are kept as written', () => {
    assert.deepEqual(parseCsv('ab"c,d\n"x"y,z\n'), [
      ['ab"c', 'd'],
      ['"x"y', 'z'],
    ]);
  });

  test('one quoted field holding a comma, a newline and a doubled quote together', () => {
    assert.deepEqual(parseCsv('Query,Tool\n"a, ""b""\nc",T\nnext,U\n'), [
      ['Query', 'Tool'],
      ['a, "b"\nc', 'T'],
      ['next', 'U'],
    ]);
  });

  test('unterminated quote is an error naming the line it started on', () => {
    assert.throws(() => parseCsv('a,b\n1,2\n"open,3\nmore'), (error: unknown) => {
      assert.ok(error instanceof CsvError);
      assert.match(error.message, /line 3/);
      return true;
    });
    // Blank lines before the unfinished record, and a multi-line record before it, still count.
    assert.throws(() => parseCsv('a,b\r\n"x\ny",2\n\n\n3,"open'), (error: unknown) => {
      assert.ok(error instanceof CsvError);
      assert.match(error.message, /line 6/);
      return true;
    });
  });
});

describe('sanitizeName', () => {
  test('valid names are unchanged', () => {
    for (const name of ['get_weather', 'Gmail_SendEmail', 'kubernetes__pods.list', 'lol-champion-analysis']) {
      assert.equal(sanitizeName(name), name);
    }
  });

  test('invalid runs collapse to one underscore', () => {
    assert.equal(sanitizeName('Ant Design Components'), 'Ant_Design_Components');
    assert.equal(sanitizeName('PDF&URLTool'), 'PDF_URLTool');
    assert.equal(sanitizeName('a / b'), 'a_b');
  });

  test('names without ASCII letters or digits get distinct hashed names', () => {
    const a = sanitizeName('八字');
    const b = sanitizeName('黄历');
    assert.match(a, /^h_[0-9a-f]{8}$/);
    assert.notEqual(a, b);
  });

  test('long names are cut to 128 characters and stay distinct', () => {
    const a = sanitizeName(`${'x'.repeat(130)} a`);
    const b = sanitizeName(`${'x'.repeat(130)} b`);
    assert.equal(a.length, 128);
    assert.match(a, MCP_TOOL_NAME);
    assert.notEqual(a, b);
  });
});

describe('loadQueries', () => {
  test('JSONL with blank lines and CRLF', () => {
    const file = scratchFile(
      'q.jsonl',
      '{"query":"send mail","expected":["gmail__send_email"]}\r\n\r\n  \n{"query":"x","expected":["a","b"],"note":1}\n',
    );
    assert.deepEqual(loadQueries(file), [
      { query: 'send mail', expected: ['gmail__send_email'] },
      { query: 'x', expected: ['a', 'b'] },
    ]);
  });

  test('malformed lines are reported with file and line number', () => {
    const cases: [string, RegExp][] = [
      ['{"query":"ok","expected":["a"]}\n\n{"query": oops}\n', /q\.jsonl:3: invalid JSON/],
      ['{"query":"ok","expected":"a"}\n', /q\.jsonl:1: "expected" must be a non-empty array/],
      ['{"query":"ok","expected":[]}\n', /:1: "expected"/],
      ['{"query":"","expected":["a"]}\n', /:1: "query" must be a non-empty string/],
      ['["query","a"]\n', /:1: expected an object/],
    ];
    for (const [content, pattern] of cases) {
      assert.throws(() => loadQueries(scratchFile('q.jsonl', content)), pattern);
    }
  });

  test('MetaTool CSV by extension, tool names sanitised like the catalog', () => {
    const file = scratchFile('queries.csv', 'Query,Tool\r\n"Open this PDF, please",PDF&URLTool\r\n  spaced  ,Calc\r\n');
    assert.deepEqual(loadQueries(file), [
      { query: 'Open this PDF, please', expected: ['PDF_URLTool'] },
      { query: 'spaced', expected: ['Calc'] },
    ]);
  });
});

describe('loadMetaTool (synthetic)', () => {
  function metaDir(): string {
    const dir = dirname(scratchFile('tools.json', JSON.stringify({ Calc: 'A calculator', 'PDF&URLTool': 'Read PDFs' })));
    writeFileSync(
      join(dir, 'queries.csv'),
      'Query,Tool\nadd 2 and 2,Calc\nadd 2 and 2,PDF&URLTool\nread this pdf,PDF&URLTool\nunknown one,Ghost\n,Calc\n',
    );
    return dir;
  }

  test('drops and counts unknown tools and blank queries, relabels renamed tools', () => {
    const { tools, queries, report } = loadMetaTool(metaDir());
    assert.deepEqual(
      tools.map((t) => t.name),
      ['Calc', 'PDF_URLTool'],
    );
    assert.deepEqual(tools[0]?.inputSchema, { type: 'object', properties: {} });
    assert.deepEqual(queries, [
      { query: 'add 2 and 2', expected: ['Calc'] },
      { query: 'add 2 and 2', expected: ['PDF_URLTool'] },
      { query: 'read this pdf', expected: ['PDF_URLTool'] },
    ]);
    assert.equal(report.rows, 5);
    assert.equal(report.droppedUnknownTool, 1);
    assert.deepEqual(report.unknownTools, { Ghost: 1 });
    assert.equal(report.droppedEmpty, 1);
    assert.deepEqual(report.renamedTools, [{ from: 'PDF&URLTool', to: 'PDF_URLTool' }]);
    assert.equal(report.duplicateQueryTexts, 1);
    assert.equal(report.conflictingQueryTexts, 1);
  });

  test('mergeDuplicates unions the labels of identical query texts', () => {
    const { queries } = loadMetaTool(metaDir(), { mergeDuplicates: true });
    assert.deepEqual(queries, [
      { query: 'add 2 and 2', expected: ['Calc', 'PDF_URLTool'] },
      { query: 'read this pdf', expected: ['PDF_URLTool'] },
    ]);
  });
});

describe('loadCatalogFile format detection', () => {
  const mcpTool = { name: 'a__b', description: 'd', inputSchema: { type: 'object', properties: { x: { type: 'string' } } } };

  test('(a) JSON array of MCP tools', () => {
    const tools = loadCatalogFile(scratchFile('c.json', JSON.stringify([mcpTool, { name: 'no_schema' }])));
    assert.deepEqual(tools[0], mcpTool);
    assert.deepEqual(tools[1], { name: 'no_schema', inputSchema: { type: 'object', properties: {} } });
  });

  test('(b) {tools: [...]} with a schema missing its type and null annotations', () => {
    const raw = { tools: [{ name: 't', inputSchema: { properties: {} }, annotations: { title: null, readOnlyHint: true } }] };
    const [t] = loadCatalogFile(scratchFile('c.json', JSON.stringify(raw)));
    assert.deepEqual(t, { name: 't', inputSchema: { properties: {}, type: 'object' }, annotations: { readOnlyHint: true } });
  });

  test('(c) name → description map', () => {
    const tools = loadCatalogFile(scratchFile('tools.json', JSON.stringify({ WeatherTool: 'Weather', 'A&B': 'x' })));
    assert.deepEqual(
      tools.map((t) => [t.name, t.description]),
      [
        ['WeatherTool', 'Weather'],
        ['A_B', 'x'],
      ],
    );
  });

  test('(d) LiveMCPBench server list', () => {
    const servers = [
      {
        name: 'Demo',
        tools: {
          'My Server': { tools: [{ name: 'ping', description: 'p', inputSchema: { type: 'object' }, annotations: null }] },
        },
      },
    ];
    const tools = loadCatalogFile(scratchFile('tools.json', JSON.stringify(servers)));
    assert.deepEqual(tools, [{ name: 'My_Server__ping', description: 'p', inputSchema: { type: 'object' } }]);
  });

  test('(e) MetaTool directory', () => {
    const dir = dirname(scratchFile('tools.json', JSON.stringify({ Calc: 'A calculator' })));
    writeFileSync(join(dir, 'queries.csv'), 'Query,Tool\n1+1,Calc\n');
    assert.deepEqual(
      loadCatalogFile(dir).map((t) => t.name),
      ['Calc'],
    );
  });

  test('unrecognised shapes and duplicate names are errors', () => {
    assert.throws(() => loadCatalogFile(scratchFile('c.json', '{"servers": 3}')), /unrecognised catalog format/);
    assert.throws(() => loadCatalogFile(scratchFile('c.json', '[{"description": "no name"}]')), /tools\[0\]/);
    assert.throws(() => loadCatalogFile(scratchFile('c.json', JSON.stringify([mcpTool, mcpTool]))), /duplicate/);
    assert.throws(() => loadCatalogFile(scratchFile('c.json', '{not json')), /invalid JSON/);
  });
});

describe('LiveMCPBench synthetic quirks', () => {
  test('exact duplicates dropped, conflicting duplicates renamed, custom separator', () => {
    const ping = { name: 'ping', description: 'p', inputSchema: { type: 'object' } };
    const servers = [
      { tools: { s: { tools: [ping, ping, { ...ping, description: 'different' }] } } },
      { tools: { t: { tools: [{ name: 'no schema' }] } } },
    ];
    const file = scratchFile('tools.json', JSON.stringify(servers));
    const { tools, report } = loadLiveMcpBenchWithReport(file, { separator: '.' });
    assert.deepEqual(
      tools.map((t) => t.name),
      ['s.ping', 's.ping_2', 't.no_schema'],
    );
    assert.equal(report.duplicatesDropped, 1);
    assert.deepEqual(report.renamed, [{ from: 's.ping', to: 's.ping_2' }]);
    assert.deepEqual(report.sanitisedToolNames, [{ server: 't', from: 'no schema', to: 'no_schema' }]);
    assert.deepEqual(tools[2]?.inputSchema, { type: 'object', properties: {} });
    assert.throws(() => loadLiveMcpBench(file, { separator: '/' }), /separator/);
  });
});

describe('real datasets', () => {
  test('MetaTool: 199 tools, every query labelled with a catalog tool', { skip: skipMetaTool }, () => {
    const { tools, queries, report } = loadMetaTool(metatoolDir);
    assert.equal(tools.length, 199);
    const names = new Set(tools.map((t) => t.name));
    assert.equal(names.size, 199);
    for (const name of names) assert.match(name, MCP_TOOL_NAME);
    assert.ok(queries.length > 10_000, `only ${queries.length} queries`);
    assert.equal(report.rows, 10_503);
    assert.equal(report.droppedUnknownTool, 0);
    assert.deepEqual(report.renamedTools, [{ from: 'PDF&URLTool', to: 'PDF_URLTool' }]);
    for (const q of queries) for (const name of q.expected) assert.ok(names.has(name), name);
    // The query file and the generic loaders must agree with loadMetaTool, or `npm run eval` scores against
    // names the catalog does not have.
    assert.deepEqual(
      loadCatalogFile(metatoolDir).map((t) => t.name),
      tools.map((t) => t.name),
    );
    assert.deepEqual(loadQueries(join(metatoolDir, 'queries.csv')), queries);
  });

  test('LiveMCPBench: 527 valid, unique, object-schema tools', { skip: skipLiveMcpBench }, () => {
    const { tools, report } = loadLiveMcpBenchWithReport(liveMcpBenchFile);
    assert.equal(tools.length, 527);
    assert.equal(report.servers, 70);
    assert.equal(new Set(tools.map((t) => t.name)).size, 527);
    for (const t of tools) {
      assert.match(t.name, MCP_TOOL_NAME);
      assert.equal(t.inputSchema.type, 'object', t.name);
      for (const value of Object.values(t.annotations ?? {})) assert.notEqual(value, null, t.name);
    }
    assert.deepEqual(report.sanitisedServerKeys, [{ from: 'Ant Design Components', to: 'Ant_Design_Components' }]);
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.ok(byName.has('Ant_Design_Components__get-component-docs'));
    assert.ok(byName.get('biomcp__article_searcher')?.outputSchema, 'outputSchema kept');
    assert.equal(loadCatalogFile(liveMcpBenchFile).length, 527);
  });
});

describe('evaluate', () => {
  const queries: LabelledQuery[] = [
    { query: 'q1', expected: ['a'] },
    { query: 'q2', expected: ['c'] },
    { query: 'q3', expected: ['z'] },
    { query: 'q4', expected: ['f', 'e'] },
  ];
  const rankings: Record<string, string[]> = {
    q1: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], // rank 1
    q2: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], // rank 3
    q3: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], // miss
    q4: ['a', 'b', 'c', 'd', 'x', 'e', 'f', 'g', 'h', 'i'], // first expected ('e') at rank 6
  };

  test('hand-computed Recall@1/5/10 and MRR', async () => {
    const result = await evaluate((q) => rankings[q]!, queries);
    assert.equal(result.n, 4);
    assert.equal(result.recallAt1, 1 / 4);
    assert.equal(result.recallAt5, 2 / 4);
    assert.equal(result.recallAtK, 3 / 4);
    assert.equal(result.k, 10);
    assert.ok(Math.abs(result.mrr - (1 + 1 / 3 + 0 + 1 / 6) / 4) < 1e-12);
  });

  test('async rankers, custom k, progress callback', async () => {
    const progress: [number, number][] = [];
    const result = await evaluate(async (q) => rankings[q]!, queries, {
      k: 3,
      onProgress: (done, total) => progress.push([done, total]),
    });
    assert.equal(result.recallAtK, 2 / 4);
    assert.deepEqual(progress, [
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
  });

  test('a name repeated in the ranking counts at its first position', async () => {
    const result = await evaluate(() => ['b', 'a', 'a'], [{ query: 'q', expected: ['a'] }]);
    assert.equal(result.mrr, 1 / 2);
  });

  test('empty query set gives zeros; unlabelled query is rejected', async () => {
    assert.deepEqual(await evaluate(() => [], []), { n: 0, k: 10, recallAt1: 0, recallAt5: 0, recallAtK: 0, mrr: 0 });
    await assert.rejects(evaluate(() => ['a'], [{ query: 'q', expected: [] }]), /no expected tool names/);
  });
});

describe('formatTable', () => {
  test('aligned columns, rates with three decimals, k folded into the header', () => {
    const table = formatTable([
      { label: 'bm25', n: 64, k: 10, recallAt1: 0.5, recallAt5: 0.875, recallAtK: 1, mrr: 0.6543 },
      { label: 'hybrid', n: 64, k: 10, recallAt1: 1, recallAt5: 1, recallAtK: 1, mrr: 1 },
    ]);
    assert.equal(
      table,
      [
        '         n  Recall@1  Recall@5  Recall@10    MRR',
        '------  --  --------  --------  ---------  -----',
        'bm25    64     0.500     0.875      1.000  0.654',
        'hybrid  64     1.000     1.000      1.000  1.000',
      ].join('\n'),
    );
  });
});

describe('FastMcpBm25 (reproduction)', () => {
  // Token counts, by FastMCP's rules (lowercase, split on [^a-z0-9]+, drop 1-character tokens):
  //   send_email: send email send an email message → 6 tokens (send 2, email 2, an 1, message 1)
  //   read_file:  read file read file              → 4 tokens ("a" dropped)
  //   send_sms:   send sms send text message       → 5 tokens
  // N = 3, avgdl = 15 / 3 = 5.
  const tools = [
    tool('send_email', 'Send an email message'),
    tool('read_file', 'Read a file'),
    tool('send_sms', 'Send a text message'),
  ];
  const bm25 = new FastMcpBm25(tools);

  test('tokenizer', () => {
    assert.deepEqual(fastMcpTokenize('Send a  text-message, v2! 天气 sendEmail'), ['send', 'text', 'message', 'v2', 'sendemail']);
  });

  test('exact Okapi score with idf = ln((N - df + 0.5)/(df + 0.5) + 1)', () => {
    const [hit] = bm25.searchWithScores('email', 5);
    // df(email) = 1, tf = 2, dl = 6.
    const expected = (Math.log((3 - 1 + 0.5) / (1 + 0.5) + 1) * (2 * 2.5)) / (2 + 1.5 * (1 - 0.75 + (0.75 * 6) / 5));
    assert.equal(hit?.name, 'send_email');
    assert.ok(Math.abs(hit.score - expected) < 1e-12, `${hit.score} vs ${expected}`);
  });

  test('length normalisation puts the shorter matching document first; non-matching ones are left out', () => {
    assert.deepEqual(bm25.search('send message', 10), ['send_sms', 'send_email']);
  });

  test('a term in most documents still scores positive (the +1 inside ln)', () => {
    assert.deepEqual(bm25.search('send', 10), ['send_sms', 'send_email']);
  });

  test('k limits the result; unknown and one-letter tokens match nothing', () => {
    assert.deepEqual(bm25.search('send message', 1), ['send_sms']);
    assert.deepEqual(bm25.search('a zzz', 10), []);
  });

  test('repeated query tokens count per occurrence; ties keep catalog order', () => {
    const index = new FastMcpBm25([tool('y_tool', 'beta'), tool('x_tool', 'alpha'), tool('z_tool', 'gamma')]);
    assert.deepEqual(index.search('beta alpha alpha', 10), ['x_tool', 'y_tool']);
    assert.deepEqual(index.search('tool', 10), ['y_tool', 'x_tool', 'z_tool']);
  });

  test('parameter names and descriptions are indexed; camelCase names are not split', () => {
    const index = new FastMcpBm25([tool('lookupWeather', 'Forecast', { city: { description: 'Name of the town' } })]);
    assert.deepEqual(index.search('town', 5), ['lookupWeather']);
    assert.deepEqual(index.search('city', 5), ['lookupWeather']);
    assert.deepEqual(index.search('lookup', 5), []);
    assert.deepEqual(index.search('lookupweather', 5), ['lookupWeather']);
  });

  test('empty catalog', () => {
    assert.deepEqual(new FastMcpBm25([]).search('anything', 5), []);
  });
});

describe('LiteLlmTokenOverlap (reproduction)', () => {
  const tools = [
    tool('get_weather', 'Current weather for a city'),
    tool('send_email', 'Send an email'),
    tool('search_mail', 'Search the mailbox'),
    tool('geo', 'lookup', { zipcode: { description: 'postal code' } }),
  ];
  const overlap = new LiteLlmTokenOverlap(tools);

  test('substring matching, ties in catalog order', () => {
    assert.deepEqual(overlap.search('mail', 10), ['send_email', 'search_mail']);
  });

  test('more matching tokens rank higher; case-insensitive', () => {
    assert.deepEqual(overlap.search('SEARCH Mail', 10), ['search_mail', 'send_email']);
  });

  test('repeated query tokens count each time', () => {
    assert.deepEqual(overlap.search('email email weather', 10), ['send_email', 'get_weather']);
  });

  test('zero scores dropped; parameters are not searched; k respected', () => {
    assert.deepEqual(overlap.search('xyz', 10), []);
    assert.deepEqual(overlap.search('postal', 10), []);
    assert.deepEqual(overlap.search('mail', 1), ['send_email']);
    assert.deepEqual(overlap.search('   ', 10), []);
  });
});

describe('fixtures', () => {
  const catalog = loadCatalogFile(join(fixtures, 'catalog.json'));
  const names = new Set(catalog.map((t) => t.name));

  test('catalog: 40-60 valid, unique, described tools in several naming styles', () => {
    assert.ok(catalog.length >= 40 && catalog.length <= 60, `${catalog.length} tools`);
    assert.equal(names.size, catalog.length);
    for (const t of catalog) {
      assert.match(t.name, MCP_TOOL_NAME);
      assert.match(t.name, /^[a-z]+__./, `${t.name} is not server-qualified`);
      assert.ok(t.description && t.description.length > 10, `${t.name} needs a description`);
      assert.equal(t.inputSchema.type, 'object');
    }
    const local = [...names].map((n) => n.split('__')[1]!);
    assert.ok(local.some((n) => /^[a-z]+[A-Z]/.test(n)), 'camelCase');
    assert.ok(local.some((n) => /^[A-Z][a-z]+[A-Z]/.test(n)), 'PascalCase');
    assert.ok(local.some((n) => /^[a-z]+_[a-z]+/.test(n)), 'snake_case');
    assert.ok(local.some((n) => /^[a-z]+-[a-z]+/.test(n)), 'kebab-case');
    assert.ok(local.some((n) => n.includes('.')), 'dotted');
  });

  test('queries.jsonl: every expected name is in the fixture catalog', () => {
    const queries = loadQueries(join(fixtures, 'queries.jsonl'));
    assert.ok(queries.length >= 50, `${queries.length} queries`);
    assert.equal(new Set(queries.map((q) => q.query)).size, queries.length, 'duplicate query text');
    for (const q of queries) for (const name of q.expected) assert.ok(names.has(name), `${q.query} → ${name}`);
  });

  test('livemcpbench-queries.jsonl: every expected name is in the loaded LiveMCPBench catalog', { skip: skipLiveMcpBench }, () => {
    const live = new Set(loadLiveMcpBench(liveMcpBenchFile).map((t) => t.name));
    const queries = loadQueries(join(fixtures, 'livemcpbench-queries.jsonl'));
    assert.ok(queries.length >= 50, `${queries.length} queries`);
    assert.equal(new Set(queries.map((q) => q.query)).size, queries.length, 'duplicate query text');
    for (const q of queries) for (const name of q.expected) assert.ok(live.has(name), `${q.query} → ${name}`);
  });
});
