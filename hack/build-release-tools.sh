#!/usr/bin/env bash
# Builds the release tools pinned in tools/goreleaser and tools/cyclonedx-gomod (their go.mod `tool`
# lines: goreleaser v2, which packs the archives, checksums and nfpm's .deb/.rpm, and
# cyclonedx-gomod, which writes the SBOM goreleaser asks for) into bin/goreleaser and
# bin/cyclonedx-gomod. Each is cached by input hash: skipped when bin/.<tool>-<sha256 of its go.mod
# and go.sum> exists with the binary. Cold: a few minutes on 2 cores (goreleaser is large); warm:
# instant.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"

build() { # build NAME PACKAGE
	local name="$1" pkg="$2" dir="${root}/tools/$1"
	local hash stamp
	hash="$(cat "${dir}/go.mod" "${dir}/go.sum" | sha256sum | cut -c1-16)"
	stamp="${bin}/.${name}-${hash}"
	if [[ -f "${stamp}" && -x "${bin}/${name}" ]]; then
		echo "build-release-tools: bin/${name} up to date (stamp ${stamp##*/}); skipping"
		return
	fi
	rm -f "${bin}/.${name}"-*
	local key
	key="$(BUILDCACHE_SALT="${hash}" buildcache_key "${BASH_SOURCE[0]}")"
	if buildcache_restore "build-${name}" "${key}" "${bin}" "${name}"; then
		touch "${stamp}"
		return
	fi
	local version
	version="$(cd "${dir}" && GOWORK=off go list -m -f '{{.Version}}' "$(GOWORK=off go list -f '{{.Module.Path}}' "${pkg}")")"
	echo "build-release-tools: building ${name} ${version} into ${bin}"
	local start=$SECONDS
	(cd "${dir}" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "${bin}/${name}.tmp" "${pkg}")
	mv -f "${bin}/${name}.tmp" "${bin}/${name}"
	touch "${stamp}"
	buildcache_store "build-${name}" "${key}" "${bin}" "${name}"
	echo "build-release-tools: ${name} built in $((SECONDS - start))s"
}

build goreleaser github.com/goreleaser/goreleaser/v2
build cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
