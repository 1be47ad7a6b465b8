# Stage 2, in the host's root (read-only): mount what tools expect, run
# the command from the results share and power off.
bb=/run/busybox
share=/run/nest

try_mount() {
	$bb mount "$@" || echo "nest-init: warning: mount $* failed"
}

try_mount -t tmpfs -o mode=1777 tmpfs /tmp
try_mount -t tmpfs -o mode=0755 tmpfs /boot
$bb cp "$share/kconfig" "/boot/config-$($bb uname -r)"
try_mount -t tracefs tracefs /sys/kernel/tracing
try_mount -t debugfs debugfs /sys/kernel/debug
try_mount -t bpf bpf /sys/fs/bpf
try_mount -t cgroup2 cgroup2 /sys/fs/cgroup
$bb mkdir -p /dev/pts /dev/shm
try_mount -t devpts devpts /dev/pts
try_mount -t tmpfs -o mode=1777 tmpfs /dev/shm

. "$share/env"
# A working directory under /tmp, /run or /boot is hidden by the guest's own
# mounts: the host shares it separately; put it back at its path.
if [ -n "${NEST_WORKDIR_SHARED:-}" ]; then
	$bb mkdir -p "$NEST_WORKDIR" 2>/dev/null
	if ! $bb mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro workdir "$NEST_WORKDIR"; then
		echo "nest-init: error: cannot mount the working directory at $NEST_WORKDIR" >/dev/console
		$bb poweroff -f
	fi
fi
# The host's output directory, at the same path as on the host; mounted
# after the tmpfs mounts above so that a directory under /tmp works too,
# and after the working directory so that an output directory inside it is
# not hidden by it.
if [ -n "${NEST_OUT:-}" ]; then
	$bb mkdir -p "$NEST_OUT" 2>/dev/null
	if ! $bb mount -t 9p -o trans=virtio,version=9p2000.L output "$NEST_OUT"; then
		echo "nest-init: error: cannot mount the output directory at $NEST_OUT" >/dev/console
		$bb poweroff -f
	fi
	export NEST_OUT
fi
echo "nest-init: running the command" >/dev/console
echo ready >"$share/ready"
cd "$NEST_WORKDIR" 2>/dev/null || cd /
env PATH="$NEST_PATH" HOME=/tmp /bin/sh "$share/command.sh" \
	</dev/null >"$share/stdout" 2>"$share/stderr"
echo $? >"$share/status"
$bb sync
echo "nest-init: command done; powering off" >/dev/console
$bb poweroff -f
