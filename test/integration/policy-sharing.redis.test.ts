import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { Access } from '../../src/auth/access.js';
import { PolicyService } from '../../src/policy/service.js';
import { policySettingsSchema } from '../../src/policy/settings.js';
import { RedisBus } from '../../src/redis/bus.js';
import { RedisKeys } from '../../src/redis/connection.js';
import { waitFor } from '../helpers/mcp.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const log = pino({ level: 'silent' });
const target = { id: 'files__read_file', name: 'read_file', server: 'files', annotations: { readOnlyHint: true } };
const decide = (service: PolicyService) => service.engine.decide({ action: 'call_tool', access: Access.open, target, surface: 'mcp' });

/** Two instances, each with its own copy of the policy file (as two hosts would have), sharing one Redis. */
describe('policies with Redis: a reload on one instance reaches every instance', () => {
  const prefix = `policy-share-${randomUUID().slice(0, 8)}`;
  const buses: RedisBus[] = [];
  const services: PolicyService[] = [];

  after(async () => {
    for (const service of services) service.close();
    const probe = new Redis(REDIS_URL);
    await probe.del(new RedisKeys(prefix).key('policy', 'set'));
    probe.disconnect();
    for (const bus of buses) await bus.close();
  });

  async function instance(text: string, changed?: Date): Promise<{ service: PolicyService; file: string }> {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'tr-policy-share-')), 'policies.cedar');
    writeFileSync(file, text);
    if (changed) utimesSync(file, changed, changed);
    const bus = new RedisBus({ url: REDIS_URL, keys: new RedisKeys(prefix), log, connectionName: `${prefix}-${buses.length}` });
    buses.push(bus);
    const service = await PolicyService.start({ settings: policySettingsSchema.parse({ files: [file] }), log, bus, sighup: false });
    services.push(service);
    return { service, file };
  }

  it('the newest set wins: a starting instance adopts the newer stored set; a reload anywhere is adopted everywhere; a bad edit changes nothing', async () => {
    const first = await instance('@id("first") permit (principal, action, resource);');
    assert.deepEqual(decide(first.service).policies, ['first']);
    // The second instance's file is older than the set the first one stored: it adopts the stored set.
    const second = await instance('@id("stale") forbid (principal, action, resource);', new Date(Date.now() - 3_600_000));
    assert.deepEqual(decide(second.service).policies, ['first']);

    writeFileSync(second.file, '@id("edited") permit (principal, action, resource) when { resource.readOnlyHint };');
    assert.equal(await second.service.reload('test'), true);
    assert.deepEqual(decide(second.service).policies, ['edited']);
    await waitFor('the first instance to adopt the edit', () => (decide(first.service).policies[0] === 'edited' ? true : undefined));

    writeFileSync(first.file, 'permit (principal, action resource);');
    assert.equal(await first.service.reload('test'), false);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(decide(first.service).policies, ['edited']);
    assert.deepEqual(decide(second.service).policies, ['edited']);
  });
});
