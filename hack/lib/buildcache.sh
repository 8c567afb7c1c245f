# Machine-wide cache of the hack/build-*.sh outputs, keyed by input hash, so a fresh clone (CI's)
# copies what an earlier clone built from the same inputs instead of building it again. Sourced by
# those scripts; not executable on its own.
#
# The cache lives in ${HACTL_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hactl/build}, one
# directory per <name>-<key> holding the outputs under their paths relative to bin/. An entry is
# written whole (a temporary directory renamed into place), so a reader never sees half of one.
# Nothing here removes entries: delete the directory to reclaim the space.

buildcache_dir() {
	echo "${HACTL_BUILD_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/hactl/build}"
}

# buildcache_key FILE...: the first 16 hex digits of the SHA-256 over the files' contents (the
# build script itself, go.mod and go.sum, ...), the extra words in $BUILDCACHE_SALT and the Go
# toolchain that builds (its version, GOOS and GOARCH: a newer Go gives other binaries).
buildcache_key() {
	{
		printf '%s\n' "${BUILDCACHE_SALT:-}"
		go env GOVERSION GOOS GOARCH 2>/dev/null || true
		cat "$@"
	} | sha256sum | cut -c1-16
}

# buildcache_restore NAME KEY BIN PATH...: copies each PATH (relative to BIN; files or
# directories) from the cache entry NAME-KEY into BIN. Copies, never hard links: a later build that
# writes a binary in place (go build -o may) must not change the cache. Returns 1, copying
# nothing, when the entry is missing or lacks a PATH.
buildcache_restore() {
	local name="$1" key="$2" bin="$3"
	shift 3
	local entry p
	entry="$(buildcache_dir)/${name}-${key}"
	[[ -d "${entry}" ]] || return 1
	for p in "$@"; do
		[[ -e "${entry}/${p}" ]] || return 1
	done
	mkdir -p "${bin}"
	for p in "$@"; do
		rm -rf "${bin:?}/${p}"
		mkdir -p "$(dirname "${bin}/${p}")"
		cp -a --reflink=auto "${entry}/${p}" "${bin}/${p}"
	done
	echo "${name}: restored ${*} from the build cache ($(basename "${entry}"))"
}

# buildcache_store NAME KEY BIN PATH...: records BIN's PATHs as the cache entry NAME-KEY. A failure
# to write the cache is reported and ignored (the build itself succeeded).
buildcache_store() {
	local name="$1" key="$2" bin="$3"
	shift 3
	local cache entry tmp p
	cache="$(buildcache_dir)"
	entry="${cache}/${name}-${key}"
	[[ -d "${entry}" ]] && return 0
	if ! mkdir -p "${cache}" || ! tmp="$(mktemp -d "${cache}/.${name}-${key}.XXXXXX")"; then
		echo "${name}: warning: cannot write the build cache ${cache}" >&2
		return 0
	fi
	for p in "$@"; do
		mkdir -p "$(dirname "${tmp}/${p}")"
		if ! cp -a --reflink=auto "${bin}/${p}" "${tmp}/${p}"; then
			echo "${name}: warning: cannot copy ${p} into the build cache" >&2
			rm -rf "${tmp}"
			return 0
		fi
	done
	mv -T "${tmp}" "${entry}" 2>/dev/null || rm -rf "${tmp}" # another run stored it first
}
