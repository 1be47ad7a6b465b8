#!/usr/bin/env bash
# Guest side of the refusal test: scx_nest must refuse, with a message and
# without touching the running scheduler, a non-root user, a second
# scheduler, and a bad option. Prints key=value facts for the host to judge.
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
bin=${NEST_BIN:-target/debug}

attempt nonroot setpriv --reuid=65534 --regid=65534 --clear-groups "$bin/scx_nest"
fact state_after_nonroot "$(cat $sysfs/state)"

"$bin/scx_nest" >/tmp/first.log 2>&1 &
first=$!
wait_enabled $first
fact state_with_first "$(cat $sysfs/state)"

attempt second "$bin/scx_nest"
# A usage error: clap names the problem on its first line (the last one
# points to --help).
out=$("$bin/scx_nest" --p-remove 8 2>&1)
fact bad_option_exit $?
fact bad_option_message "$(printf '%s\n' "$out" | head -n 1)"
fact state_after_attempts "$(cat $sysfs/state)"

kill -INT $first
wait $first
fact first_exit $?
fact state_after_exit "$(cat $sysfs/state)"
echo "--- dmesg"
dmesg
