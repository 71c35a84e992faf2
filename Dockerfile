# syntax=docker/dockerfile:1
# The cfssl-issuer manager image: docker build -t cfssl-issuer:0.1.0 .
#
# Built against Debian bookworm's glibc and run on distroless cc-debian12 (the same glibc, plus
# CA certificates and nothing else: no shell, no package manager), as the nonroot user.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The caches keep the crates.io downloads and target/ between builds; the binary is copied out
# of the cache mount so the next stage can see it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p cfssl-issuer --bin cfssl-issuer \
    && cp target/release/cfssl-issuer /cfssl-issuer

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /cfssl-issuer /cfssl-issuer
USER 65532:65532
# Metrics and health probes.
EXPOSE 8080 8081
ENTRYPOINT ["/cfssl-issuer"]
CMD ["run"]
