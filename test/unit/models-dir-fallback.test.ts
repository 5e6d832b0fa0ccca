import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { OFFLINE_MODEL_ID } from '../../src/embedding/offline-model.js';
import { REPO_ROOT } from '../helpers/paths.js';

test('a MODELS_DIR for other models falls back to the shipped offline default model instead of failing or building', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'toolrouter-own-models-'));
  try {
    const shipped = path.join(REPO_ROOT, 'models');
    assert.ok(existsSync(path.join(shipped, OFFLINE_MODEL_ID, 'config.json')), 'the suite builds the offline model first (npm run models:build)');
    const embedder = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: own, shippedModelsDir: shipped, allowRemoteModels: false });
    const [vector] = await embedder.embed(['send an email']);
    assert.ok(vector && vector.length > 0);
    assert.deepEqual(readdirSync(own), [], 'nothing was built into the user\'s models dir');
  } finally {
    rmSync(own, { recursive: true, force: true });
  }
});
