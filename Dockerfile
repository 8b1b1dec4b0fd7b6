# syntax=docker/dockerfile:1
#
# drift-sentinel container image.
#
#   docker build -t REGISTRY/drift-sentinel:0.1.0 .
#
# Build stage: the official Rust image on Debian 12 (bookworm), and exactly the cargo command the
# project documents (`--locked`: Cargo.lock is used as committed, never updated).
# Runtime stage: distroless `cc` on the same Debian release. The binary links glibc, libgcc_s and
# libm dynamically (SQLite is compiled in by rusqlite's `bundled` feature; TLS is rustls on ring,
# no OpenSSL), so it needs the C runtime that `cc` adds to `static`, and the build and runtime
# stages must share a Debian release (glibc symbol versions). The `nonroot` tag runs as
# uid/gid 65532 with no shell and no package manager.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Only what the workspace needs to build (see .dockerignore): the service and its member crates
# under crates/. The benchmark sources are copied only because Cargo.toml names their targets;
# they are not built here.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY benches ./benches
COPY bench ./bench
# The cache mounts keep downloaded crates and compiled dependencies between builds; the binary is
# copied out of the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
    && install -D -m 0755 target/release/drift-sentinel /out/drift-sentinel

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/drift-sentinel /usr/local/bin/drift-sentinel
USER 65532:65532
# The service listens on $PORT (Knative sets it), else `server.port` from the config (8080).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/drift-sentinel"]
CMD ["serve", "--config", "/etc/drift-sentinel/config.yaml"]
