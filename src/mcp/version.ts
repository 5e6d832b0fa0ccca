import { packageVersion } from '../package-root.js';

/** toolrouter's own name and version, as it introduces itself to upstream servers and to its MCP clients. */
export const IMPLEMENTATION = {
  name: 'toolrouter',
  version: packageVersion(),
};
