/**
 * Fetches a transformers.js model from the Hugging Face hub, or a mirror shaped like it (`HF_ENDPOINT`), into the
 * models directory, in the layout the embedder loads (`<models dir>/<owner>/<name>/config.json`, `onnx/model.onnx`…).
 * Only what an embedder needs is fetched: the JSON and text files at the top (config, tokenizer) and one ONNX weight
 * file (with its external-data parts), not every precision a repository offers (a model repo often holds 1–2 GB of them).
 */
import { createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ToolrouterError } from '../errors.js';
import { ONNX_DTYPES, onnxFileOf, type OnnxDtype } from './runtime.js';

/** The public hub; a mirror (hf-mirror.com, an Artifactory remote, a local server) is given as `endpoint`. */
export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';

/** `owner/name`, as the hub spells repository ids: no `..`, no further path parts. */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
/** Repository file paths fetched: relative, plain characters, no `..` segment (they become paths on this machine). */
const SAFE_FILE = /^(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;
/** Top-level files an embedder may read: config.json, tokenizer.json, tokenizer_config.json, vocab.txt, … */
const SMALL_FILE = /^[^/]+\.(json|txt|model)$/;
/** The repository listing is JSON of a few kB; anything far larger is not a hub answer. */
const MAX_LISTING_BYTES = 8 * 1024 * 1024;

export interface PullOptions {
  /** `owner/name` on the hub, e.g. `Xenova/all-MiniLM-L6-v2`. */
  modelId: string;
  /** The models directory (MODELS_DIR); the model lands in `<modelsDir>/<modelId>`. */
  modelsDir: string;
  /** @defaultValue DEFAULT_HUB_ENDPOINT */
  endpoint?: string;
  /** Branch, tag or commit. @defaultValue 'main' */
  revision?: string;
  /** The ONNX precision to fetch; default: the first the repository offers of fp32, q8, fp16, q4 (as the embedder picks). */
  dtype?: OnnxDtype;
  /** Fetch files again even when present. */
  force?: boolean;
  /** Largest file accepted, checked against Content-Length before the body is read and while it streams. @defaultValue 8 GiB */
  maxFileBytes?: number;
  /** Told of each file's start and every chunk: for a progress bar. */
  onProgress?: (event: PullProgress) => void;
  /** @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
}

export type PullProgress =
  | { kind: 'file'; file: string; bytes: number | undefined; index: number; files: number }
  | { kind: 'bytes'; file: string; received: number }
  | { kind: 'skipped'; file: string };

export interface PullResult {
  dir: string;
  dtype: OnnxDtype;
  files: string[];
  bytes: number;
}

export class HubError extends ToolrouterError {
  override readonly name = 'HubError';
}

/** Fetches the model's files into `<modelsDir>/<modelId>`; each file is written beside and renamed, so none is ever half there. */
export async function pullModel(options: PullOptions): Promise<PullResult> {
  const { modelId } = options;
  if (!MODEL_ID.test(modelId) || modelId.includes('..')) {
    throw new HubError('invalid_request', `"${modelId}" is not a hub model id (owner/name, e.g. Xenova/all-MiniLM-L6-v2)`);
  }
  const endpoint = (options.endpoint ?? DEFAULT_HUB_ENDPOINT).replace(/\/+$/, '');
  const revision = encodeURIComponent(options.revision ?? 'main');
  const get = options.fetch ?? fetch;
  const listing = await listFiles(get, `${endpoint}/api/models/${modelId}/revision/${revision}`, modelId, endpoint);
  const { dtype, files } = selectFiles(listing, options.dtype, modelId);
  const dir = path.join(options.modelsDir, ...modelId.split('/'));
  const maxBytes = options.maxFileBytes ?? 8 * 1024 ** 3;
  let bytes = 0;
  for (const [index, file] of files.entries()) {
    const target = path.join(dir, ...file.split('/'));
    if (!options.force && existsSync(target)) {
      options.onProgress?.({ kind: 'skipped', file });
      continue;
    }
    const url = `${endpoint}/${modelId}/resolve/${revision}/${file.split('/').map(encodeURIComponent).join('/')}`;
    bytes += await download(get, url, target, maxBytes, (length) => options.onProgress?.({ kind: 'file', file, bytes: length, index, files: files.length }), (received) =>
      options.onProgress?.({ kind: 'bytes', file, received }),
    );
  }
  return { dir, dtype, files, bytes };
}

/** The repository's file names, from the hub API (`siblings[].rfilename`). */
async function listFiles(get: typeof fetch, url: string, modelId: string, endpoint: string): Promise<string[]> {
  let response: Response;
  try {
    response = await get(url, { headers: { accept: 'application/json' } });
  } catch (error) {
    throw new HubError('upstream_unavailable', `cannot reach ${endpoint} (${(error as Error).message}); behind a firewall, pass --mirror or set HF_ENDPOINT`, { cause: error });
  }
  if (response.status === 404 || response.status === 401) {
    throw new HubError('not_found', `${modelId} is not on ${endpoint} (HTTP ${response.status}); gated and private models are not supported`);
  }
  if (!response.ok) throw new HubError('upstream_error', `${endpoint} answered HTTP ${response.status} for ${modelId}`);
  const length = Number(response.headers.get('content-length') ?? 0);
  if (length > MAX_LISTING_BYTES) throw new HubError('upstream_error', `${endpoint}: the listing of ${modelId} is ${length} bytes, not a hub answer`);
  const text = await response.text();
  if (text.length > MAX_LISTING_BYTES) throw new HubError('upstream_error', `${endpoint}: the listing of ${modelId} is too large to be a hub answer`);
  let json: { siblings?: { rfilename?: unknown }[] };
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    throw new HubError('upstream_error', `${endpoint} did not answer JSON for ${modelId}: is it a Hugging Face hub or mirror?`);
  }
  if (!Array.isArray(json.siblings)) throw new HubError('upstream_error', `${endpoint}: the answer for ${modelId} lists no files (siblings)`);
  return json.siblings.map((sibling) => sibling.rfilename).filter((name): name is string => typeof name === 'string' && SAFE_FILE.test(name));
}

/** The small top-level files and one precision's ONNX weights (with their external-data parts). */
export function selectFiles(listing: readonly string[], requested: OnnxDtype | undefined, modelId: string): { dtype: OnnxDtype; files: string[] } {
  const available = new Set(listing);
  const offered = ONNX_DTYPES.filter((dtype) => available.has(onnxFileOf(dtype)));
  if (offered.length === 0) {
    throw new HubError('not_found', `${modelId} has no transformers.js ONNX weights (onnx/model.onnx and the like); look for an ONNX export such as Xenova/… or onnx-community/…`);
  }
  if (requested && !offered.includes(requested)) {
    throw new HubError('not_found', `${modelId} has no ${requested} weights (${onnxFileOf(requested)}); it offers ${offered.join(', ')}`);
  }
  const dtype = requested ?? (['fp32', 'q8', 'fp16', 'q4'] as const).find((candidate) => offered.includes(candidate))!;
  const onnx = onnxFileOf(dtype);
  // Large models keep their weights beside the graph: model.onnx_data, model.onnx_data_1, …
  const parts = listing.filter((name) => name.startsWith(`${onnx}_data`));
  const small = listing.filter((name) => SMALL_FILE.test(name) && !name.startsWith('.'));
  if (!small.includes('config.json')) throw new HubError('not_found', `${modelId} has no config.json: not a transformers model`);
  return { dtype, files: [...small.sort(), onnx, ...parts.sort()] };
}

/** Streams one file to `<target>.partial` and renames it into place; returns its size. */
async function download(
  get: typeof fetch,
  url: string,
  target: string,
  maxBytes: number,
  started: (length: number | undefined) => void,
  progress: (received: number) => void,
): Promise<number> {
  let response: Response;
  try {
    response = await get(url);
  } catch (error) {
    throw new HubError('upstream_unavailable', `cannot fetch ${url}: ${(error as Error).message}`, { cause: error });
  }
  if (!response.ok || !response.body) throw new HubError('upstream_error', `${url}: HTTP ${response.status}`);
  const header = response.headers.get('content-length');
  const length = header === null ? undefined : Number(header);
  if (length !== undefined && length > maxBytes) {
    await response.body.cancel();
    throw new HubError('payload_too_large', `${url} is ${length} bytes, over the ${maxBytes}-byte limit`);
  }
  started(length);
  mkdirSync(path.dirname(target), { recursive: true });
  const partial = `${target}.partial`;
  let received = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received > maxBytes) return done(new HubError('payload_too_large', `${url} exceeds the ${maxBytes}-byte limit`));
      progress(received);
      done(null, chunk);
    },
  });
  try {
    await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), count, createWriteStream(partial));
    if (length !== undefined && received !== length) throw new HubError('upstream_error', `${url}: got ${received} of ${length} bytes`);
    renameSync(partial, target);
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  }
  return received;
}
