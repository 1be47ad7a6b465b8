#!/usr/bin/env bash
# Guest side of the per-command opt-in test (`nest run`). Reports, as
# key=value facts for the host to judge (crates/vm-tests):
#   - `nest run` with no scheduler attached (status, message);
#   - with `scx_nest --partial`: the policy (field 41 of /proc/PID/stat;
#     7 is SCHED_EXT) and ext.enabled of a command started by `nest run`,
#     of a child it forked, and of a task started normally; a missing
#     command's status;
#   - with `scx_nest` in full mode: `nest run`'s status and note.
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
bin=${NEST_BIN:-target/debug}
policy_of() { awk '{ print $41 }' "/proc/$1/stat"; }
ext_of() { awk '$1 == "ext.enabled" { print $3 }' "/proc/$1/sched"; }

fact sysfs_files "$(cd $sysfs && echo *)"
attempt unattached "$bin/nest" run -- true

start_scx_nest --partial
fact partial_state "$(cat $sysfs/state)"
fact partial_switch_all "$(cat $sysfs/switch_all 2>/dev/null || echo missing)"

# The opted-in command: a shell that forks a child, then reports both.
"$bin/nest" run -- sh -c 'sleep 30 & echo "$$ $!" >/tmp/optin.pids; wait' &
runner=$!
sleep 5 &
plain=$!
for _ in $(seq 1 100); do
	[ -s /tmp/optin.pids ] && break
	sleep 0.1
done
read -r optin child </tmp/optin.pids
fact optin_is_runner "$([ "$optin" = "$runner" ] && echo yes || echo no)"
fact optin_policy "$(policy_of "$optin")"
fact optin_ext "$(ext_of "$optin")"
fact child_policy "$(policy_of "$child")"
fact child_ext "$(ext_of "$child")"
fact plain_policy "$(policy_of "$plain")"
fact plain_ext "$(ext_of "$plain")"
kill "$child" "$plain" 2>/dev/null
wait "$runner" 2>/dev/null
attempt missing "$bin/nest" run -- /nonexistent/command
stop_scheduler $sched partial_sched_exit

start_scx_nest
fact full_switch_all "$(cat $sysfs/switch_all 2>/dev/null || echo missing)"
attempt full "$bin/nest" run -- true
stop_scheduler $sched full_sched_exit
fact state_after_exit "$(cat $sysfs/state)"
sed 's/^/scx_nest: /' /tmp/scx_nest.log
echo "--- dmesg"
dmesg
