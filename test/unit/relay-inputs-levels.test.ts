import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogLevels, mostVerbose } from '../../src/mcp/relay/levels.js';
import { declaresTasks, TaskInputs } from '../../src/mcp/relay/task-inputs.js';

describe('TaskInputs (2026-07-28 tasks: inputRequests answered by tasks/update)', () => {
  it('a request waits under a fresh key, puts the task in input_required, and the answer under that key resumes it', async () => {
    const inputs = new TaskInputs();
    const statuses: string[] = [];
    const channel = inputs.channel('t1', () => true, (status) => statuses.push(status));
    const first = channel.request('elicitation/create', { message: 'one?' }, new AbortController().signal);
    const second = channel.request('sampling/createMessage', { messages: [] }, new AbortController().signal);
    const outstanding = inputs.outstanding('t1');
    const keys = Object.keys(outstanding);
    assert.equal(keys.length, 2);
    assert.notEqual(keys[0], keys[1]);
    assert.deepEqual(Object.values(outstanding).map((request) => request.method), ['elicitation/create', 'sampling/createMessage']);
    // Unknown keys and non-object answers are ignored; a partial answer leaves the task waiting for the rest.
    inputs.answer('t1', { nope: { action: 'accept' }, [keys[1]!]: 'not an object' });
    inputs.answer('t1', { [keys[0]!]: { action: 'accept', content: { name: 'x' } } });
    assert.deepEqual(await first, { action: 'accept', content: { name: 'x' } });
    assert.deepEqual(Object.keys(inputs.outstanding('t1')), [keys[1]]);
    assert.deepEqual(statuses, ['input_required', 'input_required']);
    // An answered key answers nothing twice.
    inputs.answer('t1', { [keys[0]!]: { action: 'decline' }, [keys[1]!]: { model: 'm' } });
    assert.deepEqual(await second, { model: 'm' });
    assert.deepEqual(inputs.outstanding('t1'), {});
    assert.equal(statuses.at(-1), 'working');
  });

  it('a call that gives up, or a task that ends, fails its outstanding requests', async () => {
    const inputs = new TaskInputs();
    const abort = new AbortController();
    const channel = inputs.channel('t2', () => true, () => {});
    const waiting = channel.request('elicitation/create', {}, abort.signal);
    abort.abort();
    await assert.rejects(waiting, /ended before the client answered/);
    const again = channel.request('roots/list', {}, new AbortController().signal);
    inputs.drop('t2');
    await assert.rejects(again, /the task ended/);
    assert.deepEqual(inputs.outstanding('t2'), {});
  });

  it('declaresTasks reads capabilities.extensions', () => {
    assert.equal(declaresTasks({ extensions: { 'io.modelcontextprotocol/tasks': {} } }), true);
    assert.equal(declaresTasks({ extensions: {} }), false);
    assert.equal(declaresTasks(undefined), false);
  });
});

describe('LogLevels (logging/setLevel towards shared upstream connections)', () => {
  it('forwards the most verbose level any live session set, only when it changes, and raises it when that session goes', () => {
    const sent: string[] = [];
    const levels = new LogLevels((level) => sent.push(level));
    levels.set('a', 'warning');
    levels.set('b', 'debug');
    levels.set('c', 'error');
    levels.set('a', 'warning');
    assert.deepEqual(sent, ['warning', 'debug']);
    levels.drop('b');
    assert.deepEqual(sent, ['warning', 'debug', 'warning']);
    levels.drop('a');
    levels.drop('c');
    assert.deepEqual(sent, ['warning', 'debug', 'warning', 'error'], 'the last session left asks for error; none left: unchanged');
    assert.equal(levels.current, 'error');
    assert.equal(mostVerbose([]), undefined);
  });
});
