import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Stand-ins for the external paid servers of the semantic layer: an OpenAI-compatible `POST /v1/embeddings` and a
 * TEI/Cohere-shaped `POST /rerank`, on loopback. Vectors are deterministic hashed bags of words (texts sharing words
 * are close), rerank scores count query words in the document. Both record what they received and can be told to
 * fail, stall or (embeddings) return the wrong dimension.
 */
export interface EmbeddingsRequest {
  path: string;
  authorization: string | undefined;
  body: any;
}

export interface Behaviour {
  /** Answer this status (with Retry-After when given) to the next `times` requests, then behave again. */
  fail?: { status: number; times: number; retryAfter?: string };
  /** Wait this long before answering. */
  delayMs?: number;
  /** Return vectors of this length instead of the requested one. */
  wrongDimensions?: number;
  /** Never answer (until reset). */
  hang?: boolean;
  /** Close the connection without an answer (the client sees it reset). */
  reset?: boolean;
  /** Answer /rerank as Cohere and Jina do (`{results: [{index, relevance_score}]}`) instead of TEI's list. */
  cohereShape?: boolean;
}

export interface StandInEmbeddings {
  /** `http://127.0.0.1:<port>/v1`, the embedding.baseUrl to configure. */
  url: string;
  /** `http://127.0.0.1:<port>/rerank`. */
  rerankUrl: string;
  received: EmbeddingsRequest[];
  /** Texts embedded over all requests, in order. */
  inputs(): string[];
  behave(behaviour: Behaviour): void;
  close(): Promise<void>;
}

export const STAND_IN_DIMENSIONS = 64;

export function hashedVector(text: string, dims = STAND_IN_DIMENSIONS): number[] {
  const v = new Array<number>(dims).fill(0);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    const digest = createHash('sha256').update(word).digest();
    v[digest.readUInt32LE(0) % dims]! += digest[4]! & 1 ? 1 : -1;
  }
  return v;
}

/** `port`: 0 for any; a given one brings a stand-in back where an earlier one was closed. */
export async function startStandInEmbeddings(port = 0): Promise<StandInEmbeddings> {
  const received: EmbeddingsRequest[] = [];
  let behaviour: Behaviour = {};
  const hanging = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let body: any;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = undefined;
      }
      received.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
      const answer = () => {
        if (behaviour.hang) return;
        if (behaviour.reset) {
          req.socket.destroy();
          return;
        }
        const fail = behaviour.fail;
        if (fail && fail.times > 0) {
          fail.times -= 1;
          res.writeHead(fail.status, { 'content-type': 'application/json', ...(fail.retryAfter ? { 'retry-after': fail.retryAfter } : {}) });
          res.end(JSON.stringify({ error: { message: 'stand-in told to fail' } }));
          return;
        }
        if (req.url === '/v1/embeddings') {
          const dims = behaviour.wrongDimensions ?? body.dimensions ?? STAND_IN_DIMENSIONS;
          const data = (body.input as string[]).map((text, index) => ({ object: 'embedding', index, embedding: hashedVector(text, dims) }));
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
          return;
        }
        if (req.url === '/rerank') {
          const words = new Set(String(body.query).toLowerCase().match(/[a-z0-9]+/g) ?? []);
          const scores = ((body.texts ?? body.documents) as string[]).map((text, index) => ({
            index,
            score: (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((word) => words.has(word)).length,
          }));
          scores.sort((a, b) => b.score - a.score);
          const payload = behaviour.cohereShape ? { results: scores.map(({ index, score }) => ({ index, relevance_score: score })) } : scores;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(payload));
          return;
        }
        res.writeHead(404).end();
      };
      if (behaviour.hang) hanging.add(() => res.destroy());
      else if (behaviour.delayMs) setTimeout(answer, behaviour.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}/v1`,
    rerankUrl: `http://127.0.0.1:${bound}/rerank`,
    received,
    inputs: () => received.filter((r) => r.path === '/v1/embeddings').flatMap((r) => r.body.input as string[]),
    behave(next) {
      behaviour = next;
      if (!next.hang) {
        for (const release of hanging) release();
        hanging.clear();
      }
    },
    async close() {
      for (const release of hanging) release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
