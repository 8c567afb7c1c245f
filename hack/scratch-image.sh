#!/usr/bin/env bash
# Builds a container image FROM scratch holding one static binary and saves it as a `docker save`
# archive:
#
#   hack/scratch-image.sh BINARY REF ARCHIVE [EXTRA_BINARY...]
#
# The binary goes to /usr/local/bin/<its name> and is the entrypoint (extra static binaries go to
# /usr/local/bin too: hactl-operator's image carries etcd for the members it heals); the image runs as uid/gid
# 65532 (the conventional non-root user of distroless images). FROM scratch builds offline. The
# archive is written atomically (temp + rename); REF is written to ARCHIVE's .ref sibling
# (bin/x-image.tar → bin/x-image.ref). Used by build-scheduler.sh and build-operator.sh.
set -euo pipefail

binary="$1" ref="$2" archive="$3"
shift 3
name="$(basename "${binary}")"
ctx="$(mktemp -d)"
trap 'rm -rf "${ctx}"' EXIT
cp "${binary}" "${ctx}/${name}"
copies="COPY ${name} /usr/local/bin/${name}"
for extra in "$@"; do
	cp "${extra}" "${ctx}/$(basename "${extra}")"
	copies+=$'\n'"COPY $(basename "${extra}") /usr/local/bin/$(basename "${extra}")"
done
cat >"${ctx}/Dockerfile" <<DOCKERFILE
FROM scratch
${copies}
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/${name}"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "${ref}" "${ctx}" >/dev/null
docker save -o "${archive}.tmp" "${ref}"
chmod 0644 "${archive}.tmp" # an image holds no secret; docker save writes 0600, which a copy by another user cannot read
mv -f "${archive}.tmp" "${archive}"
echo "${ref}" >"${archive%.tar}.ref"
