#!/usr/bin/env bash
# Builds the pinned MinIO server (bin/minio) from the Go module proxy with CGO_ENABLED=0. The backup
# unit tests start it as a real S3 endpoint on 127.0.0.1 (backup/s3test). Skips the build when bin/
# already holds the pinned version (stamp file bin/.minio-<version>). A cold build takes about 3
# minutes. Idempotent; safe to run on every `make unit`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"

# The pinned MinIO server: a pseudo-version of github.com/minio/minio (the project publishes no
# semver tags on the module proxy).
version="v0.0.0-20260212201848-7aac2a2c5b7c"
stamp="${bin}/.minio-${version}"

if [[ -f "${stamp}" && -x "${bin}/minio" ]]; then
	echo "build-minio: minio ${version} already built in ${bin} (stamp ${stamp}); skipping"
	exit 0
fi

mkdir -p "${bin}"
rm -f "${bin}"/.minio-*
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
key="$(BUILDCACHE_SALT="${version}" buildcache_key "${BASH_SOURCE[0]}")"
if buildcache_restore build-minio "${key}" "${bin}" minio; then
	touch "${stamp}"
	exit 0
fi
echo "build-minio: building github.com/minio/minio@${version} into ${bin} with CGO_ENABLED=0 (about 3 minutes cold)"
start=$(date +%s)
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# go install with an explicit version builds outside this module (its go.mod is not consulted).
CGO_ENABLED=0 GOWORK=off GOFLAGS=-trimpath GOBIN="${tmp}" go install "github.com/minio/minio@${version}"
mv -f "${tmp}/minio" "${bin}/minio"

# Sanity check: the binary runs.
if ! "${bin}/minio" --version >/dev/null; then
	echo "build-minio: ${bin}/minio --version failed" >&2
	exit 1
fi
touch "${stamp}"
buildcache_store build-minio "${key}" "${bin}" minio
echo "build-minio: done in $(( $(date +%s) - start ))s: $("${bin}/minio" --version | sed -n 1p)"
