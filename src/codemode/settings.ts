/** Code mode's limits (YAML `mcp.sandbox`): schema and defaults. Assembled by `src/config/` through the MCP slice. */
import { z } from 'zod';

/**
 * What one execution of model-written code may use, and how many may run at once. The defaults follow the peers
 * (FastMCP's code mode: 30 s, 50 calls) with a tighter memory cap, since every execution gets its own engine.
 */
export const sandboxSettingsSchema = z
  .object({
    /** Wall time of one execution, host calls included; past it the execution ends with `sandbox_timeout`. */
    timeoutMs: z.number().int().min(100).max(600_000).default(30_000),
    /** The engine's whole WebAssembly memory (heap, strings, arrays); past it the execution ends with `sandbox_memory`. */
    memoryMb: z.number().int().min(32).max(1_024).default(64),
    /** The engine's stack; deep recursion past it is a RangeError the code may catch. */
    stackKb: z.number().int().min(64).max(1_024).default(256),
    /** call_tool and search_tools calls one execution may make. */
    maxCalls: z.number().int().min(1).max(10_000).default(50),
    /** Longest program text (bytes, UTF-8). */
    maxCodeBytes: z.number().int().min(100).max(1_048_576).default(65_536),
    /** Largest JSON return value (bytes); a larger one ends the execution with `sandbox_output`. */
    maxOutputBytes: z.number().int().min(1_024).max(16_777_216).default(65_536),
    /** Captured console output (bytes); lines past it are dropped and the log says so. */
    maxLogBytes: z.number().int().min(0).max(1_048_576).default(16_384),
    /** Arguments of one call from code (bytes of JSON). */
    maxCallBytes: z.number().int().min(1_024).max(16_777_216).default(1_048_576),
    /**
     * Arguments of all calls of one execution together (bytes of JSON): the work code can hand the service is bounded,
     * not only each call's; past it calls are refused (`payload_too_large`) in the sandbox.
     */
    maxTotalCallBytes: z.number().int().min(1_024).max(268_435_456).default(8_388_608),
    /**
     * Calls from one execution out to the service at once; more wait in the sandbox thread (up to 8 MB of their
     * arguments; past that a call is refused with `sandbox_calls`) until one finishes. Promise.all over many calls
     * works; a flood never reaches the service.
     */
    maxPendingCalls: z.number().int().min(1).max(1_000).default(4),
    /**
     * Arguments of calls from code that the service handles at once, all executions together (bytes of JSON); further
     * calls wait their turn, and each starts on its own turn of the event loop. Large calls from many executions at once
     * are spread out instead of holding up /health and every other caller; small calls pass as before.
     */
    maxCallBytesInFlight: z.number().int().min(1_024).max(268_435_456).default(2_097_152),
    /**
     * Nesting of call arguments and of the return value (objects and arrays); deeper ones are refused in the sandbox
     * (`invalid_arguments` for a call, `sandbox_output` for the result), since parsers and schema checks recurse.
     */
    maxDepth: z.number().int().min(8).max(1_000).default(64),
    /** Executions one key (open service: every caller together) may run at once; beyond it `execute` answers busy. */
    maxConcurrentPerKey: z.number().int().min(1).max(1_000).default(2),
    /** Executions of all callers at once (each is a thread). */
    maxConcurrent: z.number().int().min(1).max(1_000).default(8),
    /** Sandbox threads kept warm between executions (each execution still gets a fresh engine). */
    idleThreads: z.number().int().min(0).max(64).default(1),
  })
  .strict()
  .prefault({});

export type SandboxSettings = z.infer<typeof sandboxSettingsSchema>;
