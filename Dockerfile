# svc in a container: build the JavaScript in one stage, run it as a non-root user in the next.
# Not built or run in this repository's CI (no container engine there); keep it minimal and in step
# with docs/operations.md and the settings the deployment suite uses.
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY plugins/plugin-cli-connector/package.json plugins/plugin-cli-connector/package.json
COPY packages/client/package.json packages/client/package.json
RUN npm ci --no-audit --no-fund
COPY . .
# The image's start never builds (NODE_ENV=production): make sure what it ships counts as fresh.
RUN npm run build && npm prune --omit=dev \
  && node -e "import('./bin/build.js').then((b) => process.exit(b.buildState() === 'fresh' ? 0 : 1))"

FROM node:24-slim
# tini as PID 1: it reaps orphaned children (a CLI-connector script's own children whose parent ended
# first) and passes docker's signals on to node.
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 SVC_APP_PATH=/srv/app
WORKDIR /app
# The service's code stays root's: the runtime user runs it and cannot rewrite it. The only folder it
# writes is the app root (the embedded database's `.svc-data/`, 0700).
COPY --from=build /app /app
RUN mkdir -p /srv/app && chown node:node /srv/app
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:3000/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
# `exec` form: SIGTERM from `docker stop` reaches the service (through tini), which drains and exits.
# npm start's flags, but a young generation of 2 x 4 MB: Node 24 at 2 x 2 MB keeps whole requests past two
# scavenges under load and then collects its old generation every second or so (docs/operations.md, "Shutdown").
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--max-semi-space-size=4", "--heap-growing-percent=20", "--no-memory-reducer", "--no-maglev", "--v8-pool-size=1", "bin/start.js"]
