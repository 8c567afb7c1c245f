#!/usr/bin/env bash
# Builds the container images the lab's kubeadm control plane runs, without any registry (none is
# reachable from the lab): kube-apiserver, kube-controller-manager, kube-scheduler and the pod
# sandbox image pause, each FROM scratch with the static binary from bin/ in /usr/local/bin
# (ENV PATH=/usr/local/bin: kubeadm's static pod manifests start the binaries by name). They are
# tagged exactly as `bin/kubeadm config images list --kubernetes-version <version>` prints them
# (registry.k8s.io/...), saved into one tarball, and the local docker tags are removed again, so
# the machine keeps no docker image outside the lab's hactl-lab* names. The lab imports the
# tarball into each node's containerd (`ctr -n k8s.io images import`); kubeadm runs with
# imagePullPolicy Never.
#
# Not built: etcd (the cluster's etcd is hactl's, external to kubeadm), coredns and kube-proxy
# (kubeadm init runs with --skip-phases=addon/coredns,addon/kube-proxy).
#
# Output (git-ignored): bin/kube-images-<version>.tar and bin/kube-images-<version>.list (the
# image references in the tarball, one per line). Skips everything when both exist for the version
# of bin/kubeadm. The pause program is tools/kubernetes/pause, built with CGO_ENABLED=0.
# Needs the Kubernetes binaries (hack/build-kubernetes.sh) and a docker daemon
# (hack/ensure-docker.sh). Uses the classic builder (DOCKER_BUILDKIT=0): it builds FROM scratch
# offline. About 30 s on 2 cores.
#
# Usage: hack/build-kube-images.sh            (no arguments)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
components=(kube-apiserver kube-controller-manager kube-scheduler)

if [[ ! -x "${bin}/kubeadm" ]]; then
	echo "build-kube-images: ${bin}/kubeadm is missing: run hack/build-kubernetes.sh (make kubernetes-bins) first" >&2
	exit 1
fi
# The version is the one bin/kubeadm was stamped with by hack/build-kubernetes.sh.
version="$("${bin}/kubeadm" version -o short)"
if [[ ! "${version}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "build-kube-images: bin/kubeadm reports version '${version}', not a release: rebuild it with hack/build-kubernetes.sh" >&2
	exit 1
fi
tarball="${bin}/kube-images-${version}.tar"
list="${bin}/kube-images-${version}.list"

if [[ -s "${tarball}" && -s "${list}" ]]; then
	echo "build-kube-images: images for Kubernetes ${version} already in ${tarball}; skipping"
	exit 0
fi

# One build at a time (e.g. `make -j`): a second caller waits, then finds the tarball and skips.
exec 9>"${bin}/.kube-images.lock"
if ! flock -n 9; then
	echo "build-kube-images: another build is running; waiting for it"
	flock 9
fi
if [[ -s "${tarball}" && -s "${list}" ]]; then
	echo "build-kube-images: images for Kubernetes ${version} built by the other run; skipping"
	exit 0
fi
for c in "${components[@]}"; do
	if [[ ! -x "${bin}/${c}" ]]; then
		echo "build-kube-images: ${bin}/${c} is missing: run hack/build-kubernetes.sh first" >&2
		exit 1
	fi
done
start=$(date +%s)

# The references kubeadm will look for, e.g. registry.k8s.io/kube-apiserver:v1.37.2 and
# registry.k8s.io/pause:3.10.1.
declare -A ref
while read -r image; do
	name="${image##*/}"
	name="${name%%:*}"
	case "${name}" in
	kube-apiserver | kube-controller-manager | kube-scheduler | pause) ref["${name}"]="${image}" ;;
	esac
done < <("${bin}/kubeadm" config images list --kubernetes-version "${version}")
for name in "${components[@]}" pause; do
	if [[ -z "${ref[${name}]:-}" ]]; then
		echo "build-kube-images: 'kubeadm config images list' printed no ${name} image" >&2
		exit 1
	fi
done

tmp="$(mktemp -d "${bin}/.kube-images-build.XXXXXX")"
refs=()
cleanup() {
	rm -rf "${tmp}"
	if ((${#refs[@]} > 0)); then
		docker image rm "${refs[@]}" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

echo "build-kube-images: building pause (tools/kubernetes/pause, CGO_ENABLED=0)"
mkdir -p "${tmp}/pause"
(cd "${root}/tools/kubernetes" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "${tmp}/pause/pause" ./pause)

# image NAME BINARY [ENTRYPOINT]: a FROM-scratch image holding BINARY as /usr/local/bin/NAME.
image() {
	local name="$1" binary="$2" entry="${3:-}" dir="${tmp}/${1}"
	mkdir -p "${dir}"
	[[ -f "${dir}/${name}" ]] || cp "${binary}" "${dir}/${name}"
	{
		echo "FROM scratch"
		echo "ENV PATH=/usr/local/bin"
		echo "COPY ${name} /usr/local/bin/${name}"
		if [[ -n "${entry}" ]]; then
			echo "ENTRYPOINT [\"/usr/local/bin/${name}\"]"
		fi
	} >"${dir}/Dockerfile"
	refs+=("${ref[${name}]}")
	echo "build-kube-images: docker build ${ref[${name}]}"
	# The classic builder warns that it is deprecated on every run: its output is shown on failure only.
	if ! DOCKER_BUILDKIT=0 docker build --quiet --label "io.hactl.lab=kube-images" -t "${ref[${name}]}" "${dir}" >"${tmp}/build.log" 2>&1; then
		cat "${tmp}/build.log" >&2
		exit 1
	fi
}
for c in "${components[@]}"; do
	image "${c}" "${bin}/${c}"
done
image pause "${tmp}/pause/pause" entrypoint

echo "build-kube-images: docker save ${refs[*]}"
docker save -o "${tmp}/images.tar" "${refs[@]}"
chmod 0644 "${tmp}/images.tar"
printf '%s\n' "${refs[@]}" >"${tmp}/images.list"
rm -f "${bin}"/kube-images-v*.tar "${bin}"/kube-images-v*.list # other versions
mv -f "${tmp}/images.tar" "${tarball}"
mv -f "${tmp}/images.list" "${list}"
# cleanup (the trap) removes the local tags: the images live on in the tarball only.
echo "build-kube-images: done in $(($(date +%s) - start))s: ${tarball} ($(du -h "${tarball}" | cut -f1)), local tags removed"
