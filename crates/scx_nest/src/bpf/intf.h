/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types shared by the scx_nest BPF scheduler and its Rust user space
 * (through bindgen). The policy's own types come from nest_policy.h.
 */
#ifndef __SCX_NEST_INTF_H
#define __SCX_NEST_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int s32;
#endif

#include "nest_policy.h"

enum scx_nest_consts {
	/* Never consumed: holds the tasks the stall test starves on purpose. */
	STALL_DSQ = 1,
	/*
	 * Tasks that found no idle CPU wait in their LLC's queue, DSQ
	 * LLC_DSQ_BASE + l for LLC l, ordered by virtual time
	 * (policy/nest_sched.c).
	 */
	LLC_DSQ_BASE = 0x10,
	/* Length of a task's comm, with its NUL. */
	COMM_LEN = 16,
	/*
	 * S_move: tasks waiting on CPU c's run queue for a deferred move sit
	 * in DSQ PENDING_DSQ_BASE + c (a local DSQ cannot be iterated, so its
	 * tasks could not be moved from a timer).
	 */
	PENDING_DSQ_BASE = 0x100,
	/*
	 * Tasks that may run on CPU c only (pinned, or migration disabled)
	 * wait in DSQ PINNED_DSQ_BASE + c, ordered by virtual time.
	 */
	PINNED_DSQ_BASE = 0x400,
	/*
	 * CPU c's front queue, DSQ FRONT_DSQ_BASE + c: the one task queued on
	 * c that c takes back first (policy/nest_sched.c, "Locality").
	 */
	FRONT_DSQ_BASE = 0x800,
};

/* Placement policies scx_nest can run (--policy). */
enum scx_nest_policy {
	/* Nest (policy/nest_policy.c). */
	POLICY_NEST = 0,
	/* sched_ext's built-in idle selection only: the minimal baseline. */
	POLICY_BUILTIN = 1,
	/* S_local (policy/smove_policy.c): the waker's CPU. */
	POLICY_SLOCAL = 2,
	/* S_move (policy/smove_policy.c): frequency test, deferred move. */
	POLICY_SMOVE = 3,
	/*
	 * Negative control of the placement tests: every placement takes the
	 * next idle CPU after a global cursor that alternates sockets, so work
	 * is spread over every CPU. Not a scheduler to use.
	 */
	POLICY_SPREAD = 4,
};

/*
 * Scheduler events counted besides the policy's statistics: their one
 * definition, as NEST_STATS in nest_policy.h (same entries, same use: enum
 * scx_nest_event below, and the Event enum of user space, src/stats.rs).
 */
#define SCX_NEST_EVENTS(X)						\
	X(QUEUED, queue, "Tasks queued in their LLC's virtual-time queue") \
	X(PINNED, queue, "Tasks queued in their only CPU's queue (pinned or migration disabled)") \
	X(DIRECT, queue, "Tasks queued without a placement sent straight to an idle CPU") \
	X(KICKED, cpu, "Idle CPUs woken to look at the queues")		\
	X(STALLED, queue, "Tasks held back by --debug-stall-comm")	\
	/*								\
	 * Delay from claiming an idle CPU for a task to the task	\
	 * running there, for CPUs that were warm spinning and for CPUs	\
	 * that were really idle: the cost (or gain) of spinning.	\
	 */								\
	X(SPIN_WAKE_NS, wake, "Total delay from placement to running, on warm-spinning CPUs (ns)") \
	X(SPIN_WAKES, wake, "Placements on a warm-spinning CPU")	\
	X(IDLE_WAKE_NS, wake, "Total delay from placement to running, on really idle CPUs (ns)") \
	X(IDLE_WAKES, wake, "Placements on a really idle CPU")		\
	X(MOVE_FAILED, smove, "S_move: moves the kernel refused (task already gone)") \
	X(UNPAIRED, cpu, "Tasks moved at a tick from a shared core to a whole idle one") \
	X(PREEMPTED, cpu, "Running tasks preempted by a woken task with an earlier virtual time") \
	X(STOLEN, queue, "Tasks taken from another LLC's queue or another CPU's front")	\
	X(KEPT_LOCAL, queue, "Tasks taken back from their CPU's front queue") \
	X(RESUMED, queue, "Tasks preempted by a pinned task, kept on their CPU to run right after it") \
	X(TICK_KICKED, cpu, "Idle CPUs woken at a tick because tasks waited in the LLC queue") \
	X(RELEASED, cpu, "CPUs taken by a higher scheduling class (tasks re-enqueued)") \
	X(STARVED, queue, "Tasks run ahead of their virtual time after waiting over a second (starvation guard)") \
	X(KICK_DROPPED, cpu, "Kicks not sent because the calling CPU is going offline (see kick_cpu())")

#define NEST_EV_ENUMERATOR(name, group, description) NEST_EV_##name,
enum scx_nest_event {
	SCX_NEST_EVENTS(NEST_EV_ENUMERATOR)
	NEST_NR_EVENTS,
};

/* What scx_nest keeps per task. */
struct task_ctx {
	/* The policy's own state. */
	struct nest_task nest;
	/* When the task was placed on a claimed idle CPU (0: it was not). */
	u64 placed_ns;
	/* Since when the task waits in one of our queues (0: it does not). */
	u64 queued_ns;
	/* That CPU was warm spinning. */
	u32 placed_on_spinning;
	/* Preempted at a tick to be re-placed on a whole idle core. */
	u32 unpair;
	/*
	 * The weight the task runs with (nest_task_weight(): nice and its
	 * cgroup's share), set when it is queued and when it starts running.
	 */
	u32 weight;
	/* What the task adds to its cgroup's runnable weight (0: nothing). */
	u32 cg_runnable;
};

/* Per-CPU counters, summed by user space. */
struct nest_counters {
	/* Indexed by enum nest_stat. */
	u64 policy[NEST_NR_STATS];
	/* Indexed by enum scx_nest_event. */
	u64 events[NEST_NR_EVENTS];
};

#endif /* __SCX_NEST_INTF_H */
