/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nest placement policy: types shared by every host of the policy.
 *
 * The policy (nest_policy.c) is compiled in two places:
 *   - as BPF, inside the scx_nest sched_ext scheduler
 *     (crates/scx_nest/src/bpf/), and
 *   - natively, for host unit tests and the simulator (crates/nest-policy).
 *
 * This header is also read by bindgen, so the Rust side of both hosts sees
 * the same layouts. It must stay plain C with no host-specific includes: the
 * includer provides u32/u64/s32/bool (vmlinux.h in BPF, native.h natively).
 *
 * The host implements this platform interface, declared before it includes
 * nest_policy.c (nest_env_t is the host's per-call context: in BPF it carries
 * the task being placed, natively a pointer back into Rust):
 *
 *   bool plat_claim_idle(nest_env_t env, s32 cpu);
 *	Atomically take @cpu's idle state. True if @cpu was idle and is now
 *	ours; two concurrent claims of one CPU never both succeed.
 *   bool plat_task_allowed(nest_env_t env, s32 cpu);
 *	May the task being placed run on @cpu (affinity, CPU online)?
 *   s32 plat_default_cpu(nest_env_t env, s32 prev_cpu, bool whole_core,
 *			   bool *idle);
 *	The host's default placement. *idle is set when the CPU returned was
 *	idle and has been claimed. With @whole_core, only a CPU of a whole
 *	idle core (every SMT sibling idle) may be claimed.
 *   s32 plat_pick_any_idle(nest_env_t env);
 *	Claim any idle CPU the task may use, on any socket; -1 if none.
 *   void plat_count(nest_env_t env, enum nest_stat stat, u64 amount);
 *	Add @amount to the counter of @stat (1 for events, ns for times).
 *   bool plat_cpu_above_min(nest_env_t env, s32 cpu);
 *	Did @cpu run above its minimum frequency at its last tick? (S_move
 *	only; a host that cannot tell answers true.)
 *   u32 plat_llc_queued(nest_env_t env, u32 llc);
 *   bool plat_queue_head(nest_env_t env, s32 queue, u64 *vtime);
 *	The host's run queues, for the scheduler around the placement: see
 *	nest_sched.c.
 *   bool plat_is_fork(nest_env_t env);
 *	Is the task being placed a new one (fork), whose previous CPU is
 *	its parent's rather than its own?
 *   bool plat_cpu_idle(nest_env_t env, s32 cpu);
 *	Is @cpu idle now? A CPU claimed for a task is not. The call
 *	claims nothing. (Impatience: did the task find its previous CPU
 *	busy? Compaction: is a CPU with an old idle_since still idle?)
 *   bool plat_any_idle(nest_env_t env);
 *	Is any CPU the task being placed may use idle now? Claims nothing;
 *	a host that cannot tell cheaply answers true.
 */
#ifndef __NEST_POLICY_H
#define __NEST_POLICY_H

/* Largest CPU count the policy supports (bitmaps are arrays of u64). */
#define NEST_MAX_CPUS 512
#define NEST_MASK_WORDS (NEST_MAX_CPUS / 64)
/* Largest number of last-level cache domains (one run queue each). */
#define NEST_MAX_LLCS 64
/* nest_task.vtime_llc of a task never queued nor run yet. */
#define NEST_LLC_NONE 0xffffffffU
/*
 * Queues of the scheduler around the placement (nest_sched.c): an LLC
 * index (>= 0), no queue, CPU c's queue of pinned tasks as
 * NEST_QUEUE_PINNED - c, or CPU c's front queue as NEST_QUEUE_FRONT - c.
 */
#define NEST_QUEUE_NONE (-1)
#define NEST_QUEUE_PINNED (-2)
#define NEST_QUEUE_FRONT (NEST_QUEUE_PINNED - NEST_MAX_CPUS)
/*
 * How a task that a woken task preempted resumes (nest_woken_preempts()):
 * queued as any other task, on its CPU's local queue right after a pinned
 * task, or in its CPU's front queue.
 */
#define NEST_RESUME_QUEUED 0
#define NEST_RESUME_LOCAL 1
#define NEST_RESUME_FRONT 2
/* Weight of a nice-0 task in sched_ext's scale (p->scx.weight). */
#define NEST_WEIGHT_DFL 100
/*
 * Starvation guard (nest_sched.c): how long a queued task may wait before
 * it runs next (nest_starving()), and how often a host looks through a
 * queue for one (nest_starve_sweep_due()). In this header: scx_nest
 * refuses a watchdog timeout a starving task could outlast.
 */
#define NEST_STARVE_NS (1000ULL * 1000 * 1000)
#define NEST_STARVE_SWEEP_NS (100ULL * 1000 * 1000)

/*
 * Mechanisms that can be switched off for ablation studies. A set bit in
 * nest_config.disabled turns the mechanism off.
 */
enum nest_mechanism {
	/* An attached task first tries its attached CPU. */
	NEST_MECH_ATTACH = 1 << 0,
	/* The reserve nest exists (off: fallback CPUs join the primary). */
	NEST_MECH_RESERVE = 1 << 1,
	/* Tasks that keep finding their previous CPU busy become impatient. */
	NEST_MECH_IMPATIENCE = 1 << 2,
	/* Primary CPUs idle longer than P_remove are demoted. */
	NEST_MECH_COMPACTION = 1 << 3,
	/* The CPU of an exiting task leaves the primary nest at once. */
	NEST_MECH_EXIT_DEMOTION = 1 << 4,
	/* Fallback searches every socket before giving up. */
	NEST_MECH_WIDE_FALLBACK = 1 << 5,
	/* Idle primary CPUs keep executing for up to S_max to stay warm. */
	NEST_MECH_WARM_SPIN = 1 << 6,
	/*
	 * Not in the published design: while the default placement can still
	 * find a whole idle core, the nests only offer CPUs whose SMT sibling
	 * is idle (see nest_policy.c, "Whole cores first").
	 */
	NEST_MECH_WHOLE_CORES = 1 << 7,
	/*
	 * Not in the published design: a fork first takes the CPU the last
	 * task to exit in its parent's LLC left, while it is idle and warm
	 * (see nest_policy.c, "Fork reuse").
	 */
	NEST_MECH_FORK_REUSE = 1 << 8,
	/*
	 * Not in the published design: a woken task takes back its previous
	 * CPU if it is idle and was used within P_remove, even from outside
	 * the primary nest (see nest_policy.c, "Warm previous CPU").
	 */
	NEST_MECH_WARM_PREV = 1 << 9,
	/*
	 * Not in the published design: while an attached task sleeps, other
	 * placements take its CPU only when the nests have no other idle CPU
	 * (see nest_policy.c, "Kept CPU").
	 */
	NEST_MECH_KEEP_ATTACHED = 1 << 10,
};

/* What only the host knows about a task (struct nest_task's traits). */
enum nest_task_trait {
	/* A kernel thread. */
	NEST_TASK_KTHREAD = 1 << 0,
	/* Allowed on one CPU only, for now. */
	NEST_TASK_PINNED = 1 << 1,
};

/*
 * How a placement was decided, and other countable policy events: the one
 * definition of the policy's statistics. Each entry is
 * X(NAME, group, "description"): NAME gives NEST_STAT_NAME in enum
 * nest_stat below and the statistic's name, lower-cased, in scx_nest's
 * --stats, --monitor and --help-stats and in nest_policy::Stat (both
 * generated from this list at build time); group is the line of the
 * monitor it is printed on.
 */
#define NEST_STATS(X)							\
	/* Placement outcomes: exactly one per nest_select_cpu() call. */ \
	X(ATTACHED, place, "Placements on the task's attached CPU")	\
	X(PREV, place, "Placements on the previous CPU, found in the primary nest") \
	X(PRIMARY, place, "Placements on another idle primary CPU")	\
	X(RESERVE, place, "Placements on an idle reserve CPU (promoted)") \
	X(FORK_REUSE, place, "Forks placed on the CPU an exiting task just left") \
	X(WARM_PREV, place, "Placements on the previous CPU taken back from outside the primary nest (promoted)") \
	X(FALLBACK, place, "Placements by the default idle-CPU selection") \
	X(FALLBACK_WIDE, place, "Placements on an idle CPU found on any socket") \
	X(NO_IDLE, place, "Placements that found no idle CPU (task queued)") \
	/* Nest membership changes. */					\
	X(PROMOTED, nest, "Reserve CPUs promoted to the primary nest")	\
	X(JOINED_RESERVE, nest, "Fallback CPUs that joined the reserve nest") \
	X(JOINED_PRIMARY, nest, "Fallback CPUs that joined the primary nest directly") \
	X(COMPACTED, nest, "Primary CPUs demoted after idling longer than P_remove") \
	X(EXIT_DEMOTED, nest, "Primary CPUs demoted when their task exited") \
	X(RESERVE_FULL, nest, "CPUs that could not join the full reserve") \
	/* Primary scans that met a CPU idle longer than P_remove. */	\
	X(STALE_SPARED, nest, "Primary CPUs idle longer than P_remove that a scan passed over without demoting them (the whole-core pass had passed a CPU the published scan would take)") \
	X(STALE_CLAIMED, nest, "Primary CPUs idle longer than P_remove that a scan passed over as no longer idle (claimed, their task not yet running)") \
	/* Also counted as one of the outcomes above. */		\
	X(IMPATIENT, place, "Placements of impatient tasks")		\
	X(KEPT_SPARED, place, "Placements that passed over a CPU kept for its sleeping task and found another") \
	X(KEPT_TAKEN, place, "Placements that took a CPU kept for its sleeping task, for lack of another") \
	/* Warm spinning. */						\
	X(SPIN_STARTED, spin, "Idle primary CPUs that started warm spinning") \
	X(SPIN_WORK, spin, "Warm spins ended by a task arriving")	\
	X(SPIN_EXPIRED, spin, "Warm spins that lasted S_max")		\
	X(SPIN_SIBLING, spin, "Warm spins ended because the SMT sibling ran a task") \
	X(SPIN_DEMOTED, spin, "Warm spins ended because the CPU left the primary nest") \
	X(SPIN_OFFLINE, spin, "Warm spins not started, or ended, because the CPU is going offline") \
	X(SPIN_NS, spin, "Time spent warm spinning (ns)")		\
	/* S_local and S_move (smove_policy.c). */			\
	X(LOCAL, smove, "S_local/S_move: placements on the waker's CPU") \
	X(DEFAULT, smove, "S_move: placements on the default CPU")	\
	X(FREQ_ABOVE_MIN, smove, "S_move: default CPU above its minimum frequency") \
	X(FREQ_AT_MIN, smove, "S_move: default CPU at its minimum frequency") \
	X(TIMER_ARMED, smove, "S_move: deferred moves asked for (timers armed)") \
	X(TIMER_FIRED, smove, "S_move: timers handled (nest_smove_timer)") \
	X(MIGRATED, smove, "S_move: tasks moved to the default CPU after the delay")

#define NEST_STAT_ENUMERATOR(name, group, description) NEST_STAT_##name,
enum nest_stat {
	NEST_STATS(NEST_STAT_ENUMERATOR)
	NEST_NR_STATS,
};

/*
 * Frequency requests (nest_perf.c): what scx_bpf_cpuperf_set() is asked
 * for. NEST_PERF_ONE is SCX_CPUPERF_ONE, the maximum performance level.
 */
#define NEST_PERF_ONE 1024

enum nest_perf_mode {
	/* No requests: the kernel's default (every CPU at NEST_PERF_ONE). */
	NEST_PERF_MAX = 0,
	/* Each CPU asks for its utilisation (schedutil's input). */
	NEST_PERF_UTIL = 1,
	/* As UTIL, but primary-nest CPUs ask for at least perf_floor. */
	NEST_PERF_NEST = 2,
};

/*
 * A PELT-like utilisation signal (nest_perf.c): a geometric average over
 * 1 ms periods with a 32 ms half-life of the share of each period spent
 * running, scaled by the frequency it ran at.
 */
struct nest_pelt {
	/* Start of the current, unfinished period, ns. */
	u64 period_start;
	/* Last update, ns; 0: never updated. */
	u64 last;
	/* Frequency-scaled running time in the current period so far, ns. */
	u32 run;
	/* Average up to period_start; NEST_PELT_ONE: always running at max. */
	u32 avg;
};

/* Per-CPU frequency-request state; only the CPU itself updates util. */
struct nest_perf_cpu {
	/*
	 * Utilisation of what runs or ran here: tasks that sleep leave theirs
	 * (blocked utilisation, decaying in place) until they run elsewhere
	 * or exit (kernel: the cfs_rq's util_avg).
	 */
	struct nest_pelt util;
	/*
	 * Utilisation of tasks that left for another CPU, added atomically by
	 * that CPU and subtracted here at the next update (kernel: the
	 * cfs_rq's removed.util_avg). Same scale as util.avg.
	 */
	u32 removed;
	/* A task runs here (between nest_perf_running() and _stopping()). */
	u32 running;
	/* The last request made for this CPU (0..NEST_PERF_ONE). */
	u32 target;
	/* Number of requests made for this CPU. */
	u32 nr_requests;
};

/* Per-task frequency-request state. */
struct nest_perf_task {
	/* The task's own utilisation. */
	struct nest_pelt util;
	/* The CPU whose utilisation includes the task's (when attached). */
	s32 cpu;
	/* The task's utilisation is part of cpu's (kernel: attached). */
	u32 attached;
};

/* Start-up configuration; constant while the policy runs. */
struct nest_config {
	/* Idle time after which a primary CPU is demoted (P_remove). */
	u64 p_remove_ns;
	/* Longest warm spin of an idle primary CPU (S_max). */
	u64 s_max_ns;
	/* S_move: how long a task may wait on the waker's CPU (D). */
	u64 smove_delay_ns;
	/* Capacity of the reserve nest (R_max). */
	u32 r_max;
	/* Busy previous CPUs before a task is impatient (R_impatient). */
	u32 r_impatient;
	/* Number of possible CPUs (<= NEST_MAX_CPUS). */
	u32 nr_cpus;
	/* Fixed CPU where reserve searches start: where Nest was started. */
	s32 reserve_start;
	/* Bitmask of switched-off mechanisms (enum nest_mechanism). */
	u32 disabled;
	/* Last-level cache domain of each CPU. */
	u32 cpu_llc[NEST_MAX_CPUS];
	/* SMT sibling of each CPU, or -1. */
	s32 cpu_sibling[NEST_MAX_CPUS];
	/*
	 * The scheduler around the placement (nest_sched.c). cpu_llc holds
	 * dense indexes 0 .. nr_llcs - 1.
	 */
	/* Time slice while no task waits in the CPU's LLC queue. */
	u64 slice_ns;
	/* Shortest slice, however many tasks wait. */
	u64 slice_min_ns;
	/* Number of LLC queues. */
	u32 nr_llcs;
	/* Number of CPUs of each LLC. */
	u32 llc_nr_cpus[NEST_MAX_LLCS];
	/*
	 * For each LLC, every LLC in the order its CPUs look at their
	 * queues: itself first, then the LLCs of the same NUMA node, then
	 * the others.
	 */
	u32 llc_order[NEST_MAX_LLCS][NEST_MAX_LLCS];
	/* Frequency requests: enum nest_perf_mode. */
	u32 perf_mode;
	/* NEST_PERF_NEST: the least request of a primary-nest CPU. */
	u32 perf_floor;
};

/* Per-CPU policy state, read and written from every CPU. */
struct nest_cpu {
	/* When the CPU last went idle; 0 while it runs a task. */
	u64 idle_since;
	/* While warm spinning: when the spin must end (0: not spinning). */
	u64 spin_until;
	/* The task that last ran here is exiting. */
	u32 task_exited;
	/*
	 * A task runs here, or a placement claimed the CPU for one: from the
	 * claim or nest_task_running() until nest_cpu_idle().
	 */
	u32 running;
	/* The CPU is offline: in no nest, never claimed (CPU hotplug). */
	u32 offline;
	/* Ticks in a row at which the SMT sibling was busy too. */
	u32 paired_ticks;
	/*
	 * The task running here, for wakeup preemption (nest_sched.c): its
	 * virtual time when it started, when it started, how long it had
	 * run since it last woke up, and its weight (0: no task of ours
	 * runs here).
	 */
	u64 curr_vtime;
	u64 curr_started;
	u64 curr_ran_since_wake;
	u32 curr_weight;
	/*
	 * How the task running here, preempted by a woken task, resumes
	 * (NEST_RESUME_*, nest_woken_preempts()). Cleared when the next
	 * task starts.
	 */
	u32 resume;
	/*
	 * When the CPU's pinned queue, and its front queue, are next swept
	 * for starving tasks.
	 */
	u64 starve_sweep_at;
	u64 front_sweep_at;
	/*
	 * Kept CPU: when the attached task that keeps this CPU went to sleep
	 * here (0: kept for no task).
	 */
	u64 kept_since;
	/* How many tasks wait in its front and pinned queues (as llc_queued). */
	s32 front_queued;
	s32 pinned_queued;
};

/* The last CPU of an LLC that went idle after its task exited. */
struct nest_exit {
	/* When it went idle (its nest_cpu.idle_since then; 0: none yet). */
	u64 idle_since;
	s32 cpu;
	u32 __pad;
};

/* The nests; global to the policy and updated with atomic operations. */
struct nest_state {
	u64 primary[NEST_MASK_WORDS];
	u64 reserve[NEST_MASK_WORDS];
	/* Number of CPUs in the reserve nest (kept <= r_max). */
	s32 nr_reserve;
	u32 __pad;
	struct nest_cpu cpus[NEST_MAX_CPUS];
	/* Fork reuse: each LLC's last CPU left by an exiting task. */
	struct nest_exit last_exit[NEST_MAX_LLCS];
	/*
	 * Each LLC queue's virtual time: the largest virtual time of a task
	 * that started running on one of its CPUs.
	 */
	u64 llc_vtime[NEST_MAX_LLCS];
	/* When each LLC queue is next swept for starving tasks. */
	u64 starve_sweep_at[NEST_MAX_LLCS];
	/*
	 * How many tasks wait in the front queues of each LLC's CPUs, and in
	 * each LLC's queue (nest_task_queued()), so that a CPU out of work
	 * looks into a queue only when there is something to find.
	 */
	s32 llc_fronts[NEST_MAX_LLCS];
	s32 llc_queued[NEST_MAX_LLCS];
	/* Frequency requests (nest_perf.c). */
	struct nest_perf_cpu perf[NEST_MAX_CPUS];
};

/* Per-task policy state. */
struct nest_task {
	/* The last two CPUs the task ran on, most recent first (-1: none). */
	s32 recent_cpu[2];
	/*
	 * Placements in a row that found the previous CPU busy (impatience;
	 * see nest_select_cpu()).
	 */
	u32 prev_misses;
	/* S_move: where to move the task if it has not run by move_at (-1). */
	s32 move_to;
	u64 move_at;
	/*
	 * Weighted virtual time (nest_sched.c), relative to the virtual
	 * time of LLC queue vtime_llc.
	 */
	u64 vtime;
	/* When the task last started running. */
	u64 run_start;
	/*
	 * How long it has run since it last woke up (a CPU hog has run a
	 * slice or more: nest_wakeup_preempts()).
	 */
	u64 run_since_wake;
	u32 vtime_llc;
	/* The queue the task waits in (NEST_QUEUE_NONE: none), as counted. */
	s32 queue;
	/* Kept CPU: the CPU kept for this task while it sleeps (-1: none). */
	s32 kept_cpu;
	/*
	 * enum nest_task_trait bits, refreshed by the host before it reports
	 * the task's sleep.
	 */
	u32 traits;
	/* Kept CPU: kept_cpu's nest_cpu.kept_since when this task set it. */
	u64 kept_at;
	/* Frequency requests (nest_perf.c); all zero for a new task. */
	struct nest_perf_task perf;
};

/* The outcome of one placement. */
struct nest_choice {
	/* CPU to run on (prev_cpu when nothing idle was found). */
	s32 cpu;
	/* The CPU was idle and has been claimed for this task. */
	u32 idle;
	/* How it was decided: one of the placement enum nest_stat values. */
	u32 how;
	/*
	 * S_move: the host arms a timer of defer_ns; when it fires it calls
	 * nest_smove_timer(), which says whether to move the task to
	 * defer_cpu. -1: no timer.
	 */
	s32 defer_cpu;
	u64 defer_ns;
};

#endif /* __NEST_POLICY_H */
