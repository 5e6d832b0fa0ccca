import { fileURLToPath } from 'node:url';

/** The repository checkout the tests run in (fixtures, scripts, deployment files). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
