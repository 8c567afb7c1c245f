#!/usr/bin/env bash
# Builds the pinned kind CLI and what its node image needs from the Go module proxy into
# bin/kind-<kind version>/: kind (sigs.k8s.io/kind), containerd, ctr and containerd-shim-runc-v2
# (github.com/containerd/containerd/v2: kind's nodes need containerd 2, Debian's 1.6 `ctr images
# import` lacks --label, which kind passes) and crictl (sigs.k8s.io/cri-tools). None of these
# modules has replace directives, so `go install module@version` builds each with its own go.mod.
# CGO_ENABLED=0 throughout (kind's base image builds containerd with cgo for seccomp in the shim;
# runc, from Debian, does the seccomp filtering). Skips the build when the stamp for these versions
# exists. Cold: about 3 minutes on 2 cores. Idempotent; safe to run on every `make`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kind_version="v0.33.0"
containerd_version="v2.4.2"
crictl_version="v1.37.0"
out="${root}/bin/kind-${kind_version}"
stamp="${out}/.stamp-containerd-${containerd_version}-crictl-${crictl_version}"

if [[ -f "${stamp}" ]]; then
	echo "build-kind: kind ${kind_version}, containerd ${containerd_version}, crictl ${crictl_version} already in ${out}; skipping"
	exit 0
fi
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
key="$(BUILDCACHE_SALT="${kind_version} ${containerd_version} ${crictl_version}" buildcache_key "${BASH_SOURCE[0]}")"
if buildcache_restore build-kind "${key}" "${root}/bin" "kind-${kind_version}"; then
	touch "${stamp}"
	exit 0
fi
mkdir -p "${out}"
rm -f "${out}"/.stamp-*
start=$(date +%s)
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-trimpath GOBIN="${tmp}"
echo "build-kind: sigs.k8s.io/kind@${kind_version}"
go install "sigs.k8s.io/kind@${kind_version}"
echo "build-kind: github.com/containerd/containerd/v2@${containerd_version} (containerd, ctr, containerd-shim-runc-v2)"
go install -tags "no_aufs no_zfs no_btrfs no_devmapper" \
	"github.com/containerd/containerd/v2/cmd/containerd@${containerd_version}" \
	"github.com/containerd/containerd/v2/cmd/ctr@${containerd_version}" \
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${containerd_version}"
echo "build-kind: sigs.k8s.io/cri-tools/cmd/crictl@${crictl_version}"
go install "sigs.k8s.io/cri-tools/cmd/crictl@${crictl_version}"
mv -f "${tmp}"/* "${out}/"
got="$("${out}/kind" version)"
if [[ "${got}" != "kind ${kind_version} "* ]]; then
	echo "build-kind: ${out}/kind version reports '${got}', want kind ${kind_version}" >&2
	exit 1
fi
touch "${stamp}"
buildcache_store build-kind "${key}" "${root}/bin" "kind-${kind_version}"
echo "build-kind: done in $(($(date +%s) - start))s into ${out}"
