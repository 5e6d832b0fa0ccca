#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's loader, so `toolrouter` works from any directory without a build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
