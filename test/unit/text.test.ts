import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalText, embeddingText, searchableText, splitIdentifier, tokenize } from '../../src/catalog/text.js';

describe('splitIdentifier', () => {
  const cases: [string, string[]][] = [
    ['Gmail_SendEmail', ['gmail', 'send', 'email']],
    ['get-user', ['get', 'user']],
    ['getUserById', ['get', 'user', 'by', 'id']],
    ['PascalCaseName', ['pascal', 'case', 'name']],
    ['snake_case_name', ['snake', 'case', 'name']],
    ['kebab-case-name', ['kebab', 'case', 'name']],
    ['fs.readFile', ['fs', 'read', 'file']],
    ['getHTTPResponse', ['get', 'http', 'response']],
    ['XMLHttpRequest', ['xml', 'http', 'request']],
    ['base64Encode', ['base64', 'encode']],
    ['s3ListBuckets', ['s3', 'list', 'buckets']],
    ['github__create_issue', ['github', 'create', 'issue']],
    ['UPPER_SNAKE', ['upper', 'snake']],
    ['', []],
    ['__', []],
  ];
  for (const [input, expected] of cases) {
    it(`splits ${JSON.stringify(input)}`, () => assert.deepEqual(splitIdentifier(input), expected));
  }
});

describe('tokenize', () => {
  it('splits identifiers inside prose and drops single ASCII characters', () => {
    assert.deepEqual(tokenize("Use Gmail_SendEmail, it's an e-mail tool"), ['use', 'gmail', 'sendemail', 'send', 'email', 'it', 'an', 'mail', 'tool']);
  });
  it('keeps a camelCase word whole as well as split, so a brand typed with capitals meets the same word in lower case (issue 42)', () => {
    assert.deepEqual(tokenize('trending on GitHub'), ['trending', 'on', 'github', 'git', 'hub']);
    assert.deepEqual(tokenize('github'), ['github']);
    assert.deepEqual(tokenize('getHTTPResponse base64Encode'), ['gethttpresponse', 'get', 'http', 'response', 'base64encode', 'base64', 'encode']);
    // snake and kebab case were never one word: only their parts.
    assert.deepEqual(tokenize('get_user get-user'), ['get', 'user', 'get', 'user']);
  });
  it('indexes unspaced scripts as character pairs', () => {
    assert.deepEqual(tokenize('必应搜索'), ['必应', '应搜', '搜索']);
  });
  it('keeps accented words whole', () => {
    assert.deepEqual(tokenize('Météo demain'), ['météo', 'demain']);
  });
});

describe('searchableText', () => {
  const tool = {
    name: 'mail__sendEmail',
    title: 'Send email',
    description: 'Send an   email\nto someone',
    inputSchema: {
      type: 'object' as const,
      properties: { recipientAddress: { type: 'string', description: 'Who gets it' }, body: { type: 'string' } },
    },
  };

  it('separates the server prefix from the name and splits parameter names', () => {
    const text = searchableText(tool, 'mail');
    assert.equal(text.name, 'send email');
    assert.equal(text.server, 'mail');
    assert.equal(text.description, 'Send an email to someone');
    assert.equal(text.params, 'recipient address ; Who gets it ; body');
  });

  it('derives description and params from the tool, yet copies of the text (spread, postMessage) are six plain strings', async () => {
    const text = searchableText(tool, 'mail', '__', 'Mail for the team');
    const plain = { name: 'send email', title: 'Send email', description: 'Send an email to someone', server: 'mail', params: 'recipient address ; Who gets it ; body', context: 'Mail for the team' };
    assert.deepEqual({ ...text }, plain);
    assert.deepEqual(JSON.parse(JSON.stringify(text)), plain);
    const channel = new MessageChannel();
    const posted = new Promise((resolve) => channel.port2.once('message', resolve));
    channel.port1.postMessage(text);
    assert.deepEqual(await posted, plain);
    channel.port1.close();
  });

  it('keeps the whole name when the tool has no server', () => {
    assert.equal(searchableText(tool).name, 'mail send email');
  });

  it('feeds name, title, description and parameters to the embedder', () => {
    const text = embeddingText(searchableText(tool, 'mail'));
    for (const part of ['send email', 'Send an email to someone', 'recipient address', 'Who gets it']) {
      assert.ok(text.includes(part), `${part} missing from ${text}`);
    }
  });

  it('labels fields in the canonical text so moving words between fields changes it', () => {
    const a = canonicalText('t', { name: 'a', title: 'b', description: '', server: '', params: '', context: '' });
    const b = canonicalText('t', { name: 'a b', title: '', description: '', server: '', params: '', context: '' });
    assert.notEqual(a, b);
  });
});
