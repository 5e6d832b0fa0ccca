/** Policy's settings (YAML `policy`): Cedar policy files and how they are applied. Assembled by `src/config/`. */
import { z } from 'zod';

/** Who may call which tool with which arguments, in Cedar (src/policy, docs/governance.md). */
export const policySettingsSchema = z
  .object({
    /** Cedar policy files; none: no policy applies and every call goes on as before (the key's allowed servers and tools still do). */
    files: z.array(z.string().min(1)).max(1_000).default([]),
    /** enforce: a denial refuses the call; log: decide and record (audit, metrics), never block (for rolling policies out). */
    mode: z.enum(['enforce', 'log']).default('enforce'),
    /** The JWT claim whose values become the caller's `Group`s (a string or a list of strings). */
    groupsClaim: z.string().min(1).max(200).default('groups'),
    /** JWT claims copied to `principal.claims.<name>` (each a Set of strings; a single value becomes a one-element set). */
    claims: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a claim name must be a Cedar identifier (letters, digits, _)')).max(64).default([]),
    /** A @confirm policy whose caller cannot be asked (REST, a client without form elicitation): deny (confirmation_required) or allow without asking. */
    confirmWithoutElicitation: z.enum(['deny', 'allow']).default('deny'),
  })
  .prefault({});

export type PolicySettings = z.output<typeof policySettingsSchema>;
