#!/usr/bin/env bash
# Builds the pinned CoreDNS server (bin/coredns) from the Go module proxy with CGO_ENABLED=0, for
# the lab cluster's DNS add-on image (hack/build-kube-images.sh puts it FROM scratch as /coredns).
# The version is the one kubeadm deploys (CoreDNSVersion in k8s.io/kubernetes'
# cmd/kubeadm/app/constants, printed by `bin/kubeadm config images list`); hack/build-kube-images.sh
# fails when the two disagree: bump `version` below together with tools/kubernetes.
# github.com/coredns/coredns has no replace directives, so `go install module@version` builds it
# with exactly the dependency versions of its own go.mod (no tools module needed). Built like
# upstream's Makefile: -tags grpcnotrace, -ldflags "-s -w" (upstream stamps coremain.GitCommit,
# which the module proxy does not carry). Skips the build when bin/ already holds the pinned version
# (stamp file bin/.coredns-<version>). Cold: about 3 minutes on 2 cores (downloads included).
# Idempotent; safe to run on every `make`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"

version="v1.14.6"
stamp="${bin}/.coredns-${version}"

if [[ -f "${stamp}" && -x "${bin}/coredns" ]]; then
	echo "build-coredns: coredns ${version} already built in ${bin} (stamp ${stamp}); skipping"
	exit 0
fi

mkdir -p "${bin}"
rm -f "${bin}"/.coredns-*
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
key="$(BUILDCACHE_SALT="${version}" buildcache_key "${BASH_SOURCE[0]}")"
if buildcache_restore build-coredns "${key}" "${bin}" coredns; then
	touch "${stamp}"
	exit 0
fi
echo "build-coredns: building github.com/coredns/coredns@${version} into ${bin} with CGO_ENABLED=0"
start=$(date +%s)
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# go install with an explicit version builds outside this module (its go.mod is not consulted).
CGO_ENABLED=0 GOWORK=off GOFLAGS=-trimpath GOBIN="${tmp}" \
	go install -tags grpcnotrace -ldflags "-s -w" "github.com/coredns/coredns@${version}"
mv -f "${tmp}/coredns" "${bin}/coredns"

# Sanity check: the binary runs and reports the pinned version ("CoreDNS-1.14.6" on its first line).
got="$("${bin}/coredns" -version | sed -n 1p)"  # sed reads it all: head would SIGPIPE coredns under pipefail
if [[ "${got}" != "CoreDNS-${version#v}" ]]; then
	echo "build-coredns: ${bin}/coredns -version reports '${got}', want 'CoreDNS-${version#v}'" >&2
	exit 1
fi
touch "${stamp}"
buildcache_store build-coredns "${key}" "${bin}" coredns
echo "build-coredns: done in $(($(date +%s) - start))s: ${got}"
