/**
 * The secret guardrail's seam: scans a call's arguments and an upstream's result for credentials (secretlint's
 * recommended rules) and says what to do. The call path knows only `SecretGuard`; the detector lives beside this file.
 */

export type ArgumentsAction = 'block' | 'redact' | 'log' | 'off';
export type ResultsAction = 'redact' | 'log' | 'off';

export interface SecretFinding {
  /** The secretlint rule id that matched (e.g. `@secretlint/secretlint-rule-github`); never the value. */
  rule: string;
  /** JSON path of the string it was found in (`$.token`, `$.content[0].text`). */
  path: string;
}

export interface ScanOutcome<T> {
  findings: SecretFinding[];
  /** The value with every finding replaced by `[REDACTED:<rule>]` (the same object when nothing was found). */
  redacted: T;
}

export interface SecretGuard {
  readonly arguments: ArgumentsAction;
  readonly results: ResultsAction;
  /** Scans every string in the value (bounded by `mcp.maxResultBytes`); never throws for odd input. */
  scan<T>(value: T): Promise<ScanOutcome<T>>;
}
