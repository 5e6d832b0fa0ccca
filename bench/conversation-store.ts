/**
 * What keeping chat conversations in Redis adds to a proxied turn (issue 47), and what one conversation holds there.
 *
 * Each simulated turn does exactly the store work the chat face does for a request (src/chat/routes.ts): the turn's
 * keys from its history (StickySelections.keys), the sticky lookup (awaited before ranking), the ranked-turn capture
 * (ChatFeedback.observe, beside the forwarding) and the filing of the forwarded tools (after the answer). Conversations
 * of six turns over a 300-tool list, each turn forwarding the earlier turns' tools plus ten new ones (chat.k). Timed
 * per turn, memory store against Redis store, on the same inputs; then MEMORY USAGE of every key one conversation left.
 * The ranking itself and the upstream call are the same in both modes and are left out: this is the difference.
 *
 *   node --import tsx bench/conversation-store.ts [conversations]     (default 300; REDIS_URL, default local)
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { ChatFeedback } from '../src/chat/core/feedback-capture.js';
import { StickySelections } from '../src/chat/core/sticky.js';
import { chatShape } from '../src/chat/openai-chat/answers.js';
import { chatDialect } from '../src/chat/openai-chat/dialect.js';
import type { FeedbackRecorder } from '../src/feedback/service.js';
import { RedisKeys } from '../src/redis/connection.js';
import { MemoryConversationStore, type ConversationStore } from '../src/state/conversations.js';
import { RedisConversationStore } from '../src/state/redis/conversations.js';

const conversations = Number(process.argv[2] ?? 300);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const TURNS = 6;
const TOOLS = 300;
const K = 10;

const toolNames = Array.from({ length: TOOLS }, (_, i) => `service${Math.floor(i / 10)}__action_${i % 10}_of_the_service`);
const tools = toolNames.map((name) => ({ type: 'function', function: { name, description: `Does ${name}`, parameters: { type: 'object', properties: {} } } }));
/** Recording is the same call in both modes (and asynchronous); only the store's work is timed. */
const recorder = { record: async () => ({}) } as unknown as FeedbackRecorder;

/** Runs `conversations` six-turn conversations through the chat face's store calls; per-turn milliseconds. */
async function run(store: ConversationStore, label: string, filings: number[] = []): Promise<number[]> {
  const sticky = new StickySelections(store);
  const feedback = new ChatFeedback(recorder, store);
  const times: number[] = [];
  for (let c = 0; c < conversations; c++) {
    const messages: Record<string, unknown>[] = [];
    for (let turn = 0; turn < TURNS; turn++) {
      messages.push({ role: 'user', content: `${label} conversation ${c}, turn ${turn}: please do task number ${turn} for me` });
      const request = chatDialect.parse({ model: 'm', messages: [...messages], tools });
      // Parsing a 300-tool request (untimed) leaves megabytes of garbage; V8 collects it in a task the event loop runs
      // at its next wait. Without this pause that wait is the Redis store's first round trip (the memory store never
      // waits), so 1 % of Redis turns carried a 6-11 ms scavenge the harness made: the p99 of +8 ms measured until
      // 2026-11-29 (see BENCHMARKS.md). Both modes pause alike, outside the timed span.
      await new Promise((resolve) => setTimeout(resolve, 1));
      const started = performance.now();
      const keys = sticky.keys(request, chatShape, 'key_bench');
      const observed = feedback.observe(chatDialect.conversationSteps(request), {
        query: `task number ${turn}`,
        kept: toolNames.slice(turn * K, turn * K + K).map((name) => ({ name, reason: 'ranked' })),
      }, 'key_bench');
      const earlier = await sticky.get(keys);
      const forwarded = [...earlier, ...toolNames.slice(turn * K, turn * K + K)];
      const answer = `Done with task ${turn} of conversation ${c}.`;
      const filing = performance.now();
      await sticky.set(keys, forwarded, chatShape.answerAt([{ role: 'assistant', content: answer }], 0));
      filings.push(performance.now() - filing);
      await observed;
      times.push(performance.now() - started);
      if (earlier.length !== turn * K) throw new Error(`${label}: turn ${turn} found ${earlier.length} sticky tools, expected ${turn * K}`);
      messages.push({ role: 'assistant', content: answer });
    }
  }
  return times;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const summary = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
};

const redis = new Redis(REDIS_URL);
const prefix = `bench-conv-${randomUUID().slice(0, 8)}`;
const keys = new RedisKeys(prefix);
try {
  // Warm-up: module loading, JIT, the connection and Redis's script cache.
  await run(new MemoryConversationStore(), 'warm');
  await run(new RedisConversationStore({ redis, keys, ttlMs: 3_600_000 }), 'warm');
  const memory = summary(await run(new MemoryConversationStore(), 'memory'));
  const filings: number[] = [];
  const inRedis = summary(await run(new RedisConversationStore({ redis, keys, ttlMs: 3_600_000 }), 'redis', filings));
  const filed = summary(filings);

  // One conversation on its own prefix: every key it left, and its bytes.
  const alone = new RedisKeys(`${prefix}-one`);
  const saved = conversations;
  await (async () => {
    const store = new RedisConversationStore({ redis, keys: alone, ttlMs: 3_600_000 });
    const sticky = new StickySelections(store);
    const feedback = new ChatFeedback(recorder, store);
    const messages: Record<string, unknown>[] = [];
    for (let turn = 0; turn < TURNS; turn++) {
      messages.push({ role: 'user', content: `one conversation, turn ${turn}: please do task number ${turn} for me` });
      const request = chatDialect.parse({ model: 'm', messages: [...messages], tools });
      const turnKeys = sticky.keys(request, chatShape, 'key_bench');
      await feedback.observe(chatDialect.conversationSteps(request), { query: `task number ${turn}`, kept: toolNames.slice(turn * K, turn * K + K).map((name) => ({ name, reason: 'ranked' })) }, 'key_bench');
      const forwarded = [...(await sticky.get(turnKeys)), ...toolNames.slice(turn * K, turn * K + K)];
      const answer = `Done with task ${turn}.`;
      await sticky.set(turnKeys, forwarded, chatShape.answerAt([{ role: 'assistant', content: answer }], 0));
      messages.push({ role: 'assistant', content: answer });
    }
  })();
  const left = await redis.keys(`${alone.prefix}:conv:*`);
  let bytes = 0;
  for (const key of left) bytes += Number(await redis.memory('USAGE', key, 'SAMPLES', '0'));

  const ms = (value: number) => value.toFixed(3);
  console.log(`${saved} conversations × ${TURNS} turns, ${TOOLS} tools, ${K} new tools a turn; store work per proxied turn (ms):\n`);
  console.log('| store | p50 | p99 |');
  console.log('| --- | ---: | ---: |');
  console.log(`| memory | ${ms(memory.p50)} | ${ms(memory.p99)} |`);
  console.log(`| Redis (${REDIS_URL.replace(/\/\/.*@/, '//')}) | ${ms(inRedis.p50)} | ${ms(inRedis.p99)} |`);
  console.log(`| **added by Redis** | **${ms(inRedis.p50 - memory.p50)}** | **${ms(inRedis.p99 - memory.p99)}** |`);
  // The filing is what a caller now waits for before the answer's last bytes (src/chat/core/proxy.ts settle).
  console.log(`| of which the filing (held before the answer's end) | ${ms(filed.p50)} | ${ms(filed.p99)} |`);
  console.log(`\nOne six-turn conversation (${TURNS * K} tools forwarded by its last turn): ${left.length} keys, ${bytes.toLocaleString('en')} bytes (MEMORY USAGE)`);
} finally {
  const made = await redis.keys(`${prefix}*`);
  for (let i = 0; i < made.length; i += 500) await redis.del(...made.slice(i, i + 500));
  await redis.quit();
}
