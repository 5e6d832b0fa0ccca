import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LexicalIndex, type LexicalSettings } from './lexical.js';
import type { SearchIndex } from './search-index.js';
import { ExactVectorIndex, HnswVectorIndex, type HnswSettings, type VectorIndex } from './vector.js';

/**
 * The index artifact: one self-contained buffer a worker stores in Redis and every API instance loads, so instances
 * serve identical indexes without rebuilding them. Layout: magic, u32 header length, JSON header, then the sections
 * the header lists (the BM25 index's binary form, and either the vector matrix or the HNSW graph).
 */
const MAGIC = Buffer.from('TRIDX\u0002');
/** Format 1 held the BM25 index as MiniSearch JSON; still readable so an upgrade serves the stored index. */
const MAGIC_V1 = Buffer.from('TRIDX\u0001');

interface ArtifactHeader {
  catalogHash: string;
  model: string;
  builtAt: string;
  names: string[];
  vectorKind: 'exact' | 'hnsw';
  dimensions: number;
  efSearch: number;
  sections: { lexical: number; vectors: number };
}

export function serializeIndex(index: SearchIndex, hnsw: HnswSettings): Buffer {
  const lexical = index.lexical.serialize();
  const { names, vectors, dimensions } = vectorSection(index.vectors);
  const header: ArtifactHeader = {
    catalogHash: index.catalogHash,
    model: index.model,
    builtAt: index.builtAt,
    names: [...names],
    vectorKind: index.vectors.kind,
    dimensions,
    efSearch: hnsw.efSearch,
    sections: { lexical: lexical.length, vectors: vectors.length },
  };
  const headerBytes = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(headerBytes.length);
  return Buffer.concat([MAGIC, length, headerBytes, lexical, vectors]);
}

/**
 * The index an artifact holds. The graph is written to a temp file and read back on libuv's pool (hnswlib-node reads
 * graphs only from files), with the event loop free in between: at 100k tools the synchronous write and read held the
 * instance's request thread for a few hundred ms at every swap.
 */
export async function deserializeIndex(buffer: Buffer, lexicalSettings: LexicalSettings): Promise<SearchIndex> {
  const magic = buffer.subarray(0, MAGIC.length);
  const v1 = magic.equals(MAGIC_V1);
  if (buffer.length < MAGIC.length + 4 || !(v1 || magic.equals(MAGIC))) {
    throw new Error('not a toolrouter index artifact (or an incompatible version)');
  }
  const headerLength = buffer.readUInt32LE(MAGIC.length);
  let offset = MAGIC.length + 4;
  const header = JSON.parse(buffer.subarray(offset, offset + headerLength).toString('utf8')) as ArtifactHeader;
  offset += headerLength;
  const lexicalBytes = buffer.subarray(offset, offset + header.sections.lexical);
  const lexical = v1
    ? LexicalIndex.fromMiniSearchJSON(lexicalBytes.toString('utf8'), lexicalSettings)
    : LexicalIndex.deserialize(lexicalBytes, lexicalSettings);
  offset += header.sections.lexical;
  const vectorBytes = buffer.subarray(offset, offset + header.sections.vectors);
  if (vectorBytes.length !== header.sections.vectors) throw new Error('index artifact is truncated');
  await new Promise((resolve) => setImmediate(resolve));
  return {
    catalogHash: header.catalogHash,
    model: header.model,
    builtAt: header.builtAt,
    size: header.names.length,
    lexical,
    vectors: await loadVectors(header, vectorBytes),
  };
}

function vectorSection(vectors: VectorIndex): { names: readonly string[]; vectors: Buffer; dimensions: number } {
  if (vectors instanceof ExactVectorIndex) {
    const { matrix } = vectors;
    return { names: vectors.names, vectors: Buffer.from(matrix.buffer, matrix.byteOffset, matrix.byteLength), dimensions: vectors.dimensions };
  }
  if (vectors instanceof HnswVectorIndex) {
    // hnswlib-node persists only to files; a private temp dir keeps concurrent builds apart.
    return withTempFile((file) => {
      vectors.index.writeIndexSync(file);
      return { names: vectors.names, vectors: readFileSync(file), dimensions: vectors.index.getNumDimensions() };
    });
  }
  throw new Error('unknown vector index type');
}

async function loadVectors(header: ArtifactHeader, bytes: Buffer): Promise<VectorIndex> {
  if (header.vectorKind === 'exact') {
    // Copy into an aligned buffer: a subarray of the artifact may start at any byte.
    const matrix = new Float32Array(bytes.length / 4);
    new Uint8Array(matrix.buffer).set(bytes);
    return new ExactVectorIndex(header.names, { matrix, dimensions: header.dimensions });
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'toolrouter-index-'));
  try {
    const file = path.join(dir, 'index.bin');
    await writeFile(file, bytes);
    return await HnswVectorIndex.load(header.names, file, header.dimensions, header.efSearch);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function withTempFile<T>(use: (file: string) => T): T {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-index-'));
  try {
    return use(path.join(dir, 'index.bin'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
