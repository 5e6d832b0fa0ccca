import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository checkout the tests run in (fixtures, scripts, deployment files). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

/**
 * The shared labelled datasets (metatool/, livemcpbench/, everyday/): `../shared/datasets` beside the checkout, or
 * TOOLROUTER_DATASETS when the checkout lives elsewhere (a git worktree), so tests that need them run instead of skipping.
 */
export const DATASETS_DIR = process.env.TOOLROUTER_DATASETS || path.join(REPO_ROOT, '..', 'shared', 'datasets');
