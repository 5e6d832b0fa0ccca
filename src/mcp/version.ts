import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../config/config.js';

/** toolrouter's own name and version, as it introduces itself to upstream servers and to its MCP clients. */
export const IMPLEMENTATION = {
  name: 'toolrouter',
  version: (JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version,
};
