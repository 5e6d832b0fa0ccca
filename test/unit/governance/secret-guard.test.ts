import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SecretScanner } from '../../../src/guardrails/secrets.js';

const guard = new SecretScanner({ arguments: 'block', results: 'redact', maxBytes: 1024 * 1024 });

// Built at run time, so no credential-shaped literal sits in the repository.
const GITHUB = `ghp_${'Ab1'.repeat(12)}`;
const AWS = `AKIA${'Q7Z2X9W4V8T3R6P5'}`;
const SLACK = `xoxb-123456789012-1234567890123-${'AbCdEfGhIjKl'.repeat(2)}`;
const PRIVATE_KEY = `-----BEGIN RSA PRIVATE KEY-----\n${'MIIEowIBAAKCAQEA1234567890abcdef'.repeat(5)}\n-----END RSA PRIVATE KEY-----`;
const URL_WITH_PASSWORD = 'https://deploy:s3cretpass@db.example.com/prod';

for (const [name, secret, rule, kept] of [
  ['a GitHub token', GITHUB, 'github', ''],
  ['an AWS access key id', AWS, 'aws', ''],
  ['a Slack token', SLACK, 'slack', ''],
  ['a private key', PRIVATE_KEY, 'privatekey', ''],
  // The rule matches scheme to host (the credential); the path stays.
  ['a URL with a password', URL_WITH_PASSWORD, 'basicauth', '/prod'],
] as const) {
  test(`${name} is found, named by rule and path, and redacted`, async () => {
    const args = { note: 'deploy it', nested: { list: ['fine', `use ${secret} please`] } };
    const { findings, redacted } = await guard.scan(args);
    assert.equal(findings.length, 1, JSON.stringify(findings));
    assert.equal(findings[0]!.rule, `@secretlint/secretlint-rule-${rule}`);
    assert.equal(findings[0]!.path, '$.nested.list[1]');
    const text = JSON.stringify(redacted);
    assert.ok(!text.includes(secret.slice(0, 30)) && !text.includes('s3cretpass'), text);
    assert.match(redacted.nested.list[1]!, new RegExp(`^use \\[REDACTED:@secretlint/secretlint-rule-${rule}\\]${kept} please$`));
    // The original is untouched.
    assert.ok(args.nested.list[1]!.includes(secret));
  });
}

test('ordinary arguments: no findings, the same object back', async () => {
  const args = { path: '/data/report.txt', content: 'quarterly numbers, 1.5% up', n: 3, flags: [true, null] };
  const { findings, redacted } = await guard.scan(args);
  assert.deepEqual(findings, []);
  assert.equal(redacted, args);
});

test('several secrets in several strings are each found in their own string', async () => {
  const { findings, redacted } = await guard.scan({ a: GITHUB, b: ['x'.repeat(20), URL_WITH_PASSWORD] });
  assert.deepEqual(findings.map((finding) => finding.path).sort(), ['$.a', '$.b[1]']);
  assert.deepEqual(redacted, { a: '[REDACTED:@secretlint/secretlint-rule-github]', b: ['x'.repeat(20), '[REDACTED:@secretlint/secretlint-rule-basicauth]/prod'] });
});

test('scanning is bounded by maxBytes', async () => {
  const small = new SecretScanner({ arguments: 'block', results: 'redact', maxBytes: 1024 });
  const { findings } = await small.scan({ filler: 'y'.repeat(2_000), token: GITHUB });
  assert.deepEqual(findings, []);
});

test('scanning leaves no performance marks behind (secretlint\'s profiler is off)', async () => {
  const { performance } = await import('node:perf_hooks');
  const before = performance.getEntriesByType('mark').length;
  for (let i = 0; i < 20; i++) await guard.scan({ text: `call ${i}: nothing secret here` });
  assert.equal(performance.getEntriesByType('mark').length, before);
});
