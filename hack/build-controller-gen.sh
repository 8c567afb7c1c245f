#!/usr/bin/env bash
# Builds bin/controller-gen from the version pinned in tools/controller-gen/go.mod. Cached by input
# hash: skipped when bin/.controller-gen-<sha256 of go.mod and go.sum> exists with the binary.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/tools/controller-gen"
bin="${root}/bin"
hash="$(cat "${tools}/go.mod" "${tools}/go.sum" | sha256sum | cut -c1-16)"
stamp="${bin}/.controller-gen-${hash}"
if [[ -f "${stamp}" && -x "${bin}/controller-gen" ]]; then
	echo "build-controller-gen: bin/controller-gen up to date (stamp ${stamp##*/}); skipping"
	exit 0
fi
mkdir -p "${bin}"
rm -f "${bin}"/.controller-gen-*
version="$(awk '{ for (i = 1; i < NF; i++) if ($i == "sigs.k8s.io/controller-tools") { print $(i + 1); exit } }' "${tools}/go.mod")"
echo "build-controller-gen: building controller-gen ${version} into ${bin}"
cd "${tools}"
CGO_ENABLED=0 GOWORK=off go build -trimpath -o "${bin}/controller-gen.tmp" sigs.k8s.io/controller-tools/cmd/controller-gen
mv -f "${bin}/controller-gen.tmp" "${bin}/controller-gen"
touch "${stamp}"
