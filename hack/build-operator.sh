#!/usr/bin/env bash
# Builds hactl-operator (the cmd/hactl-operator module) into bin/hactl-operator and, with --image,
# its image FROM scratch into bin/hactl-operator-image.tar (reference in bin/hactl-operator-image.ref,
# tag dev-<hash>). Cached by the hash of the inputs: the module's go.mod, go.sum and non-test .go
# files, and the non-test .go files of every root-module package it compiles (go list -deps), plus
# the root go.mod and go.sum; stamps bin/.hactl-operator-<hash> and bin/.hactl-operator-image-<hash>.
# CGO_ENABLED=0, -trimpath, -s -w. The image also carries bin/etcd (make etcd-bins: the pinned
# version the lab's clusters run), installed by the operator on a spare it moves a member onto; its
# sha256 is part of the image's hash.
#
# Alternatively HACTL_OPERATOR_ETCD names another etcd binary for the image (your clusters' version).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mod="${root}/cmd/hactl-operator"
image_name="${HACTL_OPERATOR_IMAGE:-ghcr.io/hactl/hactl-operator}"
image=false
[[ "${1:-}" == "--image" ]] && image=true

files="$(cd "${mod}" && GOWORK=off go list -deps -f '{{if .Module}}{{if or (eq .Module.Path "github.com/hactl/hactl") (eq .Module.Path "github.com/hactl/hactl/cmd/hactl-operator")}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}' .)"
hash="$( (printf '%s\n' "${files}" | grep . ; echo "${mod}/go.mod"; echo "${mod}/go.sum"; echo "${root}/go.mod"; echo "${root}/go.sum") |
	LC_ALL=C sort -u | xargs sha256sum | sed "s#${root}/##" | sha256sum | cut -c1-12)"
stamp="${bin}/.hactl-operator-${hash}"
mkdir -p "${bin}"

if [[ -f "${stamp}" && -x "${bin}/hactl-operator" ]]; then
	echo "build-operator: hactl-operator ${hash} already built; skipping"
else
	rm -f "${bin}"/.hactl-operator-[0-9a-f]*
	echo "build-operator: go build hactl-operator (inputs ${hash}) into ${bin}"
	(cd "${mod}" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "${bin}/hactl-operator.tmp" .)
	mv -f "${bin}/hactl-operator.tmp" "${bin}/hactl-operator"
	touch "${stamp}"
fi

"${image}" || exit 0
etcd_bin="${HACTL_OPERATOR_ETCD:-${bin}/etcd}"
[[ -x "${etcd_bin}" ]] || { echo "build-operator: no etcd binary at ${etcd_bin} for the image (make etcd-bins)" >&2; exit 1; }
ihash="$( (echo "${hash}"; sha256sum <"${etcd_bin}") | sha256sum | cut -c1-12)"
ref="${image_name}:dev-${ihash}"
istamp="${bin}/.hactl-operator-image-${ihash}"
if [[ -f "${istamp}" && -f "${bin}/hactl-operator-image.tar" ]]; then
	echo "build-operator: image ${ref} already in ${bin}/hactl-operator-image.tar; skipping"
	exit 0
fi
rm -f "${bin}"/.hactl-operator-image-*
bash "${root}/hack/scratch-image.sh" "${bin}/hactl-operator" "${ref}" "${bin}/hactl-operator-image.tar" "${etcd_bin}"
touch "${istamp}"
echo "build-operator: image ${ref} saved to ${bin}/hactl-operator-image.tar"
