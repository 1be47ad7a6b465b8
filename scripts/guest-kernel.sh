#!/bin/sh
# Find, download and cache the newest Debian kernel with sched_ext, the
# newest of one series (--version 6.18), or (--linux-5.10) Debian 11's 5.10
# kernel, the fair scheduler of the generation Nest was compared with, as a
# reference for the simulator's Linux model (no sched_ext: only the default
# scheduler runs on it).
#
# A series Debian packages only without sched_ext (6.12, the first release
# with it) is built from Debian's linux-source-<series> package with a small
# guest config (scripts/guest-kernel.config): about eight minutes on two
# idle cores, once; the build's progress goes to stderr, its log to the
# cache.
#
# Uses a private apt configuration (own sources list, lists and cache
# directories under the cache dir); the system's apt setup is never changed
# and nothing is installed: packages are fetched with `apt-get download`
# and unpacked with `dpkg-deb -x`.
#
# Usage: scripts/guest-kernel.sh [--refresh | --cached] [--version X.Y | --linux-5.10]
#        scripts/guest-kernel.sh --list
#   --refresh     refresh the package index even if it is recent
#   --cached      do not touch the network; use the newest cached kernel
#   --version X.Y the newest kernel of series X.Y (6.12, 6.18, 7.2, ...),
#                 packaged or built; kernel/current is left alone
#   --linux-5.10  Debian 11's newest 5.10 kernel instead, cached apart
#                 (under kernel-5.10/, with its own package index)
#   --list        print the cached sched_ext kernels, newest first, and exit
#
# Environment:
#   NEST_CACHE            cache directory (default /var/cache/nest)
#   NEST_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#   NEST_KERNEL_SUITES    suites to search (default "sid trixie-backports")
#   NEST_SOURCE_SUITES    suites searched for linux-source-X.Y (default trixie)
#   NEST_KERNEL_FLAVOUR   kernel flavour (default amd64)
#   NEST_INDEX_MAX_AGE    seconds before the index is refreshed (default 86400)
#
# The last line of stdout is the cached kernel directory, which holds
# vmlinuz, config, release (the `uname -r` string) and modules/ (the
# /usr/lib/modules/<release> tree). $NEST_CACHE/kernel/current points to it
# (kernel-5.10/current with --linux-5.10); --version leaves it alone.
set -eu
PATH=$PATH:/usr/sbin:/sbin

CACHE=${NEST_CACHE:-/var/cache/nest}
MIRROR=${NEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITES=${NEST_KERNEL_SUITES:-sid trixie-backports}
FLAVOUR=${NEST_KERNEL_FLAVOUR:-amd64}
MAX_AGE=${NEST_INDEX_MAX_AGE:-86400}
SOURCE_SUITES=${NEST_SOURCE_SUITES:-trixie}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

APT=$CACHE/apt
KERNELS=$CACHE/kernel
MODE=auto
# Release prefix to accept, and whether the kernel must have sched_ext.
SERIES=
NEED_SCHED_EXT=yes
# The series asked for with --version (empty: the newest of any).
VERSION=

say() { echo "guest-kernel: $*" >&2; }
die() { say "error: $*"; exit 1; }

parse_args() {
	while [ $# -gt 0 ]; do
		case $1 in
		--refresh) MODE=refresh ;;
		--cached) MODE=cached ;;
		--linux-5.10) use_linux_510 ;;
		--version)
			[ $# -ge 2 ] || die "--version needs a series such as 6.12"
			use_version "$2"
			shift
			;;
		--list) MODE=list ;;
		-h | --help) sed -n '2,41s/^# \{0,1\}//p' "$0"; exit 0 ;;
		*) die "unknown argument '$1' (try --help)" ;;
		esac
		shift
	done
}

use_version() {
	echo "$1" | grep -Eqx '[0-9]+\.[0-9]+' ||
		die "--version wants a kernel series such as 6.12 or 7.2, not '$1'"
	VERSION=$1
	SERIES=$(echo "$1" | sed 's/\./\\./')\\.
}

check_tools() {
	for tool in apt-get apt-cache cmp dpkg-deb depmod flock sort; do
		command -v "$tool" >/dev/null ||
			die "'$tool' not found; this script needs a Debian system (run scripts/setup.sh)"
	done
	[ -r "$KEYRING" ] || die "$KEYRING missing: apt-get install debian-archive-keyring"
}

prepare_cache() {
	if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
		die "cannot write to cache dir $CACHE; run as root or set NEST_CACHE=\$HOME/.cache/nest"
	fi
	mkdir -p "$APT/etc/sources.list.d" "$APT/etc/preferences.d" \
		"$APT/lists/partial" "$APT/cache/archives/partial" "$KERNELS"
	write_sources >"$APT/etc/sources.list.new"
	# A changed mirror or suite list makes the old index stale.
	cmp -s "$APT/etc/sources.list.new" "$APT/etc/sources.list" ||
		rm -f "$APT/lists/.nest-updated"
	mv "$APT/etc/sources.list.new" "$APT/etc/sources.list"
	write_apt_conf >"$APT/apt.conf"
}

write_sources() {
	for suite in $SUITES; do
		echo "deb [signed-by=$KEYRING] $MIRROR $suite main"
	done
}

# Everything apt reads or writes is redirected into $APT; the hooks that
# the system config runs after an update or install are cleared.
write_apt_conf() {
	cat <<CONF
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Post-Invoke;
Dir::Etc::SourceList "$APT/etc/sources.list";
Dir::Etc::SourceParts "$APT/etc/sources.list.d";
Dir::Etc::Preferences "$APT/etc/preferences";
Dir::Etc::PreferencesParts "$APT/etc/preferences.d";
Dir::State::Lists "$APT/lists";
Dir::State::status "/dev/null";
Dir::Cache "$APT/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
APT::Architectures { "amd64"; };
CONF
}

# Debian 11's kernel, in its own cache and package index so that neither
# disturbs the sched_ext kernel's.
use_linux_510() {
	SUITES=${NEST_KERNEL_510_SUITES:-bullseye}
	SERIES='5\.10\.'
	NEED_SCHED_EXT=no
	APT=$CACHE/apt-5.10
	KERNELS=$CACHE/kernel-5.10
}

apt_get() { apt-get -q -c "$APT/apt.conf" "$@"; }
apt_cache() { apt-cache -c "$APT/apt.conf" "$@"; }

index_age() {
	stamp=$APT/lists/.nest-updated
	[ -e "$stamp" ] || { echo 999999999; return; }
	echo $(($(date +%s) - $(stat -c %Y "$stamp")))
}

# Returns non-zero if the index could not be refreshed.
refresh_index() {
	if [ "$MODE" = auto ] && [ "$(index_age)" -lt "$MAX_AGE" ]; then
		say "package index is recent; not refreshing (use --refresh to force)"
		return 0
	fi
	say "refreshing private package index ($SUITES from $MIRROR)"
	if apt_get --error-on=any update >&2; then
		touch "$APT/lists/.nest-updated"
		return 0
	fi
	return 1
}

# Kernel releases (e.g. 7.2.13+deb14-amd64) in the index, newest first;
# other flavours (cloud, rt) are left out.
candidates() {
	apt_cache search --names-only "^linux-image-[0-9].*-$FLAVOUR\$" |
		sed -n "s/^linux-image-\([0-9][^ ]*-$FLAVOUR\) .*/\1/p" |
		grep -Ev -- "-(cloud|rt)-$FLAVOUR\$" |
		grep -- "^$SERIES" |
		sort -Vr
}

# Cached kernel releases, newest first.
cached_releases() {
	for dir in "$KERNELS"/[0-9]*/; do
		[ -e "$dir.complete" ] && basename "$dir"
	done | grep -- "^$SERIES" | sort -Vr
}

# Packages built for a release: the image and those it depends on.
packages_of() {
	release=$1
	echo "linux-image-$release"
	apt_cache depends "linux-image-$release" 2>/dev/null |
		sed -n "s/^ *Depends: \(linux-[a-z-]*-$release\)\$/\1/p"
}

# Download and unpack one release into $2; fails if a package is missing
# or the config does not enable sched_ext. Config packages go first so a
# kernel without sched_ext is rejected before the large downloads.
fetch_release() {
	release=$1 root=$2
	debs=$root.debs
	mkdir -p "$root" "$debs"
	id _apt >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && chown _apt "$debs"
	pkgs=$(packages_of "$release")
	for pkg in $(echo "$pkgs" | grep '^linux-base-') $(echo "$pkgs" | grep -v '^linux-base-'); do
		say "downloading $pkg"
		(cd "$debs" && apt_get download "$pkg" >&2) || { say "cannot download $pkg"; return 1; }
		dpkg-deb -x "$debs"/"$pkg"_*.deb "$root" || return 1
		rm -f "$debs"/"$pkg"_*.deb
		check_config "$release" "$root" || return 1
	done
	rmdir "$debs" 2>/dev/null || true
}

find_config() {
	for f in "$2/usr/lib/modules/$1/config" "$2/boot/config-$1"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
}

find_vmlinuz() {
	for f in "$2/usr/lib/modules/$1/vmlinuz" "$2/boot/vmlinuz-$1"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
}

# Succeeds while the config is not yet unpacked, or when it has sched_ext
# (or sched_ext is not asked for).
check_config() {
	config=$(find_config "$1" "$2")
	[ -n "$config" ] && [ "$NEED_SCHED_EXT" = yes ] || return 0
	grep -qx 'CONFIG_SCHED_CLASS_EXT=y' "$config" && return 0
	say "$1 does not enable CONFIG_SCHED_CLASS_EXT; skipping"
	return 1
}

# Debian ships no modules.dep (its postinst runs depmod): make one.
make_modules_dep() {
	[ -d "$2" ] || return 0
	base=$(mktemp -d)
	mkdir -p "$base/lib/modules"
	ln -s "$(cd "$2" && pwd)" "$base/lib/modules/$1"
	depmod -b "$base" "$1" || say "$1: depmod failed"
	rm -rf "$base"
}

# Move the unpacked files into the cache layout and mark it complete.
install_release() {
	release=$1 root=$2 dest=$KERNELS/$1
	config=$(find_config "$release" "$root")
	vmlinuz=$(find_vmlinuz "$release" "$root")
	mods=$root/usr/lib/modules/$release
	[ -d "$mods" ] || mods=$root/lib/modules/$release
	make_modules_dep "$release" "$mods"
	[ -n "$config" ] || { say "$release: no kernel config in its packages"; return 1; }
	[ -n "$vmlinuz" ] || { say "$release: no vmlinuz in its packages"; return 1; }
	[ -f "$mods/modules.dep" ] || { say "$release: no modules.dep in its packages"; return 1; }
	rm -rf "$dest"
	mkdir -p "$dest" &&
		mv "$config" "$dest/config" &&
		mv "$vmlinuz" "$dest/vmlinuz" &&
		mv "$mods" "$dest/modules" &&
		echo "$release" >"$dest/release" || return 1
	apt_cache policy "linux-image-$release" 2>/dev/null | sed -n 's/^ *Candidate: //p' >"$dest/package-version"
	touch "$dest/.complete"
}

try_release() {
	release=$1
	if [ -e "$KERNELS/$release/.complete" ]; then
		say "using cached $release"
		return 0
	fi
	say "trying $release"
	work=$KERNELS/.work-$release
	rm -rf "$work" "$work.debs"
	if fetch_release "$release" "$work" && check_config "$release" "$work" &&
		install_release "$release" "$work"; then
		rm -rf "$work" "$work.debs"
		say "cached $release"
		return 0
	fi
	rm -rf "$work" "$work.debs"
	return 1
}

# Build series $VERSION from Debian's linux-source-$VERSION with the small
# guest config; sets BUILT to the cached release. Everything sched_ext and
# the harness need is built in; modules.builtin tells the initramfs so.
build_from_source() {
	binary_apt=$APT binary_suites=$SUITES
	APT=$CACHE/apt-src SUITES=$SOURCE_SUITES
	status=0
	build_in_source_index || status=1
	APT=$binary_apt SUITES=$binary_suites
	return $status
}

build_in_source_index() {
	prepare_cache
	refresh_index || { say "cannot refresh the source index"; return 1; }
	package=linux-source-$VERSION
	version=$(apt_cache policy "$package" 2>/dev/null | sed -n 's/^ *Candidate: //p')
	[ -n "$version" ] && [ "$version" != "(none)" ] ||
		{ say "no sched_ext kernel and no $package in $SOURCE_SUITES"; return 1; }
	say "no packaged $VERSION kernel has sched_ext: building $package $version"
	src=$CACHE/src build=$CACHE/build/linux-$VERSION
	mkdir -p "$src"
	deb=$(ls "$src/${package}_"*.deb 2>/dev/null | grep -F "_$(echo "$version" | sed 's/^[0-9]*://')_" || true)
	if [ -z "$deb" ]; then
		rm -f "$src/${package}_"*.deb
		id _apt >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && chown _apt "$src"
		(cd "$src" && apt_get download "$package" >&2) || { say "cannot download $package"; return 1; }
		deb=$(ls "$src/${package}_"*.deb)
	fi
	say "unpacking $(basename "$deb")"
	rm -rf "$build" && mkdir -p "$build"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -O --wildcards "*/$package.tar.xz" |
		tar -xJ -C "$build" --strip-components=1 || { say "cannot unpack $package"; return 1; }
	configure_build "$build" || return 1
	compile "$build" || return 1
	install_build "$build" "$package $version (built with scripts/guest-kernel.config)" || return 1
	rm -rf "$build"
}

configure_build() {
	fragment=$(dirname "$0")/guest-kernel.config
	make -C "$1" -s tinyconfig >&2 &&
		"$1/scripts/kconfig/merge_config.sh" -m -O "$1" "$1/.config" "$fragment" >/dev/null &&
		make -C "$1" -s olddefconfig >&2 || { say "cannot configure the kernel"; return 1; }
	missing=$(grep -o '^CONFIG_[A-Z0-9_]*=.*' "$fragment" | while read -r option; do
		grep -qx "$option" "$1/.config" || echo "$option"
	done)
	[ -z "$missing" ] || { say "the kernel config dropped: $missing"; return 1; }
}

# make in the kernel tree $1, for the release <version>-nest.
make_kernel() {
	tree=$1
	shift
	make -C "$tree" LOCALVERSION=-nest "$@"
}

# One progress line per hundred build steps; the whole log in $1.log.
compile() {
	log=$1.log jobs=$(nproc)
	say "compiling with $jobs jobs (log: $log)"
	(make_kernel "$1" -j"$jobs" bzImage modules 2>&1; echo "exit $?") |
		tee "$log" | awk '/^  [A-Z]/ { if (++n % 100 == 0) print "guest-kernel: build step " n ": " $2 > "/dev/stderr" }'
	tail -n 1 "$log" | grep -qx 'exit 0' && return 0
	tail -n 30 "$log" >&2
	say "the kernel build failed (log: $log)"
	return 1
}

install_build() {
	release=$(make_kernel "$1" -s kernelrelease)
	stage=$1.stage
	rm -rf "$stage"
	make_kernel "$1" -s INSTALL_MOD_PATH="$stage" modules_install >&2 ||
		{ say "modules_install failed"; return 1; }
	dest=$KERNELS/$release
	rm -rf "$dest" && mkdir -p "$dest" &&
		cp "$1/arch/x86/boot/bzImage" "$dest/vmlinuz" &&
		cp "$1/.config" "$dest/config" &&
		mv "$stage/lib/modules/$release" "$dest/modules" &&
		rm -f "$dest/modules/build" "$dest/modules/source" &&
		echo "$release" >"$dest/release" &&
		echo "$2" >"$dest/package-version" || return 1
	rm -rf "$stage" "$1.log"
	touch "$dest/.complete"
	BUILT=$release
	say "built and cached $release"
}

use_newest_cached() {
	newest=$(cached_releases | head -n 1)
	[ -n "$newest" ] || die "$1, and no kernel is cached in $KERNELS"
	say "$1; using the newest cached kernel, $newest"
	finish "$newest"
}

finish() {
	[ -n "$VERSION" ] || ln -sfn "$1" "$KERNELS/current"
	echo "$KERNELS/$1"
	exit 0
}

list_cached() {
	for release in $(cached_releases); do
		printf '%s\t%s\n' "$release" "$KERNELS/$release"
	done
	exit 0
}

main() {
	parse_args "$@"
	check_tools
	prepare_cache
	exec 9>"$CACHE/.guest-kernel.lock"
	flock 9
	[ "$MODE" = list ] && list_cached
	[ "$MODE" = cached ] && use_newest_cached "--cached given"
	if [ -n "$VERSION" ] && [ -n "$(cached_releases)" ] && [ "$MODE" = auto ]; then
		finish "$(cached_releases | head -n 1)"
	fi
	refresh_index || use_newest_cached "cannot refresh the package index (offline?)"
	releases=$(candidates)
	for release in $releases; do
		try_release "$release" && finish "$release"
	done
	if [ -n "$VERSION" ] && [ "$NEED_SCHED_EXT" = yes ]; then
		build_from_source && finish "$BUILT"
	fi
	[ -n "$releases" ] || use_newest_cached "no linux-image package${VERSION:+ of $VERSION} in $SUITES"
	tried=$(echo "$releases" | paste -sd ' ')
	[ -z "$(cached_releases)" ] ||
		use_newest_cached "no usable sched_ext kernel in $SUITES (tried: $tried)"
	die "no kernel in $SUITES enables CONFIG_SCHED_CLASS_EXT (tried: $tried)"
}

main "$@"
