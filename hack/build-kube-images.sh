#!/usr/bin/env bash
# Builds the container images the lab's kubeadm cluster runs, without any registry (none is
# reachable from the lab), tagged exactly as `bin/kubeadm config images list --kubernetes-version
# <version>` prints them (registry.k8s.io/...):
#   - kube-apiserver, kube-controller-manager, kube-scheduler: FROM scratch with the static binary
#     from bin/ in /usr/local/bin (ENV PATH=/usr/local/bin: kubeadm's static pod manifests start
#     the binaries by name);
#   - pause (the pod sandbox image): FROM scratch, tools/kubernetes/pause built with CGO_ENABLED=0;
#   - kube-proxy (iptables mode): FROM scratch with bin/kube-proxy in /usr/local/bin plus Debian
#     bookworm's iptables, ip6tables (-save, -restore) and conntrack, copied out of the lab's host
#     image (hactl-lab/host:<tag>, `go run ./e2e/cmd/hactl-lab image`, which builds it when
#     missing). The host image has iptables but not conntrack (a Kubernetes node installs it from
#     the mirror's apt repository): the extracting container installs it first from the lab's apt
#     repository (`go run ./e2e/cmd/apt-repo`, bin/apt-<hash>/, mounted read-only; the container runs
#     without network, Debian's archive disabled). Copied: the xtables multi binary the host's own
#     `iptables` resolves to (so kube-proxy uses the nodes' backend: nf_tables on bookworm),
#     conntrack, the xtables extensions (libxt_*, libipt_*, libip6t_*), exactly the shared
#     libraries `ldd` names for them, and /etc/protocols and /etc/services. About 85 MB, of which
#     the kube-proxy binary is 79 MB;
#   - coredns (the DNS add-on): FROM scratch, bin/coredns (hack/build-coredns.sh) as /coredns,
#     ENTRYPOINT ["/coredns"] as upstream's (kubeadm's Deployment passes -conf
#     /etc/coredns/Corefile). It runs as root: upstream's runs as nonroot with a file capability
#     to bind port 53, which a FROM-scratch COPY cannot carry; kubeadm's Deployment drops every
#     capability but NET_BIND_SERVICE. About 75 MB (CoreDNS' full plugin set).
# Each image is checked by running it once (kube-proxy: iptables, ip6tables-save, conntrack and
# kube-proxy --version), then all are saved twice: into one tarball (`docker save` of all six) and
# one archive per image (`docker save <ref>`, so its manifest.json's RepoTags is exactly that
# reference), and the local docker tags are removed again, so the machine keeps no docker image
# outside the lab's hactl-lab* names. hactl uploads to each node only the per-image archives of the
# images the node lacks (a worker needs kube-proxy, pause and coredns only: 154 MiB instead of the
# tarball's 445 MiB) and imports them into its containerd (`ctr -n k8s.io images import`); the
# lab's older code imports the combined tarball. kubeadm runs with imagePullPolicy Never.
#
# Not built: etcd (the cluster's etcd is hactl's, external to kubeadm).
#
# Output (git-ignored): bin/kube-images-<version>.tar and bin/kube-images-<version>.list (the
# image references in the tarball, one per line), bin/kube-images-<version>/<name>.tar (one
# archive per image, <name> the reference's last path element without its tag: kube-apiserver.tar,
# kube-controller-manager.tar, kube-scheduler.tar, kube-proxy.tar, pause.tar, coredns.tar; nothing
# else in that directory), bin/kube-images-<version>.inputs (the SHA-256 of the build's inputs:
# the same inputs give the same key, though docker's timestamps make the archives differ) and the
# stamp bin/.kube-images-<version>-r<recipe>.
# Skips everything when the list names exactly the images wanted (kubeadm's list without etcd),
# the stamp of this recipe exists and the per-image directory holds exactly the six archives; bump
# `recipe` below when an image's content changes in a way the list does not show. When only the
# per-image directory is missing or incomplete, it is made from the tarball (`docker load`, one
# `docker save` per reference, tags removed again: about 10 s) without building anything. Needs the
# Kubernetes binaries (hack/build-kubernetes.sh), bin/coredns (hack/build-coredns.sh; its version
# must be kubeadm's), the lab's apt repository (e2e/cmd/apt-repo, make apt-repo: built when missing,
# which needs Debian's archive) and a docker daemon (hack/ensure-docker.sh). Uses the classic builder
# (DOCKER_BUILDKIT=0): it builds FROM scratch offline. About 20 s on 2 cores with the host image
# present and Go's build cache warm (debootstrap adds ~3 minutes when the host image is missing);
# the tarball is 445 MiB, and the per-image archives add as much again.
#
# Usage: hack/build-kube-images.sh            (no arguments)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
# recipe is part of the stamp's name: bump it when the build steps change an image's content.
recipe=2
components=(kube-apiserver kube-controller-manager kube-scheduler)
wanted_names=("${components[@]}" kube-proxy coredns pause)

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
stamp="${bin}/.kube-images-${version}-r${recipe}"
inputs="${bin}/kube-images-${version}.inputs" # the SHA-256 of what the images were built from
per_image="${bin}/kube-images-${version}" # <name>.tar for each of wanted_names

# The references kubeadm will look for, in its order, e.g. registry.k8s.io/kube-apiserver:v1.37.2,
# registry.k8s.io/coredns/coredns:v1.14.6 and registry.k8s.io/pause:3.10.2 (etcd left out).
declare -A ref
wanted=()
while read -r image; do
	name="${image##*/}"
	name="${name%%:*}"
	for n in "${wanted_names[@]}"; do
		if [[ "${name}" == "${n}" ]]; then
			ref["${name}"]="${image}"
			wanted+=("${image}")
		fi
	done
done < <("${bin}/kubeadm" config images list --kubernetes-version "${version}")
for name in "${wanted_names[@]}"; do
	if [[ -z "${ref[${name}]:-}" ]]; then
		echo "build-kube-images: 'kubeadm config images list' printed no ${name} image" >&2
		exit 1
	fi
done

# tarball_complete: the tarball is there and holds exactly the wanted images, built by this recipe.
tarball_complete() {
	[[ -s "${tarball}" && -f "${stamp}" && -f "${list}" && -s "${inputs}" ]] &&
		[[ "$(cat "${list}")" == "$(printf '%s\n' "${wanted[@]}")" ]]
}
# per_image_complete: the per-image directory holds exactly one non-empty <name>.tar per wanted
# image. It is only ever written whole, next to (or from) the tarball of the same build.
per_image_complete() {
	local n files
	[[ -d "${per_image}" ]] || return 1
	files=("${per_image}"/*) # an empty directory leaves the pattern itself: one entry
	((${#files[@]} == ${#wanted_names[@]})) || return 1
	for n in "${wanted_names[@]}"; do
		[[ -s "${per_image}/${n}.tar" ]] || return 1
	done
}
complete() {
	tarball_complete && per_image_complete
}
if complete; then
	echo "build-kube-images: images for Kubernetes ${version} (${#wanted[@]}) already in ${tarball} and ${per_image}/; skipping"
	exit 0
fi

# One build at a time (e.g. `make -j`): a second caller waits, then finds the tarball and skips.
mkdir -p "${bin}"
exec 9>"${bin}/.kube-images.lock"
if ! flock -n 9; then
	echo "build-kube-images: another build is running; waiting for it"
	flock 9
fi
if complete; then
	echo "build-kube-images: images for Kubernetes ${version} built by the other run; skipping"
	exit 0
fi
start=$(date +%s)

tmp="$(mktemp -d "${bin}/.kube-images-build.XXXXXX")"
refs=() # the references tagged locally by this run, removed again on exit
cleanup() {
	rm -rf "${tmp}"
	if ((${#refs[@]} > 0)); then
		docker image rm "${refs[@]}" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

# save_per_image: `docker save` of each wanted reference (tagged locally) into its own archive,
# then the directory replaces ${per_image} (and any other version's) whole.
save_per_image() {
	local n
	mkdir -p "${tmp}/per-image"
	for n in "${wanted_names[@]}"; do
		docker save -o "${tmp}/per-image/${n}.tar" "${ref[${n}]}"
		chmod 0644 "${tmp}/per-image/${n}.tar"
	done
	chmod 0755 "${tmp}/per-image"
	rm -rf "${bin}"/kube-images-v*/
	mv "${tmp}/per-image" "${per_image}"
}

# The tarball of this recipe is there, the per-image archives are not (or not all): they are made
# from the tarball, building nothing.
if tarball_complete; then
	echo "build-kube-images: ${tarball} is complete, ${per_image}/ is not: docker load, then one docker save per image"
	refs=("${wanted[@]}")
	docker load -q -i "${tarball}" >/dev/null
	save_per_image
	echo "build-kube-images: done in $(($(date +%s) - start))s: ${per_image}/ ($(du -sh "${per_image}" | cut -f1)), ${#refs[@]} images, local tags removed"
	exit 0
fi

for c in "${components[@]}" kube-proxy; do
	if [[ ! -x "${bin}/${c}" ]]; then
		echo "build-kube-images: ${bin}/${c} is missing: run hack/build-kubernetes.sh (make kubernetes-bins) first" >&2
		exit 1
	fi
done
# coredns must be the version kubeadm deploys: bin/coredns -version prints "CoreDNS-1.14.6".
coredns_want="CoreDNS-${ref[coredns]##*:v}"
if [[ ! -x "${bin}/coredns" ]]; then
	echo "build-kube-images: ${bin}/coredns is missing: run hack/build-coredns.sh (make coredns-bin) first" >&2
	exit 1
fi
coredns_got="$("${bin}/coredns" -version | sed -n 1p)"  # sed reads it all: head would SIGPIPE coredns under pipefail
if [[ "${coredns_got}" != "${coredns_want}" ]]; then
	echo "build-kube-images: ${bin}/coredns is ${coredns_got}, kubeadm ${version} deploys ${ref[coredns]}: set that version in hack/build-coredns.sh and run it" >&2
	exit 1
fi
# The lab's host image (the nodes' Debian bookworm), built first when missing (about 3 minutes).
# `hactl-lab image` prints "hactl-lab/host:<tag> (<duration>)".
if ! host_out="$(cd "${root}" && GOWORK=off go run ./e2e/cmd/hactl-lab image)"; then
	echo "build-kube-images: 'go run ./e2e/cmd/hactl-lab image' failed: kube-proxy's iptables come from the lab's host image" >&2
	exit 1
fi
host_image="$(awk 'END { print $1 }' <<<"${host_out}")"
if [[ ! "${host_image}" =~ ^hactl-lab/host:[0-9a-f]+$ ]]; then
	echo "build-kube-images: 'go run ./e2e/cmd/hactl-lab image' printed no host image reference: '${host_out}'" >&2
	exit 1
fi
# The lab's apt repository (a flat repository: `deb [trusted=yes] file:DIR ./`), built first when
# missing; kube-proxy's conntrack comes from it (the host image lacks it). `apt-repo` prints the
# directory as its last line, e.g. bin/apt-e13a180f8849/.
if ! apt_repo="$(cd "${root}" && GOWORK=off go run ./e2e/cmd/apt-repo | tail -1)"; then
	echo "build-kube-images: 'go run ./e2e/cmd/apt-repo' failed: kube-proxy's conntrack comes from the lab's apt repository" >&2
	exit 1
fi
if [[ "${apt_repo}" != /* ]]; then
	apt_repo="${root}/${apt_repo}"
fi
if [[ ! -s "${apt_repo}/Packages" ]]; then
	echo "build-kube-images: 'go run ./e2e/cmd/apt-repo' printed '${apt_repo}', which holds no Packages index" >&2
	exit 1
fi

# The inputs' key: docker build stamps each image with the time, so two builds of the same inputs
# give different archives; what went into them (this script, the binaries, pause's source, the
# host image's content-addressed tag, the apt repository's hashed name) names them instead. The
# kind node image, which preloads the archives, is keyed on it (e2e/lab KindNodeImageRef), and so is
# the machine's build cache (hack/lib/buildcache.sh), which a fresh clone copies the archives from.
inputs_key="$({
	echo "recipe=${recipe} version=${version} host=${host_image} apt=$(basename "${apt_repo}")"
	echo "refs=${wanted[*]}"
	sha256sum <"${BASH_SOURCE[0]}"
	for b in "${components[@]}" kube-proxy coredns; do
		sha256sum <"${bin}/${b}"
	done
	(cd "${root}/tools/kubernetes" && find go.mod go.sum pause -type f | LC_ALL=C sort | xargs sha256sum)
} | sha256sum | cut -c1-64)"
outputs=("${tarball##*/}" "${list##*/}" "${per_image##*/}" "${inputs##*/}")
# shellcheck source=hack/lib/buildcache.sh
. "${root}/hack/lib/buildcache.sh"
rm -f "${bin}"/kube-images-v*.inputs "${bin}"/.kube-images-v*
if buildcache_restore build-kube-images "${inputs_key:0:16}" "${bin}" "${outputs[@]}" &&
	[[ "$(cat "${inputs}")" == "${inputs_key}" ]]; then
	touch "${stamp}"
	exit 0
fi

# build NAME: docker build of the context ${tmp}/NAME (its Dockerfile written by the caller),
# tagged ${ref[NAME]}.
build() {
	local name="$1"
	refs+=("${ref[${name}]}")
	echo "build-kube-images: docker build ${ref[${name}]}"
	# The classic builder warns that it is deprecated on every run: its output is shown on failure only.
	if ! DOCKER_BUILDKIT=0 docker build --quiet --label "io.hactl.lab=kube-images" -t "${ref[${name}]}" "${tmp}/${name}" >"${tmp}/build.log" 2>&1; then
		cat "${tmp}/build.log" >&2
		exit 1
	fi
}
# check NAME CMD...: runs CMD in the image of NAME (no network, NET_ADMIN for iptables) and fails
# the build, showing the output, when it fails.
check() {
	local name="$1"
	shift
	if ! docker run --rm --name "hactl-lab-kube-images-check" --network none --cap-add NET_ADMIN \
		"${ref[${name}]}" "$@" >"${tmp}/check.log" 2>&1; then
		echo "build-kube-images: check of ${ref[${name}]} failed: $*" >&2
		cat "${tmp}/check.log" >&2
		exit 1
	fi
}

# scratch NAME BINARY [ENTRYPOINT]: a FROM-scratch image holding BINARY as /usr/local/bin/NAME.
scratch() {
	local name="$1" binary="$2" entry="${3:-}" dir="${tmp}/${1}"
	mkdir -p "${dir}"
	cp "${binary}" "${dir}/${name}"
	{
		echo "FROM scratch"
		echo "ENV PATH=/usr/local/bin"
		echo "COPY ${name} /usr/local/bin/${name}"
		if [[ -n "${entry}" ]]; then
			echo "ENTRYPOINT [\"/usr/local/bin/${name}\"]"
		fi
	} >"${dir}/Dockerfile"
	build "${name}"
}

for c in "${components[@]}"; do
	scratch "${c}" "${bin}/${c}"
done

echo "build-kube-images: building pause (tools/kubernetes/pause, CGO_ENABLED=0)"
(cd "${root}/tools/kubernetes" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "${tmp}/pause.bin" ./pause)
scratch pause "${tmp}/pause.bin" entrypoint

# kube-proxy: its iptables and conntrack come from the lab's host image (Debian bookworm, as the
# nodes), so they match the nodes' own iptables (version and backend); conntrack is installed into
# the (throw-away) container from the lab's apt repository, as a node installs it.
echo "build-kube-images: kube-proxy's iptables (the backend of the host's own iptables) from ${host_image}, conntrack from ${apt_repo}"
# Runs inside the host image, without network: installs conntrack when missing from the apt
# repository mounted at /hactl-lab-apt (Debian's archive, unreachable, disabled; apt's output to
# stderr), then writes to stdout a tar of the multi binary `iptables` resolves to, conntrack, the
# xtables extensions, every shared library ldd names for them (under the paths ldd prints:
# /lib/x86_64-linux-gnu/..., /lib64/ld-linux-x86-64.so.2) and two files of /etc.
extract='set -eu
if ! command -v conntrack >/dev/null; then
	mkdir -p /etc/apt/hactl-lab-disabled
	if [ -e /etc/apt/sources.list ]; then mv -f /etc/apt/sources.list /etc/apt/hactl-lab-disabled/; fi
	echo "deb [trusted=yes] file:/hactl-lab-apt ./" >/etc/apt/sources.list.d/hactl-lab.list
	{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends conntrack; } >&2
fi
multi="$(readlink -f "$(command -v iptables)")"
case "${multi}" in */xtables-nft-multi | */xtables-legacy-multi) ;; *) echo "iptables resolves to ${multi}, not an xtables multi binary" >&2; exit 1 ;; esac
x=/usr/lib/x86_64-linux-gnu/xtables
elf="${multi} $(command -v conntrack) $(ls ${x}/libxt_*.so ${x}/libipt_*.so ${x}/libip6t_*.so)"
libs="$(ldd ${elf} | awk '\''$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }'\'' | sort -u)"
cd /
tar -ch $(for f in ${elf} ${libs} /etc/protocols /etc/services; do echo "${f#/}"; done)'
kp="${tmp}/kube-proxy"
mkdir -p "${kp}/rootfs"
docker run --rm --name hactl-lab-kube-images-extract --network none -v "${apt_repo}:/hactl-lab-apt:ro" \
	--entrypoint /bin/sh "${host_image}" -c "${extract}" |
	tar -C "${kp}/rootfs" -x
multi="$(cd "${kp}/rootfs/usr/sbin" && ls xtables-*-multi)" # xtables-nft-multi or xtables-legacy-multi
backend="${multi#xtables-}"
backend="${backend%-multi}"
for t in iptables ip6tables; do
	for s in "" -save -restore; do
		ln -s "${multi}" "${kp}/rootfs/usr/sbin/${t}${s}"
		ln -s "${multi}" "${kp}/rootfs/usr/sbin/${t}-${backend}${s}"
	done
done
mkdir -p "${kp}/rootfs/usr/local/bin" "${kp}/rootfs/run" "${kp}/rootfs/tmp"
chmod 1777 "${kp}/rootfs/tmp"
cp "${bin}/kube-proxy" "${kp}/rootfs/usr/local/bin/kube-proxy"
{
	echo "FROM scratch"
	echo "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	echo "COPY rootfs/ /"
} >"${kp}/Dockerfile"
build kube-proxy
check kube-proxy kube-proxy --version
check kube-proxy iptables -t nat -L -n
check kube-proxy ip6tables-save
check kube-proxy conntrack --version
check kube-proxy iptables --version # "iptables v1.8.9 (nf_tables)" or "(legacy)"
if ! grep -q "(${backend/nft/nf_tables})" "${tmp}/check.log"; then
	echo "build-kube-images: ${ref[kube-proxy]}'s iptables is not the ${backend} backend: $(cat "${tmp}/check.log")" >&2
	exit 1
fi
echo "build-kube-images: kube-proxy image: iptables-${backend}, $(du -sh "${kp}/rootfs" | cut -f1) uncompressed"

# coredns: upstream's image is distroless with /coredns as its entrypoint.
mkdir -p "${tmp}/coredns"
cp "${bin}/coredns" "${tmp}/coredns/coredns"
{
	echo "FROM scratch"
	echo "COPY coredns /coredns"
	echo "EXPOSE 53 53/udp"
	echo "ENTRYPOINT [\"/coredns\"]"
} >"${tmp}/coredns/Dockerfile"
build coredns
check coredns -version

echo "build-kube-images: docker save ${refs[*]}"
docker save -o "${tmp}/images.tar" "${refs[@]}"
chmod 0644 "${tmp}/images.tar"
printf '%s\n' "${wanted[@]}" >"${tmp}/images.list"
rm -f "${bin}"/kube-images-v*.tar "${bin}"/kube-images-v*.list "${bin}"/kube-images-v*.inputs "${bin}"/.kube-images-v* # other versions, recipes
# The per-image archives first: the stamp, written last, makes the tarball count as complete.
echo "build-kube-images: docker save of each image into ${per_image}/"
save_per_image
mv -f "${tmp}/images.tar" "${tarball}"
mv -f "${tmp}/images.list" "${list}"
echo "${inputs_key}" >"${tmp}/inputs"
mv -f "${tmp}/inputs" "${inputs}"
touch "${stamp}"
buildcache_store build-kube-images "${inputs_key:0:16}" "${bin}" "${outputs[@]}"
# cleanup (the trap) removes the local tags: the images live on in the archives only.
echo "build-kube-images: done in $(($(date +%s) - start))s: ${tarball} ($(du -h "${tarball}" | cut -f1)) and ${per_image}/ ($(du -sh "${per_image}" | cut -f1)), ${#refs[@]} images, local tags removed"
