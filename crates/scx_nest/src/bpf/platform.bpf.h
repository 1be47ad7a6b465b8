/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BPF host of the Nest policy: the platform interface of
 * policy/nest_policy.h implemented with sched_ext kfuncs, and the per-CPU
 * counters.
 */
#ifndef __NEST_PLATFORM_BPF_H
#define __NEST_PLATFORM_BPF_H

/* What one placement needs to know about the task being placed. */
struct nest_bpf_env {
	struct task_struct *p;
	u64 wake_flags;
};

typedef struct nest_bpf_env *nest_env_t;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct nest_counters);
} counters SEC(".maps");

static struct nest_counters *this_cpu_counters(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static void count_event(enum scx_nest_event ev, u64 amount)
{
	struct nest_counters *c = this_cpu_counters();

	if (c && ev < NEST_NR_EVENTS)
		c->events[ev] += amount;
}

/*
 * Add @amount to policy statistic @stat. A global function, verified once:
 * inlined at each of the policy's counting sites, its map key and spills
 * put the deepest call chain (through the scan's visit) over BPF's 512
 * bytes of stack.
 */
__noinline int count_policy_stat(u32 stat, u64 amount)
{
	struct nest_counters *c = this_cpu_counters();

	if (c && stat < NEST_NR_STATS)
		c->policy[stat] += amount;
	return 0;
}

static void plat_count(nest_env_t env, enum nest_stat stat, u64 amount)
{
	count_policy_stat(stat, amount);
}

#ifndef TASK_DEAD
#define TASK_DEAD 0x00000080 /* include/linux/sched.h; a macro, not in BTF */
#endif

/*
 * Is @p, in ops.stopping(), stopping for the last time? do_task_dead() sets
 * TASK_DEAD just before the task's final __schedule(). PF_EXITING comes
 * much earlier, at the start of do_exit(), and an exiting task may still
 * sleep and run again several times: closing files on virtio-fs, FUSE or
 * NFS waits for the server's reply (kernel: finish_task_switch() calls
 * task_dead_fair() only for TASK_DEAD). In a 2x4x2 guest running a
 * configure script, 2661 of 4298 exiting tasks slept 12514 times after
 * sched_process_exit, for 0.24 ms at the median.
 */
static bool task_dead(const struct task_struct *p)
{
	return READ_ONCE(p->__state) == TASK_DEAD;
}

static bool plat_claim_idle(nest_env_t env, s32 cpu)
{
	return scx_bpf_test_and_clear_cpu_idle(cpu);
}

static bool plat_task_allowed(nest_env_t env, s32 cpu)
{
	return env->p && bpf_cpumask_test_cpu(cpu, env->p->cpus_ptr);
}

/*
 * The wake flags the kernel's default placement gets: without SCX_WAKE_SYNC.
 *
 * For a WAKE_SYNC wakeup, scx_select_cpu_dfl() (kernel/sched/ext_idle.c;
 * ext.c before 6.15) returns the waker's CPU, smp_processor_id(), whenever
 * that CPU's local DSQ is empty and some CPU is idle, without claiming it:
 * scx_bpf_select_cpu_dfl() then reports it as idle (*is_idle = true), and
 * scx_bpf_select_cpu_and() returns it even with SCX_PICK_IDLE_CORE. The
 * waker is running, so the wakee would be inserted behind it while idle
 * CPUs, primary ones included, wait. Without the flag every CPU returned
 * was taken with scx_idle_test_and_clear_cpu(): really idle, and ours. The
 * only other use of the flag there, keeping an idle prev_cpu that shares
 * the waker's LLC, is covered by the later "prev_cpu if idle" steps and by
 * the nest scans, which start at prev_cpu.
 */
static u64 default_wake_flags(nest_env_t env)
{
	return env->wake_flags & ~(u64)SCX_WAKE_SYNC;
}

/*
 * The kernel's default placement restricted to whole idle cores: prev's
 * core, then prev's LLC, node, anywhere (kernels >= 6.16); before that, any
 * whole idle core.
 */
static s32 default_whole_core(nest_env_t env, s32 prev_cpu)
{
	struct task_struct *p = env->p;

	if (__COMPAT_HAS_scx_bpf_select_cpu_and)
		return scx_bpf_select_cpu_and(p, prev_cpu,
					      default_wake_flags(env),
					      p->cpus_ptr, SCX_PICK_IDLE_CORE);
	return scx_bpf_pick_idle_cpu(p->cpus_ptr, SCX_PICK_IDLE_CORE);
}

static s32 plat_default_cpu(nest_env_t env, s32 prev_cpu, bool whole_core,
			    bool *idle)
{
	bool is_idle = false;
	s32 cpu;

	if (!env->p)
		return prev_cpu;
	if (whole_core) {
		cpu = default_whole_core(env, prev_cpu);
		*idle = cpu >= 0;
		return cpu >= 0 ? cpu : prev_cpu;
	}
	cpu = scx_bpf_select_cpu_dfl(env->p, prev_cpu, default_wake_flags(env),
				     &is_idle);
	*idle = is_idle;
	return cpu;
}

/*
 * S_move's frequency test. Per CPU, the highest scx_bpf_cpuperf_cur() value
 * (the performance level seen at the last tick, SCX_CPUPERF_ONE = maximum)
 * that still counts as the minimum frequency; 0: unknown, so the CPU counts
 * as above its minimum. Filled in by user space from cpufreq.
 */
u32 min_perf[NEST_MAX_CPUS];

static bool plat_cpu_above_min(nest_env_t env, s32 cpu)
{
	u32 min;

	if (cpu < 0 || cpu >= NEST_MAX_CPUS)
		return true;
	min = min_perf[cpu & (NEST_MAX_CPUS - 1)];
	return !min || scx_bpf_cpuperf_cur(cpu) > min;
}

/* The scheduler's run queues (policy/nest_sched.c). */
static u32 plat_llc_queued(nest_env_t env, u32 llc)
{
	s32 nr = scx_bpf_dsq_nr_queued(LLC_DSQ_BASE + llc);

	return nr > 0 ? nr : 0;
}

static u64 queue_dsq(s32 queue)
{
	if (queue >= 0)
		return LLC_DSQ_BASE + queue;
	if (queue > NEST_QUEUE_FRONT)
		return PINNED_DSQ_BASE + (NEST_QUEUE_PINNED - queue);
	return FRONT_DSQ_BASE + (NEST_QUEUE_FRONT - queue);
}

/*
 * The virtual time of the first task of @queue. The policy asks at nearly
 * every switch, on queues that all the CPUs of an LLC share: the peek is
 * lockless where the kernel has it (7.1 on, __COMPAT_scx_bpf_dsq_peek());
 * before, it is an iterator's first step, which takes the queue's lock.
 */
static bool plat_queue_head(nest_env_t env, s32 queue, u64 *vtime)
{
	struct task_struct *p = __COMPAT_scx_bpf_dsq_peek(queue_dsq(queue));

	if (!p)
		return false;
	*vtime = p->scx.dsq_vtime;
	return true;
}

/* SCX_WAKE_FORK: ops.select_cpu() of a new task, prev_cpu its parent's. */
static bool plat_is_fork(nest_env_t env)
{
	return env->wake_flags & SCX_WAKE_FORK;
}

/*
 * Is @cpu in the kernel's idle mask? A global function, verified once:
 * inlined into the policy's scan visit (scan_visit()) it made the
 * deepest call chain's stack 528 bytes, over BPF's 512.
 */
__noinline int cpu_in_idle_mask(s32 cpu)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	int ret = cpu >= 0 && bpf_cpumask_test_cpu(cpu, idle);

	scx_bpf_put_idle_cpumask(idle);
	return ret;
}

static bool plat_cpu_idle(nest_env_t env, s32 cpu)
{
	return cpu_in_idle_mask(cpu);
}

static bool plat_any_idle(nest_env_t env)
{
	const struct cpumask *idle;
	bool any;

	if (!env->p)
		return true;
	idle = scx_bpf_get_idle_cpumask();
	any = bpf_cpumask_intersects(idle, env->p->cpus_ptr);
	scx_bpf_put_idle_cpumask(idle);
	return any;
}

static s32 plat_pick_any_idle(nest_env_t env)
{
	if (!env->p)
		return -1;
	return scx_bpf_pick_idle_cpu(env->p->cpus_ptr, 0);
}

/*
 * The policy's nest scan and its visit of each CPU, routed through global
 * functions (scan_nest_verified_once() and scan_visit_verified_once() in
 * main.bpf.c). The verifier checks a static function at each call site
 * and, in a loop, in each iteration it cannot prove equivalent to one
 * already seen; a global function it checks once, for any arguments. With
 * the scan inlined at its eight call sites, ops.select_cpu() took 383,574
 * instructions to verify and ops.enqueue() 112,155: 60 of the 70 seconds
 * scx_nest took to load in an emulated guest, and a third of the way to
 * the verifier's limit of a million. Through the two functions: 20,719
 * and 14,658, and 6.5 s to load (docs/scheduler.md). A global function
 * takes at most five arguments, none of them a pointer read from memory,
 * so the task travels alone and the scalars in a struct.
 */
struct nest_call_args {
	u64 now;
	u64 wake_flags;
	/* enum nest_set, for scan_nest(). */
	s32 set;
	/* scan_nest(): where the scan starts; scan_visit(): the CPU. */
	s32 cpu;
	u32 llc;
	u32 flags;
};

s32 scan_nest_verified_once(struct task_struct *p, struct nest_call_args *args);
s32 scan_visit_verified_once(struct task_struct *p, struct nest_call_args *args,
			     bool *compact);

#define NEST_CALL_ARGS(ctx_, ...)					\
	(&(struct nest_call_args){					\
		.now = (ctx_)->now,					\
		.wake_flags = (ctx_)->env->wake_flags,			\
		__VA_ARGS__						\
	})

#define NEST_SCAN(ctx_, set_, start_, llc_, flags_)			\
	scan_nest_verified_once((ctx_)->env->p,				\
		NEST_CALL_ARGS(ctx_, .set = (set_), .cpu = (start_),	\
			       .llc = (llc_), .flags = (flags_)))

#define NEST_SCAN_VISIT(ctx_, cpu_, flags_, compact_)			\
	scan_visit_verified_once((ctx_)->env->p,			\
		NEST_CALL_ARGS(ctx_, .cpu = (cpu_), .flags = (flags_)),	\
		(compact_))

#endif /* __NEST_PLATFORM_BPF_H */
