/**
 * The Cedar schema toolrouter ships (`toolrouter policy schema` prints it): what a policy may say about the caller, the
 * action, the resource and the context. Namespace-less, so policies write `Caller::"…"`, `Group::"…"`, `Tool::"…"`.
 */

/**
 * The schema for these `policy.claims`. Resources and prompts are `Tool`-shaped entities too (`Resource::"<uri>"`,
 * `Prompt::"<name>"` with `name`, `server` and read-only hints), so one policy can speak of all three.
 */
export function cedarSchema(claims: readonly string[] = []): string {
  const claimFields = claims.map((claim) => `    ${claim}?: Set<String>,`).join('\n');
  return `// toolrouter's Cedar schema (docs/governance.md).
// principal: Caller::"admin" | "open" | "anonymous" | "<key_id>" | "user:<sub>", member of Group::"<name>".
entity Group;
entity Caller in [Group] {
  // admin, open, anonymous, key, user
  kind: String,
  key_alias?: String,
  // the JWT claims listed in policy.claims
  claims: {
${claimFields}
  },
};
// A tool by its catalog name; hints as the tool declares them, else the MCP spec's defaults.
entity Tool {
  name: String,
  server: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
// A resource by its URI, a prompt by its catalog name: shaped like a Tool (reading them is read-only: readOnlyHint
// true, destructiveHint false, idempotentHint true, openWorldHint false), so a policy over resource.destructiveHint
// holds for every action.
entity Resource {
  name: String,
  server: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
entity Prompt {
  name: String,
  server: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};

// context.arguments is the call's arguments as a record (open: its attributes are not checked against this schema;
// test them with \`has\` first). context.surface: mcp, rest or code.
action call_tool appliesTo { principal: Caller, resource: Tool, context: { arguments: {}, surface: String } };
action read_resource appliesTo { principal: Caller, resource: Resource, context: { arguments: {}, surface: String } };
action get_prompt appliesTo { principal: Caller, resource: Prompt, context: { arguments: {}, surface: String } };
`;
}
