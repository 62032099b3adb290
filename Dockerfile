# syntax=docker/dockerfile:1
# One image for every Floodgate binary: floodgate-gateway, floodgate-booking (also the migration,
# topic and sale commands) and floodgate-consumer, plus floodgate-loadgen for rehearsals. A
# Deployment picks its binary with `command`. docs/deploy.md says how it is built and run.
#
#   docker build -t floodgate:0.1.0 .
#
# Build stage: a release build against Debian's OpenSSL (librdkafka's TLS and SASL SCRAM).
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl-dev pkg-config make g++ \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The registry and the target directory are build caches, so a rebuild after a change compiles
# only what changed; the binaries are copied out of the cache mount before the step ends.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p floodgate-gateway -p floodgate-booking -p floodgate-consumer -p floodgate-loadgen \
    && mkdir -p /out \
    && cp target/release/floodgate-gateway target/release/floodgate-booking \
        target/release/floodgate-consumer target/release/floodgate-loadgen /out/

# The page's one module from npm (oauth4webapi, for signing in), pinned by its lock file.
FROM node:20-bookworm-slim AS page
WORKDIR /page
COPY static/package.json static/package-lock.json ./
RUN npm ci --no-audit --no-fund

# Runtime stage: Debian slim with the shared libraries the binaries link (OpenSSL, zlib) and the
# CA certificates TLS verifies against, run as an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 floodgate \
    && useradd --system --uid 10001 --gid floodgate --no-create-home --shell /usr/sbin/nologin floodgate
COPY --from=build /out/ /usr/local/bin/
# The browser client the gateways serve.
COPY static /usr/share/floodgate/static
COPY --from=page /page/node_modules/oauth4webapi/build/index.js /usr/share/floodgate/static/oauth4webapi.js
ENV FLOODGATE_STATIC_DIR=/usr/share/floodgate/static \
    FLOODGATE_LOG_JSON=true
USER 10001:10001
# Gateway (waiting room, admin), booking (API, ops API), consumer (admin).
EXPOSE 8080 9080 8081 9081 9102
CMD ["floodgate-gateway", "serve"]
