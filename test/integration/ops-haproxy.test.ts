import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import YAML from 'yaml';
import { chatSettingsSchema } from '../../src/chat/settings.js';
import { REPO_ROOT } from '../helpers/paths.js';

/**
 * The load balancer docker-compose.yml puts in front of the scaled API (docker/haproxy.cfg). Docker cannot run here,
 * so HAProxy itself checks the file (`haproxy -c`, as the container would on start) and the test reads what it says:
 * a broken file, or one that turned sticky or cuts long streams, fails here rather than in someone's deployment.
 */
const HAPROXY = process.env.HAPROXY_BIN ?? '/usr/sbin/haproxy';
const CONFIG = path.join(REPO_ROOT, 'docker/haproxy.cfg');
const run = promisify(execFile);

async function check(file: string): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await run(HAPROXY, ['-c', '-f', file]);
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${stdout ?? ''}${stderr ?? ''}` };
  }
}

/** The directives of one section (`backend api`...), trimmed, comments dropped. */
function section(text: string, header: string): string[] {
  const lines = text.split('\n').map((line) => line.replace(/#.*$/, '').trimEnd());
  const start = lines.findIndex((line) => line.trim() === header);
  assert.ok(start >= 0, `${header} section`);
  const body: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line !== '' && !/^\s/.test(line)) break;
    if (line.trim() !== '') body.push(line.trim());
  }
  return body;
}

/** `11m`, `30s`, `1h`, `500` (ms) → ms. */
function ms(value: string): number {
  const match = /^(\d+)(ms|s|m|h)?$/.exec(value);
  assert.ok(match, `a time: ${value}`);
  return Number(match[1]) * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(match[2] ?? 'ms') as 'ms'];
}

describe('docker/haproxy.cfg', () => {
  const text = readFileSync(CONFIG, 'utf8');

  it('is a valid HAProxy configuration, and the check catches a broken one', async () => {
    const valid = await check(CONFIG);
    assert.ok(valid.ok, valid.output);
    const broken = path.join(mkdtempSync(path.join(tmpdir(), 'haproxy-cfg-')), 'haproxy.cfg');
    writeFileSync(broken, text.replace('balance roundrobin', 'balance round-robin'));
    assert.equal((await check(broken)).ok, false, 'a misspelt directive fails the check');
  });

  it('balances round robin over every api replica by Docker DNS, with no stickiness, checking GET /ready', () => {
    const backend = section(text, 'backend api');
    assert.ok(backend.includes('balance roundrobin'));
    for (const sticky of [/^cookie\b/, /^stick/, /^hash-type\b/, /^balance (source|hdr|uri|url_param)/, /\bcookie\b/]) {
      assert.ok(!backend.some((line) => sticky.test(line)), `no stickiness (${sticky})`);
    }
    assert.ok(backend.includes('option httpchk'));
    assert.ok(backend.some((line) => /^http-check send meth GET uri \/ready\b/.test(line)));
    assert.ok(backend.includes('http-check expect status 200'));
    const template = backend.find((line) => line.startsWith('server-template '));
    assert.match(template ?? '', /^server-template api \d+-\d+ api:8080 check$/, 'the compose service `api`, on its PORT');
    const defaults = backend.find((line) => line.startsWith('default-server ')) ?? '';
    assert.match(defaults, /\bresolvers docker\b/, 'replicas re-resolved as they come and go');
    assert.match(defaults, /\binit-addr none\b/, 'starts before any replica resolves');
    assert.ok(section(text, 'resolvers docker').includes('nameserver dns 127.0.0.11:53'), "Docker's embedded DNS");
  });

  it('keeps streams open longer than the chat proxy waits for its upstream', () => {
    const defaults = section(text, 'defaults');
    const timeout = (name: string) => ms(defaults.find((line) => line.startsWith(`timeout ${name} `))!.split(/\s+/)[2]!);
    const upstreamWait = chatSettingsSchema.parse({}).timeoutMs;
    for (const name of ['client', 'server']) assert.ok(timeout(name) > upstreamWait, `timeout ${name} > chat.timeoutMs (${upstreamWait} ms)`);
    assert.ok(timeout('tunnel') >= timeout('server'));
  });

  it('is what docker-compose.yml runs: the official image, this file, the one published port', () => {
    const compose = YAML.parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
      services: Record<string, { image?: string; volumes?: string[]; ports?: string[]; environment?: Record<string, string>; depends_on?: unknown }>;
    };
    const { haproxy, api } = compose.services;
    assert.ok(haproxy && api);
    assert.match(haproxy.image ?? '', /^haproxy:\d/);
    assert.ok(haproxy.volumes?.includes('./docker/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro'));
    assert.deepEqual(haproxy.ports, ['${TOOLROUTER_PORT:-8080}:8080']);
    assert.ok(section(text, 'frontend toolrouter').includes('bind :8080'));
    assert.equal(api.environment?.PORT, '8080');
    assert.equal(api.ports, undefined, 'replicas are reached through haproxy only');
  });
});
