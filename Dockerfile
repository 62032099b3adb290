# One image for every Floodgate binary: floodgate-gateway, floodgate-booking (also the migration,
# topic and sale commands) and floodgate-consumer, plus floodgate-loadgen for rehearsals and
# floodgate-sandbox (the stand-in provider and sign-in) for demos. A Deployment picks its binary
# with `command`. docs/deploy.md says how it is built and run.
#
#   docker build -t floodgate:0.1.0 .
#
# No `# syntax=` line: the Dockerfile frontend built into the engine reads this file, so a build
# pulls nothing but the base images below (and a machine with no registry at all builds from its
# own base: deploy/image.sh).
#
# BASE is the runtime's base image. PAYLOAD picks where the binaries and the page come from:
# `built` (the default) compiles them in the stages below; `prebuilt` takes them ready-made
# from the build context (bin/ and static/, with static/oauth4webapi.js), as deploy/image.sh
# lays them out from a build on the host. BuildKit builds only the stages the target needs.
ARG BASE=debian:bookworm-slim
ARG PAYLOAD=built
ARG RUST_VERSION=1.95

# Build stage: a release build against Debian's OpenSSL (librdkafka's TLS and SASL SCRAM).
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
        -p floodgate-sandbox \
    && mkdir -p /out \
    && cp target/release/floodgate-gateway target/release/floodgate-booking \
        target/release/floodgate-consumer target/release/floodgate-loadgen \
        target/release/floodgate-sandbox /out/

# The page's one module from npm (oauth4webapi, for signing in), pinned by its lock file.
FROM node:20-bookworm-slim AS page
WORKDIR /page
COPY static/package.json static/package-lock.json ./
RUN npm ci --no-audit --no-fund

# What goes into the image, compiled here ...
FROM scratch AS built
COPY --from=build /out/ /bin/
COPY static /static
COPY --from=page /page/node_modules/oauth4webapi/build/index.js /static/oauth4webapi.js

# ... or laid out ready in the build context.
FROM scratch AS prebuilt
COPY bin /bin/
COPY static /static

FROM ${PAYLOAD} AS payload

# Runtime stage: Debian with the shared libraries the binaries link (OpenSSL, zlib) and the CA
# certificates TLS verifies against, run as an unprivileged user. Nothing is written inside the
# image at run time, so it runs with a read-only root filesystem.
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 floodgate \
    && useradd --system --uid 10001 --gid floodgate --no-create-home --shell /usr/sbin/nologin floodgate
COPY --from=payload /bin/ /usr/local/bin/
# The browser client the gateways serve.
COPY --from=payload /static /usr/share/floodgate/static
# Where a published sale's catalog goes (`floodgate-booking sale publish`): a volume in compose,
# mounted over this folder, takes its owner from it, so the services' user can write it.
RUN mkdir -p /usr/share/floodgate/static/data \
    && chown 10001:10001 /usr/share/floodgate/static/data
ENV FLOODGATE_STATIC_DIR=/usr/share/floodgate/static \
    FLOODGATE_LOG_JSON=true
USER 10001:10001
# Gateway (waiting room, admin), booking (API, ops API), consumer (admin), sandbox provider.
EXPOSE 8080 9080 8081 9081 9102 8082
CMD ["floodgate-gateway", "serve"]
