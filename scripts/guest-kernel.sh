#!/bin/sh
# Find, download and cache the newest Debian kernel with sched_ext, or
# (--linux-5.10) Debian 11's 5.10 kernel, the fair scheduler of the
# generation Nest was compared with, as a reference for the simulator's
# Linux model (no sched_ext: only the default scheduler runs on it).
#
# Uses a private apt configuration (own sources list, lists and cache
# directories under the cache dir); the system's apt setup is never changed
# and nothing is installed: packages are fetched with `apt-get download`
# and unpacked with `dpkg-deb -x`.
#
# Usage: scripts/guest-kernel.sh [--refresh | --cached] [--linux-5.10]
#   --refresh     refresh the package index even if it is recent
#   --cached      do not touch the network; use the newest cached kernel
#   --linux-5.10  Debian 11's newest 5.10 kernel instead, cached apart
#                 (under kernel-5.10/, with its own package index)
#
# Environment:
#   NEST_CACHE            cache directory (default /var/cache/nest)
#   NEST_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#   NEST_KERNEL_SUITES    suites to search (default "sid trixie-backports")
#   NEST_KERNEL_FLAVOUR   kernel flavour (default amd64)
#   NEST_INDEX_MAX_AGE    seconds before the index is refreshed (default 86400)
#
# The last line of stdout is the cached kernel directory, which holds
# vmlinuz, config, release (the `uname -r` string) and modules/ (the
# /usr/lib/modules/<release> tree). $NEST_CACHE/kernel/current points to it
# (kernel-5.10/current with --linux-5.10).
set -eu
PATH=$PATH:/usr/sbin:/sbin

CACHE=${NEST_CACHE:-/var/cache/nest}
MIRROR=${NEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITES=${NEST_KERNEL_SUITES:-sid trixie-backports}
FLAVOUR=${NEST_KERNEL_FLAVOUR:-amd64}
MAX_AGE=${NEST_INDEX_MAX_AGE:-86400}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

APT=$CACHE/apt
KERNELS=$CACHE/kernel
MODE=auto
# Release prefix to accept, and whether the kernel must have sched_ext.
SERIES=
NEED_SCHED_EXT=yes

say() { echo "guest-kernel: $*" >&2; }
die() { say "error: $*"; exit 1; }

parse_args() {
	for arg in "$@"; do
		case $arg in
		--refresh) MODE=refresh ;;
		--cached) MODE=cached ;;
		--linux-5.10) use_linux_510 ;;
		-h | --help) sed -n '2,30s/^# \{0,1\}//p' "$0"; exit 0 ;;
		*) die "unknown argument '$arg' (try --help)" ;;
		esac
	done
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
	done | sort -Vr
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

use_newest_cached() {
	newest=$(cached_releases | head -n 1)
	[ -n "$newest" ] || die "$1, and no kernel is cached in $KERNELS"
	say "$1; using the newest cached kernel, $newest"
	finish "$newest"
}

finish() {
	ln -sfn "$1" "$KERNELS/current"
	echo "$KERNELS/$1"
	exit 0
}

main() {
	parse_args "$@"
	check_tools
	prepare_cache
	exec 9>"$CACHE/.guest-kernel.lock"
	flock 9
	[ "$MODE" = cached ] && use_newest_cached "--cached given"
	refresh_index || use_newest_cached "cannot refresh the package index (offline?)"
	releases=$(candidates)
	[ -n "$releases" ] || use_newest_cached "no linux-image-*-$FLAVOUR package in $SUITES"
	for release in $releases; do
		try_release "$release" && finish "$release"
	done
	tried=$(echo "$releases" | paste -sd ' ')
	[ -z "$(cached_releases)" ] ||
		use_newest_cached "no usable sched_ext kernel in $SUITES (tried: $tried)"
	die "no kernel in $SUITES enables CONFIG_SCHED_CLASS_EXT (tried: $tried)"
}

main "$@"
