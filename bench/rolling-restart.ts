/**
 * The full rolling-restart run of issue 56: 30 MCP sessions × at least 300 calls each through round-robin HAProxy while
 * each of three instances is restarted in turn. Prints calls and failures. Run: node --import tsx bench/rolling-restart.ts
 */
import { rollingRestart } from '../test/helpers/rolling-restart.js';

const sessions = Number(process.argv[2] ?? 30);
const calls = Number(process.argv[3] ?? 300);
const result = await rollingRestart({ sessions, calls, log: (line) => console.log(line) });
console.log(JSON.stringify({ sessions, calls: result.calls, failed: result.failures.length, restarts: result.restarts, firstFailures: result.failures.slice(0, 5) }, null, 2));
process.exit(result.failures.length === 0 ? 0 : 1);
