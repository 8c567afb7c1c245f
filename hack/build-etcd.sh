#!/usr/bin/env bash
# Builds etcd release binaries (etcd, etcdctl, etcdutl) from a tools module with CGO_ENABLED=0, so
# they run on any lab host.
#
#   hack/build-etcd.sh [TOOLS_DIR [OUT_DIR]]
#
# TOOLS_DIR defaults to tools/etcd (the pinned v3.6 release, into bin/); `make etcd-bins` also
# builds tools/etcd35 into bin/etcd-v3.5 (the release the lab's rolling upgrade starts from). Each
# etcd release line is a module of its own: their dependency graphs must not mix.
#
# Cached by input hash: the build is skipped when OUT_DIR holds the three binaries and the stamp
# .etcd-<version>-<sha256 of go.mod and go.sum> of this very module. Idempotent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/${1:-tools/etcd}"
bin="${root}/${2:-bin}"

# The version is the one pinned in the module's go.mod (single source of truth).
version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${tools}/go.mod")"
if [[ -z "${version}" ]]; then
	echo "build-etcd: cannot find go.etcd.io/etcd/server/v3 in ${tools}/go.mod" >&2
	exit 1
fi
hash="$(cat "${tools}/go.mod" "${tools}/go.sum" | sha256sum | cut -c1-16)"
stamp="${bin}/.etcd-${version}-${hash}"

if [[ -f "${stamp}" && -x "${bin}/etcd" && -x "${bin}/etcdctl" && -x "${bin}/etcdutl" ]]; then
	echo "build-etcd: etcd ${version} already built in ${bin} (stamp ${stamp##*/}); skipping"
	exit 0
fi

mkdir -p "${bin}"
rm -f "${bin}"/.etcd-*
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
key="$(BUILDCACHE_SALT="${version}" buildcache_key "${BASH_SOURCE[0]}" "${tools}/go.mod" "${tools}/go.sum")"
if buildcache_restore build-etcd "${key}" "${bin}" etcd etcdctl etcdutl; then
	touch "${stamp}"
	exit 0
fi
echo "build-etcd: building etcd ${version} (etcd, etcdctl, etcdutl) from ${tools#"${root}"/} into ${bin} with CGO_ENABLED=0"
start=$(date +%s)
cd "${tools}"
for pair in etcd:go.etcd.io/etcd/server/v3 etcdctl:go.etcd.io/etcd/etcdctl/v3 etcdutl:go.etcd.io/etcd/etcdutl/v3; do
	name="${pair%%:*}"
	pkg="${pair#*:}"
	echo "build-etcd: go build -trimpath -o ${bin}/${name} ${pkg}"
	CGO_ENABLED=0 GOWORK=off go build -trimpath -o "${bin}/${name}.tmp" "${pkg}"
	mv -f "${bin}/${name}.tmp" "${bin}/${name}"
done

# Sanity check: the built binaries report the pinned version.
want="${version#v}"
got="$("${bin}/etcd" --version | awk '/^etcd Version:/ { print $3 }')"
if [[ "${got}" != "${want}" ]]; then
	echo "build-etcd: ${bin}/etcd reports version '${got}', want '${want}'" >&2
	exit 1
fi
got="$("${bin}/etcdutl" version | awk '/^etcdutl version:/ { print $3 }')"
if [[ "${got}" != "${want}" ]]; then
	echo "build-etcd: ${bin}/etcdutl reports version '${got}', want '${want}'" >&2
	exit 1
fi
touch "${stamp}"
buildcache_store build-etcd "${key}" "${bin}" etcd etcdctl etcdutl
echo "build-etcd: done in $(( $(date +%s) - start ))s"
