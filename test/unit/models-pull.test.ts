import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { HubError, pullModel, selectFiles } from '../../src/embedding/hub.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { tinyModelsDir, writeOneHotEncoder } from '../helpers/tiny-models.js';

const run = promisify(execFile);

/** Every file under `dir`, as repository paths. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? filesUnder(full, `${prefix}${name}/`) : [`${prefix}${name}`];
  });
}

/**
 * A local server shaped like the Hugging Face hub: `GET /api/models/<id>/revision/<rev>` lists a repository's files
 * (`siblings[].rfilename`), `GET /<id>/resolve/<rev>/<file>` serves one. The repository is a tiny model the test
 * writes itself, plus precisions and files an embedder does not need, which a pull must leave behind.
 */
describe('toolrouter models pull: a transformers.js model from a hub-shaped server', () => {
  const source = tinyModelsDir();
  const id = 'test-owner/tiny-encoder';
  const words = ['alpha', 'beta', 'gamma'];
  let server: Server;
  let hub: string;
  const requests: string[] = [];

  before(async () => {
    writeOneHotEncoder(source, id, words, { dtypes: ['fp32', 'q8'] });
    const repo = path.join(source, id);
    const extra = { 'README.md': '# tiny', 'pytorch_model.bin': 'not for transformers.js' };
    server = createServer((req, res) => {
      requests.push(req.url!);
      const url = new URL(req.url!, 'http://hub');
      const listing = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/);
      if (listing) {
        if (listing[1] !== id) return void res.writeHead(404).end('{"error":"Repository not found"}');
        const siblings = [...filesUnder(repo), ...Object.keys(extra), '../evil.json', 'onnx/../../evil.json'].map((rfilename) => ({ rfilename }));
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, siblings }));
      }
      const file = url.pathname.match(/^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/);
      if (file && file[1] === id && existsSync(path.join(repo, file[3]!))) {
        const body = readFileSync(path.join(repo, decodeURIComponent(file[3]!)));
        return void res.writeHead(200, { 'content-length': body.length }).end(body);
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    hub = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('fetches config, tokenizer and one precision into <models dir>/<id>, and the embedder loads it offline', async () => {
    const modelsDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-pull-'));
    const events: string[] = [];
    const result = await pullModel({ modelId: id, modelsDir, endpoint: hub, onProgress: (event) => events.push(event.kind) });
    assert.equal(result.dtype, 'fp32');
    const pulled = filesUnder(path.join(modelsDir, id)).sort();
    assert.ok(pulled.includes('onnx/model.onnx') && pulled.includes('config.json') && pulled.includes('tokenizer.json'), pulled.join());
    assert.ok(!pulled.includes('onnx/model_quantized.onnx'), 'only one precision is fetched');
    assert.ok(!pulled.includes('pytorch_model.bin') && !pulled.includes('README.md'), 'files an embedder does not read stay behind');
    assert.ok(events.includes('file') && events.includes('bytes'), 'progress is reported');
    for (const file of pulled) assert.deepEqual(readFileSync(path.join(modelsDir, id, file)), readFileSync(path.join(source, id, file)), file);
    // The pulled model serves embeddings with remote models off: nothing more is fetched.
    const embedder = await createEmbedder({ model: id, modelsDir, allowRemoteModels: false, pooling: 'mean' });
    const [vector] = await embedder.embed(['beta']);
    assert.deepEqual(Array.from(vector!).map((x) => Math.round(x)), [0, 1, 0]);
  });

  it('picks the precision asked for, skips files already there, and refetches them with force', async () => {
    const modelsDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-pull-'));
    const q8 = await pullModel({ modelId: id, modelsDir, endpoint: hub, dtype: 'q8' });
    assert.ok(q8.files.includes('onnx/model_quantized.onnx') && !q8.files.includes('onnx/model.onnx'));
    const skipped: string[] = [];
    const again = await pullModel({ modelId: id, modelsDir, endpoint: hub, dtype: 'q8', onProgress: (event) => event.kind === 'skipped' && skipped.push(event.file) });
    assert.equal(again.bytes, 0);
    assert.deepEqual(skipped.sort(), [...q8.files].sort());
    const forced = await pullModel({ modelId: id, modelsDir, endpoint: hub, dtype: 'q8', force: true });
    assert.equal(forced.bytes, q8.bytes);
  });

  it('refuses bad ids before any request, and says what is wrong with a missing model or precision', async () => {
    const modelsDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-pull-'));
    const before = requests.length;
    for (const bad of ['../etc', 'owner/../x', 'no-owner', 'a/b/c', '']) {
      await assert.rejects(pullModel({ modelId: bad, modelsDir, endpoint: hub }), (error: HubError) => error.code === 'invalid_request', bad);
    }
    assert.equal(requests.length, before, 'no request for an invalid id');
    await assert.rejects(pullModel({ modelId: 'test-owner/missing', modelsDir, endpoint: hub }), /not on http/);
    await assert.rejects(pullModel({ modelId: id, modelsDir, endpoint: hub, dtype: 'fp16' }), /no fp16 weights .* offers fp32, q8/);
    await assert.rejects(pullModel({ modelId: id, modelsDir, endpoint: hub, maxFileBytes: 10 }), (error: HubError) => error.code === 'payload_too_large');
    assert.deepEqual(readdirSync(modelsDir).filter((name) => name.endsWith('.partial')), [], 'nothing half-written is left');
    // External-data parts come with their graph; other files do not.
    assert.deepEqual(selectFiles(['config.json', 'onnx/model.onnx', 'onnx/model.onnx_data', 'onnx/model_fp16.onnx', 'vocab.txt'], undefined, id).files, [
      'config.json',
      'vocab.txt',
      'onnx/model.onnx',
      'onnx/model.onnx_data',
    ]);
    // A listing naming paths outside the repository never becomes a request, nor a path on this machine.
    assert.ok(!requests.some((url) => url.includes('evil')), requests.join());
  });

  it('the CLI pulls from a mirror given by --mirror or HF_ENDPOINT into MODELS_DIR', async () => {
    for (const how of ['flag', 'env'] as const) {
      const modelsDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-pull-'));
      const args = ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts'), 'models', 'pull', id, ...(how === 'flag' ? ['--mirror', hub] : [])];
      const { stdout } = await run(process.execPath, args, {
        cwd: REPO_ROOT,
        env: { ...process.env, MODELS_DIR: modelsDir, HF_ENDPOINT: how === 'env' ? hub : 'http://127.0.0.1:9', TOOLROUTER_CONFIG: '' },
      });
      assert.match(stdout, new RegExp(`${id} \\(fp32\\) ready in ${modelsDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      assert.ok(existsSync(path.join(modelsDir, id, 'onnx/model.onnx')), how);
    }
  });
});
