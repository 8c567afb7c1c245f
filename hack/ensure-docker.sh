#!/usr/bin/env bash
# Makes this machine able to run hactl's lab (e2e/lab): installs docker.io, debootstrap and dpkg-dev from
# Debian's archive when missing, starts dockerd in the background when `docker info` fails, and
# waits until the daemon answers. Skips whatever is already there. Fails loudly (exit 1, with the
# reason) when the machine cannot run the lab. See shared LAB.md for the verified recipe.
set -euo pipefail

log() { echo "ensure-docker: $*"; }
die() {
	echo "ensure-docker: FAILED: $*" >&2
	echo "ensure-docker: the hactl lab cannot run on this machine until this is fixed." >&2
	exit 1
}

dockerd_log=/var/log/hactl-dockerd.log
wait_seconds="${HACTL_DOCKER_WAIT:-60}"

[[ "$(id -u)" -eq 0 ]] || die "must run as root (debootstrap, dockerd and apt-get need it); current uid $(id -u)"

# 1. Packages.
missing=()
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
	missing+=(docker.io)
fi
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# The lab's apt repository (hack/apt-repo) is indexed with dpkg-scanpackages.
command -v dpkg-scanpackages >/dev/null 2>&1 || missing+=(dpkg-dev)
# The lb package's tests validate rendered configs with the real tools (haproxy -c, keepalived
# --config-test in a network namespace) and run HAProxy against fake apiservers.
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v keepalived >/dev/null 2>&1 || missing+=(keepalived)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# bootstrap/restore's tests run a member's side of a host fetch here (curl | zstd -d | sha256sum).
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# make unit requires these (HACTL_REQUIRE_SYSTEMD_ANALYZE, HACTL_REQUIRE_WGET): rendered units and
# timers are verified with systemd-analyze; etcdphases' download test runs wget as a host would.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v wget >/dev/null 2>&1 || missing+=(wget)
if ((${#missing[@]} > 0)); then
	command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and apt-get is not available to install them"
	log "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || die "apt-get update failed (is Debian's archive reachable?)"
	apt-get install -y -q "${missing[@]}" || die "apt-get install ${missing[*]} failed"
else
	log "docker, debootstrap, dpkg-dev, haproxy, keepalived, curl and zstd already installed; skipping apt-get"
fi
for c in docker dockerd debootstrap dpkg-scanpackages tar; do
	command -v "$c" >/dev/null 2>&1 || die "'$c' is still not on PATH after installing packages"
done

# 2. Daemon.
if docker info >/dev/null 2>&1; then
	log "dockerd already answers; skipping start"
else
	pid=""
	if pgrep -x dockerd >/dev/null 2>&1; then
		log "dockerd is running but does not answer yet; waiting for it"
	else
		# A machine restarted under a running dockerd leaves containerd's pid file behind; dockerd then
		# takes whatever process now has that pid for its containerd and times out waiting for it.
		stale_pid_file=/var/run/docker/containerd/containerd.pid
		if [[ -f "${stale_pid_file}" ]]; then
			old_pid="$(cat "${stale_pid_file}" 2>/dev/null || true)"
			if [[ -z "${old_pid}" ]] || [[ "$(cat "/proc/${old_pid}/comm" 2>/dev/null || true)" != containerd ]]; then
				log "removing stale ${stale_pid_file} (pid ${old_pid:-none} is not a running containerd)"
				rm -f "${stale_pid_file}"
			fi
		fi
		log "starting dockerd in the background (log: ${dockerd_log})"
		nohup dockerd >>"${dockerd_log}" 2>&1 </dev/null &
		pid=$!
		disown || true
	fi
	deadline=$((SECONDS + wait_seconds))
	until docker info >/dev/null 2>&1; do
		if [[ -n "${pid}" ]] && ! kill -0 "${pid}" 2>/dev/null; then
			echo "ensure-docker: last lines of ${dockerd_log}:" >&2
			tail -n 30 "${dockerd_log}" >&2 2>/dev/null || true
			die "dockerd exited right after starting"
		fi
		if ((SECONDS >= deadline)); then
			echo "ensure-docker: last lines of ${dockerd_log}:" >&2
			tail -n 30 "${dockerd_log}" >&2 2>/dev/null || true
			die "dockerd did not answer 'docker info' within ${wait_seconds}s"
		fi
		sleep 1
	done
	log "dockerd answers after $((wait_seconds - (deadline - SECONDS)))s"
fi

# 3. Can this machine run the lab? (systemd-in-container hosts need cgroupfs shared from the host.)
[[ -d /sys/fs/cgroup ]] || die "/sys/fs/cgroup does not exist; lab hosts bind-mount it for systemd"
info="$(docker info --format '{{.ServerVersion}} {{.Driver}} {{.CgroupVersion}}' 2>&1)" ||
	die "docker info failed: ${info}"
log "docker ready: server/driver/cgroup = ${info}"

# 4. Kernel limits the lab's hosts share. Every lab host's systemd, containerd, kubelet, kube-proxy and
# control-plane components take inotify instances, all as this machine's root: with Debian's default
# fs.inotify.max_user_instances of 128, a lab of 6 Kubernetes nodes runs out and the next process that
# asks fails ("fsnotify watcher init: too many open files": kube-proxy in CrashLoopBackOff, a
# scheduler or operator pod never Ready). kind documents the same limits (its "Pod errors due to too
# many open files" known issue). Raised, never lowered.
raise_sysctl() {
	local key=$1 want=$2 have
	have="$(sysctl -n "${key}" 2>/dev/null)" || die "cannot read ${key}"
	if ((have >= want)); then
		return
	fi
	log "raising ${key} from ${have} to ${want}"
	sysctl -q -w "${key}=${want}" >/dev/null || die "cannot raise ${key} to ${want} (now ${have}): the lab's Kubernetes nodes run out of inotify instances below it"
}
raise_sysctl fs.inotify.max_user_instances 8192
raise_sysctl fs.inotify.max_user_watches 524288
if [[ ! -d /etc/apt/sources.list.d && ! -f /etc/apt/sources.list ]]; then
	die "no apt sources (/etc/apt/sources.list.d/*.sources or /etc/apt/sources.list): the lab image's mirror is read from them"
fi
log "ok"
