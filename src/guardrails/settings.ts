/** Guardrails' settings (YAML `guardrails`): the secret scanner on tool calls. Assembled by `src/config/`. */
import { z } from 'zod';

/** Credentials kept out of tool calls (src/guardrails, docs/governance.md). */
export const guardrailsSettingsSchema = z
  .object({
    /** secretlint's recommended rules (cloud, GitHub, Slack, OpenAI, Anthropic keys, private keys, URLs with passwords) over arguments and results. */
    secrets: z
      .object({
        /**
         * A credential in a call's arguments: block (guardrail_blocked, the rule named, the value never echoed), redact
         * (`[REDACTED:<rule>]` sent upstream instead), log, off. block by default: a redacted call may still run, and
         * run wrong, while the agent believes it sent what it wrote.
         */
        arguments: z.enum(['block', 'redact', 'log', 'off']).default('block'),
        /** A credential in an upstream's result: redact (before the agent sees it), log, off. */
        results: z.enum(['redact', 'log', 'off']).default('redact'),
      })
      .prefault({}),
  })
  .prefault({});

export type GuardrailsSettings = z.output<typeof guardrailsSettingsSchema>;
