#!/usr/bin/env bash
# Builds the pinned etcd release binaries (bin/etcd, bin/etcdctl, bin/etcdutl) from the tools/etcd
# module with CGO_ENABLED=0, so they run on any lab host. Skips the build when bin/ already holds
# the pinned version (stamp file bin/.etcd-<version>). Idempotent; safe to run on every `make`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/tools/etcd"
bin="${root}/bin"

# The version is the one pinned in tools/etcd/go.mod (single source of truth).
version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${tools}/go.mod")"
if [[ -z "${version}" ]]; then
	echo "build-etcd: cannot find go.etcd.io/etcd/server/v3 in ${tools}/go.mod" >&2
	exit 1
fi
stamp="${bin}/.etcd-${version}"

if [[ -f "${stamp}" && -x "${bin}/etcd" && -x "${bin}/etcdctl" && -x "${bin}/etcdutl" ]]; then
	echo "build-etcd: etcd ${version} already built in ${bin} (stamp ${stamp}); skipping"
	exit 0
fi

mkdir -p "${bin}"
rm -f "${bin}"/.etcd-*
echo "build-etcd: building etcd ${version} (etcd, etcdctl, etcdutl) into ${bin} with CGO_ENABLED=0"
start=$(date +%s)
cd "${tools}"
for pair in etcd:go.etcd.io/etcd/server/v3 etcdctl:go.etcd.io/etcd/etcdctl/v3 etcdutl:go.etcd.io/etcd/etcdutl/v3; do
	name="${pair%%:*}"
	pkg="${pair#*:}"
	echo "build-etcd: go build -trimpath -o ${bin}/${name} ${pkg}"
	CGO_ENABLED=0 GOWORK=off go build -trimpath -o "${bin}/${name}.tmp" "${pkg}"
	mv -f "${bin}/${name}.tmp" "${bin}/${name}"
done

# Sanity check: the built binary reports the pinned version.
want="${version#v}"
got="$("${bin}/etcd" --version | awk '/^etcd Version:/ { print $3 }')"
if [[ "${got}" != "${want}" ]]; then
	echo "build-etcd: bin/etcd reports version '${got}', want '${want}'" >&2
	exit 1
fi
touch "${stamp}"
echo "build-etcd: done in $(( $(date +%s) - start ))s: $(ls "${bin}" | tr '\n' ' ')"
