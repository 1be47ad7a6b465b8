# shellcheck shell=bash
# Shared helpers of the guest scripts in tests/vm/ (sourced, not run), also
# sourced by scripts/bench/configure-guest.sh and nest validate's guest
# script. The tests' scripts only report facts; crates/vm-tests judges
# them.

sysfs=/sys/kernel/sched_ext

# How many times a BPF scheduler has been enabled since boot ("none" on
# kernels without the counter): unchanged across a phase means the
# scheduler was not ejected (and re-attached) during it.
enable_seq() { cat $sysfs/enable_seq 2>/dev/null || echo none; }

# Print one fact for the host: KEY=VALUE.
fact() { printf '%s=%s\n' "$1" "$2"; }

# The time now, in ms.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# sched_ext's state (enabled, disabled, ...), or none.
state() { cat $sysfs/state 2>/dev/null || echo none; }

# Start `$bin/scx_nest ARGS...` in the background, its output appended to
# /tmp/scx_nest.log; its PID in $sched. Returns once it is enabled (or
# has exited).
start_scx_nest() {
	"$bin/scx_nest" "$@" >>/tmp/scx_nest.log 2>&1 &
	sched=$!
	wait_enabled $sched
}

# attach_scx_nest PREFIX ARGS...: start_scx_nest ARGS, then report under
# PREFIX what `no_ejection_problems` (crates/vm-tests) judges at the start:
# the state, the ops attached and enable_seq.
attach_scx_nest() {
	local prefix=$1
	shift
	start_scx_nest "$@"
	fact "${prefix}_state_before" "$(state)"
	fact "${prefix}_ops" "$(cat $sysfs/root/ops 2>/dev/null || echo none)"
	fact "${prefix}_enable_seq_before" "$(enable_seq)"
}

# with_scx_nest [OPTION...] -- COMMAND...: run COMMAND while scx_nest,
# with OPTIONS, is attached, then stop scx_nest. For guest scripts that judge
# by themselves (nest validate's): fails, saying why on stderr, when
# scx_nest does not attach, COMMAND fails, scx_nest does not stay
# attached while COMMAND runs (ejected, or enable_seq moved) or sched_ext
# is not disabled after scx_nest exits. scx_nest is stopped in every case.
with_scx_nest() {
	local seq status=0 log_from opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	log_from=$(($(cat /tmp/scx_nest.log 2>/dev/null | wc -l) + 1))
	start_scx_nest "${opts[@]}"
	if [ "$(state)" != enabled ] || ! kill -0 "$sched" 2>/dev/null; then
		echo "scx_nest did not attach (sched_ext state $(state)); it said:" \
			"$(tail -n +"$log_from" /tmp/scx_nest.log | tail -n 3)" >&2
		stop_scheduler "$sched" scx_nest_exit >&2
		return 1
	fi
	seq=$(enable_seq)
	"$@" || status=1
	if [ "$(state)" != enabled ] || [ "$(enable_seq)" != "$seq" ]; then
		echo "scx_nest did not stay attached while '$*' ran (state $(state), enable_seq" \
			"$seq -> $(enable_seq)): $(dmesg | grep sched_ext | tail -n 2)" >&2
		status=1
	fi
	stop_scheduler "$sched" scx_nest_exit >&2
	if [ "$(state)" != disabled ]; then
		echo "sched_ext still $(state) after scx_nest exited" >&2
		status=1
	fi
	return $status
}

# detach_scx_nest PREFIX: report the state and enable_seq under PREFIX,
# stop the scx_nest in $sched (PREFIX_sched_exit) and report the state
# after it exited.
detach_scx_nest() {
	fact "$1_state_after" "$(state)"
	fact "$1_enable_seq_after" "$(enable_seq)"
	stop_scheduler $sched "$1_sched_exit"
	fact "$1_state_after_exit" "$(state)"
}

# Run a command; report its exit status and the last line of its output
# as NAME_exit and NAME_message.
attempt() {
	local name=$1 out status
	shift
	out=$("$@" 2>&1)
	status=$?
	fact "${name}_exit" "$status"
	fact "${name}_message" "$(printf '%s\n' "$out" | tail -n 1)"
}

# Wait until sched_ext is enabled or the scheduler process PID has died,
# for at most 300 s of guest time: a deadline that only catches hangs
# (loading scx_nest takes about 6 s in an emulated guest on an idle host,
# 70 s before its scan was verified once; docs/design/scheduler.md). scx_enable()
# (kernel/sched/ext.c) sets the state to enabled before it increments
# enable_seq, so a script reading enable_seq right away could see the old
# count and later take the increment for an ejection: wait until the
# count holds still too.
wait_enabled() {
	local pid=$1 seq deadline=$((SECONDS + 300))
	while [ $SECONDS -lt $deadline ]; do
		[ "$(cat $sysfs/state)" = enabled ] && break
		kill -0 "$pid" 2>/dev/null || return
		sleep 0.1
	done
	for _ in $(seq 1 30); do
		seq=$(enable_seq)
		sleep 0.2
		[ "$(enable_seq)" = "$seq" ] && return
	done
}

# Instructions the kernel's verifier processed to load the BPF programs
# whose file descriptors process PID holds (fdinfo's verified_insns).
verified_insns() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null |
		awk '$1 == "verified_insns:" { n += $2 } END { print n + 0 }'
}

# Stop the scheduler process PID with SIGINT, waiting up to 180 s (a
# deadline that only catches hangs), and report its exit status as KEY
# (default sched_exit; still-running if it did not stop) and how long it
# took as KEY_seconds. If it never finishes, the scheduler's kernel stack,
# sched_ext's state and every CPU's backtrace are printed to show where it
# waits (they found the hotplug test's disable hang: docs/design/scheduler.md).
stop_scheduler() {
	local pid=$1 key=${2:-sched_exit} start=$SECONDS
	kill -INT "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt 180 ]; do
		sleep 0.2
	done
	fact "${key}_seconds" $((SECONDS - start))
	if kill -0 "$pid" 2>/dev/null; then
		fact "$key" still-running
		echo "--- still running after SIGINT: state $(cat $sysfs/state 2>/dev/null)"
		sed 's/^/stack: /' "/proc/$pid/stack" 2>/dev/null
		for task in /proc/"$pid"/task/*; do
			echo "thread ${task##*/}: $(cat "$task/wchan" 2>/dev/null)"
		done
		# Where sched_ext's own workers wait (the disable work runs on
		# one), every blocked task's stack (sysrq w) and every CPU's
		# (sysrq l: a worker spinning on a CPU has no stack in /proc)
		# into dmesg.
		for task in /proc/[0-9]*; do
			case "$(cat "$task/comm" 2>/dev/null)" in
			*sched_ext* | *scx*)
				echo "kthread $(cat "$task/comm"): $(tr '\n' ' ' <"$task/stack" 2>/dev/null)"
				;;
			esac
		done
		echo w >/proc/sysrq-trigger 2>/dev/null
		echo l >/proc/sysrq-trigger 2>/dev/null
		kill -KILL "$pid"
	else
		wait "$pid"
		fact "$key" $?
	fi
}

# Take each group of CPUs (the arguments, such as "1" "2 3") offline, then
# back online, over and over until /tmp/hotplug.stop exists, waiting while
# /tmp/hotplug.pause exists; then write "offline online errors" counts to
# /tmp/hotplug.counts. CPU 0 cannot go offline.
hotplug_loop() {
	local off=0 on=0 errors=0 group cpu cpus=/sys/devices/system/cpu
	while [ ! -e /tmp/hotplug.stop ]; do
		for group in "$@"; do
			while [ -e /tmp/hotplug.pause ]; do sleep 0.1; done
			[ -e /tmp/hotplug.stop ] && break
			for cpu in $group; do
				if echo 0 >$cpus/cpu$cpu/online; then
					off=$((off + 1))
				else errors=$((errors + 1)); fi
			done
			sleep 0.3
			for cpu in $group; do
				if echo 1 >$cpus/cpu$cpu/online; then
					on=$((on + 1))
				else errors=$((errors + 1)); fi
			done
			sleep 0.2
		done
	done
	echo "$off $on $errors" >/tmp/hotplug.counts
}
