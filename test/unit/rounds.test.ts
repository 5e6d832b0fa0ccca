import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InputRounds } from '../../src/mcp/relay/rounds.js';
import { LocalInstances } from '../../src/state/instances.js';
import { LocalRoundSecrets } from '../../src/state/rounds.js';

/** A call whose upstream asks one question and answers with what it was told. */
async function ask(rounds: InputRounds, owner: string) {
  return rounds.start<string>(owner, () => true, async (channel, signal) => {
    const answer = await channel.request('elicitation/create', { message: 'name?' }, signal);
    return `hello ${String((answer as { content?: { name?: string } }).content?.name)}`;
  });
}

describe('InputRounds: requestState names its holder and is bound to the caller by a MAC', () => {
  it('resumes with its own token only: not another key, not an altered token, not one signed with another secret', async () => {
    const secrets = new LocalRoundSecrets();
    const rounds = new InputRounds(10_000, 10, { instances: new LocalInstances(), secrets });
    const stranger = new InputRounds(10_000, 10, { instances: new LocalInstances() });
    try {
      const round = await ask(rounds, 'key:a');
      assert.ok('requestState' in round);
      const [key] = Object.keys(round.inputRequests);
      const answer = { [key!]: { action: 'accept', content: { name: 'ada' } } };
      const [instance, stateId, mac] = round.requestState.split('.');
      assert.ok(instance && stateId && mac);
      assert.equal(await rounds.resume('key:b', round.requestState, answer), undefined, 'another key');
      const altered = `${instance}.${stateId}.${mac!.slice(0, -2)}${mac!.endsWith('AA') ? 'BB' : 'AA'}`;
      assert.equal(await rounds.resume('key:a', altered, answer), undefined, 'an altered MAC');
      assert.equal(await rounds.resume('key:a', `${instance}.${stateId}x.${mac}`, answer), undefined, 'another state id under the same MAC');
      assert.equal(await stranger.resume('key:a', round.requestState, answer), undefined, 'another secret');
      assert.equal(await rounds.resume('key:a', 'x'.repeat(10_000), answer), undefined, 'oversized');
      assert.deepEqual(await rounds.resume('key:a', round.requestState, answer), { done: 'hello ada' });
      assert.equal(await rounds.resume('key:a', round.requestState, answer), undefined, 'used once');
    } finally {
      rounds.close();
      stranger.close();
    }
  });
});
