#!/bin/sh
# Install what Nest needs to build, boot and test on a fresh Debian 12.
#
# Idempotent: packages already installed are left alone, and `apt-get
# update` only runs when something has to be installed. Never changes the
# system's apt sources. Run as root (or with sudo) when packages are missing.
set -eu

PACKAGES="
clang-19 llvm-19 libclang-19-dev
libelf-dev zlib1g-dev pkg-config make gcc dpkg-dev
qemu-system-x86 busybox-static cpio kmod xz-utils
ca-certificates debian-archive-keyring
protobuf-compiler fonts-dejavu-core chromium
rt-tests stress-ng zstd cmake
bc bison flex libssl-dev dwarves
trace-cmd linux-perf
"
MIN_CARGO=1.91

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

installed() {
	dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed
}

missing_packages() {
	for pkg in $PACKAGES; do
		installed "$pkg" || echo "$pkg"
	done
}

install_packages() {
	missing=$(missing_packages | tr '\n' ' ')
	if [ -z "$missing" ]; then
		say "all Debian packages already installed; nothing to do"
		return
	fi
	[ "$(id -u)" = 0 ] ||
		die "missing packages: $missing; re-run as root (sudo $0)"
	say "installing: $missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086 # word splitting wanted
	apt-get install -y -q --no-install-recommends $missing
	say "packages installed"
}

# Succeeds if version $1 >= $2 (dotted numbers).
version_at_least() {
	[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

find_cargo() {
	command -v cargo 2>/dev/null && return
	[ -x "$HOME/.cargo/bin/cargo" ] && echo "$HOME/.cargo/bin/cargo"
}

check_rust() {
	cargo=$(find_cargo || true)
	if [ -z "$cargo" ]; then
		if command -v rustup >/dev/null; then
			say "cargo missing; installing the stable toolchain with rustup"
			rustup toolchain install stable --profile minimal -c clippy,rustfmt
			rustup default stable
			cargo=$(find_cargo) || die "rustup ran but cargo is still not on PATH"
		else
			die "Rust is not installed. Install rustup (https://rustup.rs, or
  'curl --proto =https -sSf https://sh.rustup.rs | sh'), then run
  'rustup toolchain install stable' and re-run $0. Cargo >= $MIN_CARGO is needed."
		fi
	fi
	have=$("$cargo" --version | awk '{print $2}')
	if ! version_at_least "${have%%-*}" "$MIN_CARGO"; then
		die "cargo $have is too old (>= $MIN_CARGO needed for the scx crates):
  run 'rustup update stable' (or install a newer toolchain) and re-run $0"
	fi
	say "cargo $have found ($cargo); Rust toolchain OK"
}

install_packages
check_rust
say "done. Next: scripts/guest-kernel.sh fetches the guest kernel."
