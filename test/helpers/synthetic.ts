import type { Tool } from '../../src/catalog/types.js';

const verbs = ['create', 'list', 'delete', 'update', 'fetch', 'search', 'export', 'import', 'archive', 'sync'];
const nouns = ['invoice', 'ticket', 'message', 'calendar event', 'file', 'repository', 'customer', 'order', 'report', 'dashboard', 'contact', 'playlist'];
const places = ['in the billing system', 'for the support desk', 'on the team workspace', 'in cloud storage', 'for a project', 'in the warehouse'];

/**
 * Distinct, plausible tool definitions (no randomness: the same n always gives the same catalog). Each description
 * carries a unique word, `<prefix><i>`, so a test can search for one tool by it.
 */
export function syntheticTools(count: number, prefix = 'synthetic'): Tool[] {
  return Array.from({ length: count }, (_, i) => {
    const verb = verbs[i % verbs.length]!;
    const noun = nouns[Math.floor(i / verbs.length) % nouns.length]!;
    const place = places[Math.floor(i / (verbs.length * nouns.length)) % places.length]!;
    return {
      name: `${prefix}_${i}_${verb}_${noun.replace(/ /g, '_')}`,
      description: `${verb[0]!.toUpperCase()}${verb.slice(1)} a ${noun} ${place} (entry ${prefix}${i}).`,
      inputSchema: {
        type: 'object',
        properties: { id: { type: 'string', description: `Identifier of the ${noun}` }, limit: { type: 'number' } },
      },
    };
  });
}
