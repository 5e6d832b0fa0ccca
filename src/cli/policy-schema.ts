/** `toolrouter policy schema`: the Cedar schema policies are validated against (with the configured policy.claims). */
import { loadConfig } from '../config/config.js';
import { cedarSchema } from '../policy/schema.js';

export function policySchemaCommand(env: NodeJS.ProcessEnv = process.env): void {
  let claims: string[] = [];
  try {
    claims = loadConfig(env).policy.claims;
  } catch {
    // No usable configuration: the schema without claims (`config check` says what is wrong).
  }
  process.stdout.write(cedarSchema(claims));
}
