#!/bin/busybox sh
# Stage 1, in the initramfs: load the 9p modules, mount the host's root
# read-only and the results share, then switch_root into the host's root.
/bin/busybox --install -s /bin
export PATH=/bin

fail() {
	echo "nest-init: error: $*"
	poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for module in $(cat /modules/order); do
	insmod "/modules/$module" || fail "cannot load $module"
done
opts=trans=virtio,version=9p2000.L
# cache=loose: exec-heavy work runs about a third faster; the guest may
# miss host changes made while it runs.
mount -t 9p -o "$opts,ro,cache=loose" hostroot /newroot || fail "cannot mount the host root over 9p"
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "cannot mount /run"
mkdir -p /newroot/run/nest
mount -t 9p -o "$opts" results /newroot/run/nest || fail "cannot mount the results share"
cp /bin/busybox /newroot/run/busybox
cp /stage2 /newroot/run/nest-stage2
for fs in dev proc sys; do
	mount --move "/$fs" "/newroot/$fs" || fail "cannot move /$fs"
done
exec switch_root /newroot /run/busybox sh /run/nest-stage2
