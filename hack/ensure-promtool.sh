#!/usr/bin/env bash
# Makes promtool available for deploy/prometheus's tests (promtool check rules / test rules): when
# promtool is already on PATH (or at /usr/bin/promtool) it prints the version and exits; otherwise it
# installs Debian's prometheus package (which ships /usr/bin/promtool) without recommends, with
# /usr/sbin/policy-rc.d answering 101 during the install so the package starts no daemon, and then
# makes sure no prometheus daemon is left running or enabled: only promtool is wanted. Fails loudly
# (exit 1, with the reason) when promtool cannot be installed.
set -euo pipefail

log() { echo "ensure-promtool: $*"; }
die() {
	echo "ensure-promtool: FAILED: $*" >&2
	echo "ensure-promtool: deploy/prometheus's rule tests cannot run on this machine until this is fixed." >&2
	exit 1
}

policy=/usr/sbin/policy-rc.d
created_policy=""
cleanup() {
	if [[ -n "${created_policy}" ]]; then
		rm -f "${policy}" || echo "ensure-promtool: could not remove ${policy}; remove it by hand" >&2
	fi
}
trap cleanup EXIT

find_promtool() {
	if command -v promtool >/dev/null 2>&1; then
		command -v promtool
	elif [[ -x /usr/bin/promtool ]]; then
		echo /usr/bin/promtool
	else
		return 1
	fi
}

report() {
	local version
	version="$("$1" --version 2>&1 | sed -n 1p)" || die "'$1 --version' failed: ${version}"
	log "promtool ready: $1: ${version}"
}

# 1. Already there?
if p="$(find_promtool)"; then
	report "${p}"
	exit 0
fi

# 2. Install Debian's prometheus package (it ships /usr/bin/promtool).
[[ "$(id -u)" -eq 0 ]] || die "promtool is not on PATH and installing Debian's prometheus package needs root; current uid $(id -u)"
command -v apt-get >/dev/null 2>&1 || die "promtool is not on PATH and apt-get is not available to install Debian's prometheus package"
export DEBIAN_FRONTEND=noninteractive

# No service may start during the install: invoke-rc.d (sysvinit and deb-systemd-invoke alike)
# skips starting a service when policy-rc.d exits 101. An existing policy-rc.d (Docker images
# ship one that exits 101) is left alone; one created here is removed on exit.
if [[ ! -e "${policy}" ]]; then
	printf '#!/bin/sh\n# created by hactl hack/ensure-promtool.sh during apt-get install; removed after\nexit 101\n' >"${policy}" ||
		die "cannot create ${policy} (needed so the package starts no prometheus daemon)"
	created_policy=1
	chmod 0755 "${policy}"
	log "created ${policy} (exit 101) for the install"
else
	log "${policy} already exists; leaving it as it is"
fi

# prometheus processes running before the install are not ours to stop.
before=" $(pgrep -x prometheus 2>/dev/null | tr '\n' ' ' || true) "

install=(apt-get install -y -q --no-install-recommends prometheus)
log "installing Debian's prometheus package for promtool: ${install[*]}"
if ! "${install[@]}"; then
	log "apt-get install failed; running apt-get update and trying again"
	apt-get update -q || die "apt-get update failed (is Debian's archive reachable?)"
	"${install[@]}" || die "apt-get install --no-install-recommends prometheus failed (promtool comes with it)"
fi

# 3. No prometheus daemon left enabled or running. systemctl only when systemd is PID 1 (sd_booted's
# test: /run/systemd/system exists); otherwise systemctl's offline mode (--root=/) for the unit
# symlinks and update-rc.d for the sysvinit links, and the daemon's new processes are stopped by pid.
if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
	systemctl disable --now prometheus.service >/dev/null 2>&1 ||
		die "systemctl disable --now prometheus.service failed: the package's daemon may be left running"
	log "prometheus.service stopped and disabled (systemd)"
else
	if command -v systemctl >/dev/null 2>&1; then
		systemctl --root=/ disable prometheus.service >/dev/null 2>&1 || true
	fi
	if [[ -e /etc/init.d/prometheus ]] && command -v update-rc.d >/dev/null 2>&1; then
		update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi
	for pid in $(pgrep -x prometheus 2>/dev/null || true); do
		[[ "${before}" == *" ${pid} "* ]] && continue
		log "stopping the prometheus daemon the install started (pid ${pid})"
		kill "${pid}" 2>/dev/null || true
	done
	log "no systemd as PID 1: prometheus unit disabled offline, sysvinit links disabled"
fi
for _ in 1 2 3 4 5 6 7 8 9 10; do
	left=""
	for pid in $(pgrep -x prometheus 2>/dev/null || true); do
		[[ "${before}" == *" ${pid} "* ]] || left+=" ${pid}"
	done
	[[ -z "${left}" ]] && break
	sleep 0.5
done
[[ -z "${left}" ]] || die "a prometheus daemon is still running after the install (pid${left}); stop it by hand"

# 4. promtool itself.
p="$(find_promtool)" || die "the prometheus package is installed but /usr/bin/promtool is missing (dpkg -L prometheus | grep promtool)"
report "${p}"
