// Whether this Node is one toolrouter supports (package.json `engines`), checked by bin/toolrouter.js before anything
// else loads: on an older Node the code would fail later with an obscure syntax or API error, after npm's install
// warnings had scrolled by. Plain JavaScript with no imports, so that it runs on any Node.

/**
 * Whether `version` (e.g. "20.20.2") satisfies `range` as package.json's engines writes it: clauses joined by `||`,
 * each `^X.Y.Z`, `>=X[.Y[.Z]]` or `X[.Y[.Z]]`. A range of another form is taken as satisfied (the check must never
 * refuse a Node it cannot judge).
 */
export function satisfies(version, range) {
  const parse = (text) => text.split('.').map((part) => Number(part));
  const compare = (a, b) => {
    for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  const have = parse(version.replace(/^v/, ''));
  for (const clause of range.split('||').map((part) => part.trim())) {
    const match = /^(\^|>=)?(\d+(?:\.\d+){0,2})$/.exec(clause);
    if (!match) return true;
    const want = parse(match[2]);
    if (match[1] === '^' && have[0] === want[0] && compare(have, want) >= 0) return true;
    if (match[1] === '>=' && compare(have, want) >= 0) return true;
    if (match[1] === undefined && want.every((part, i) => have[i] === part)) return true;
  }
  return false;
}

/** The one line to print when this Node is not supported; undefined when it is. */
export function unsupportedNode(version, range) {
  if (satisfies(version, range)) return undefined;
  return `toolrouter: Node ${version} is not supported; it needs Node ${range.replace(/\s*\|\|\s*/g, ' or ')} (package.json engines): install Node 24 LTS`;
}
