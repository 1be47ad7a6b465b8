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
echo "nest-init: running the command" >/dev/console
echo ready >"$share/ready"
cd "$NEST_WORKDIR" 2>/dev/null || cd /
env PATH="$NEST_PATH" HOME=/tmp /bin/sh "$share/command.sh" \
	</dev/null >"$share/stdout" 2>"$share/stderr"
echo $? >"$share/status"
$bb sync
echo "nest-init: command done; powering off" >/dev/console
$bb poweroff -f
