# toolrouter image: `docker build -t toolrouter .`; runs `serve` by default, `worker` for the index worker.
# The offline embedding model is built here, at image build time, so containers never download anything.

FROM node:20-bookworm-slim AS build
WORKDIR /app
# hnswlib-node and re2 compile native code when no prebuilt binary matches.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# Dev dependencies stay: the CLI runs the TypeScript sources through tsx, as `npm start` does.
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run models:build

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
COPY --from=build --chown=node:node /app /app
USER node
EXPOSE 8080
# /health answers while the process is up; orchestrators wanting "can serve" use GET /ready.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node is PID 1 and handles SIGTERM itself (graceful shutdown); no shell in between to swallow the signal.
ENTRYPOINT ["node", "bin/toolrouter.js"]
CMD ["serve"]
