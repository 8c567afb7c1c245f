#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries (kubeadm, kubelet, kube-apiserver, kube-controller-manager,
# kube-scheduler, kube-proxy, kubectl) from the tools/kubernetes module into bin/ with CGO_ENABLED=0
# (static: they run on any lab host and in FROM-scratch images) and the version stamped the way
# Kubernetes' own hack/lib/version.sh does it (otherwise they report v0.0.0-master).
# Skips the build when bin/ already holds the pinned version (stamp file bin/.kubernetes-<version>
# plus every binary). Idempotent; safe to run on every `make`. Cold: about 5+ minutes on 2 cores.
#
# Usage: hack/build-kubernetes.sh            (no arguments; the version comes from tools/kubernetes/go.mod)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/tools/kubernetes"
bin="${root}/bin"
binaries=(kubeadm kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl)

# The version is the one pinned in tools/kubernetes/go.mod (single source of truth).
version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "${tools}/go.mod")"
if [[ ! "${version}" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "build-kubernetes: cannot find a release version of k8s.io/kubernetes in ${tools}/go.mod (got '${version}')" >&2
	exit 1
fi
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"
stamp="${bin}/.kubernetes-${version}"

have_all() {
	local b
	for b in "${binaries[@]}"; do
		[[ -x "${bin}/${b}" ]] || return 1
	done
}

if [[ -f "${stamp}" ]] && have_all; then
	echo "build-kubernetes: Kubernetes ${version} already built in ${bin} (stamp ${stamp}); skipping"
	exit 0
fi

# One build at a time (e.g. `make -j`): a second caller waits, then finds the stamp and skips.
mkdir -p "${bin}"
exec 9>"${bin}/.kubernetes.lock"
if ! flock -n 9; then
	echo "build-kubernetes: another build is running; waiting for it"
	flock 9
fi
if [[ -f "${stamp}" ]] && have_all; then
	echo "build-kubernetes: Kubernetes ${version} built by the other run; skipping"
	exit 0
fi

rm -f "${bin}"/.kubernetes-v*
rm -rf "${bin}"/.kubernetes-build.* # left by an interrupted run
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
key="$(BUILDCACHE_SALT="${version}" buildcache_key "${BASH_SOURCE[0]}" "${tools}/go.mod" "${tools}/go.sum")"
if buildcache_restore build-kubernetes "${key}" "${bin}" "${binaries[@]}"; then
	touch "${stamp}"
	exit 0
fi
start=$(date +%s)

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
	ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

pkgs=()
for b in "${binaries[@]}"; do
	pkgs+=("k8s.io/kubernetes/cmd/${b}")
done

cd "${tools}"
echo "build-kubernetes: downloading modules for k8s.io/kubernetes ${version}"
GOWORK=off GOFLAGS=-mod=readonly go mod download
echo "build-kubernetes: modules ready after $(( $(date +%s) - start ))s"

# One `go build` for all seven: shared packages compile once. Output goes to a temporary directory
# inside bin/ and is renamed into place only when every binary linked.
tmp="$(mktemp -d "${bin}/.kubernetes-build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
echo "build-kubernetes: go build -trimpath (CGO_ENABLED=0) ${binaries[*]} into ${bin}"
CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}"
echo "build-kubernetes: compiled after $(( $(date +%s) - start ))s"
for b in "${binaries[@]}"; do
	mv -f "${tmp}/${b}" "${bin}/${b}"
done

# Sanity check: the built binaries report the pinned version.
got="$("${bin}/kubeadm" version -o short)"
if [[ "${got}" != "${version}" ]]; then
	echo "build-kubernetes: bin/kubeadm reports version '${got}', want '${version}'" >&2
	exit 1
fi
got="$("${bin}/kubelet" --version | awk '{ print $2 }')"
if [[ "${got}" != "${version}" ]]; then
	echo "build-kubernetes: bin/kubelet reports version '${got}', want '${version}'" >&2
	exit 1
fi
touch "${stamp}"
buildcache_store build-kubernetes "${key}" "${bin}" "${binaries[@]}"
echo "build-kubernetes: done in $(( $(date +%s) - start ))s: ${binaries[*]} (${version})"
