/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_nest: Nest (EuroSys 2022) as a sched_ext scheduler.
 *
 * Design
 * ------
 * Placement is the whole of Nest: every fork and wakeup goes through
 * ops.select_cpu(), which runs the shared policy (policy/nest_policy.c, the
 * same code the simulator and the host tests run). When the policy claims
 * an idle CPU, the task is inserted straight into that CPU's local queue.
 *
 * Around the placement, scx_nest is a fair scheduler (policy/nest_sched.c
 * decides, this file keeps the queues): a task that found no idle CPU
 * waits in its previous CPU's LLC queue (LLC_DSQ_BASE + llc), ordered by
 * weighted virtual time; a task that may run on one CPU only waits in that
 * CPU's own queue (PINNED_DSQ_BASE + cpu). A CPU out of work asks the
 * policy which queue to take from (ops.dispatch()): its own, a task that
 * last ran here first, then the nearest LLC's. A woken task may preempt
 * the task running on its previous CPU; idle CPUs are kicked when tasks
 * wait (at queueing and at ticks), so no CPU stays idle while a task it may
 * run waits (work conservation).
 *
 * Partial mode (--partial): a CPU taken by a fair or real-time task is busy
 * for the policy (ops.cpu_release(), and ops.update_idle() when it leaves
 * idle), and the tasks waiting on its local queue are re-enqueued.
 *
 * The policy learns what happens on the CPUs through three callbacks:
 * ops.running() (the task's recent CPUs; the CPU is busy), ops.update_idle()
 * (the CPU went idle: compaction age, immediate demotion after an exit,
 * warm spinning) and ops.stopping() of a dead task (its final switch,
 * task_dead()); and about CPU hotplug through ops.cpu_online() and
 * ops.cpu_offline() (an offline CPU leaves both nests, which also ends its
 * warm spin).
 *
 * Warm spinning: sched_ext has no hook in the idle loop, so an idle primary
 * CPU keeps warm by kicking itself: each kick sends it back through the
 * scheduler, whose ops.dispatch() either finds work or, while the policy
 * says so (up to S_max, sibling idle, still in the primary nest), kicks
 * again. The CPU never enters a low-power idle state meanwhile, yet stays
 * claimable, so arriving work does not wait for the spin to end. The kernel's built-in idle tracking is kept
 * (SCX_OPS_KEEP_BUILTIN_IDLE): the policy claims CPUs with
 * scx_bpf_test_and_clear_cpu_idle(), which is atomic, so two placements can
 * never take the same idle CPU.
 *
 * Tasks restricted to one CPU skip ops.select_cpu(); ops.enqueue() puts
 * them into that CPU's own queue.
 *
 * Frequency requests (--perf, perf.bpf.h and policy/nest_perf.c): for every
 * policy, ops.init(), ops.running(), ops.stopping() and ops.tick() keep a
 * PELT-like utilisation per task and per CPU and ask schedutil, through
 * scx_bpf_cpuperf_set(), for each CPU's utilisation (with a floor for
 * primary-nest CPUs in the nest mode) instead of the kernel's default,
 * full speed everywhere.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "platform.bpf.h"
#include "nest_policy.c"
#include "nest_sched.c"
#include "smove_policy.c"
#include "nest_perf.c"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/*
 * ops.init() failed: say what failed and return @err. The exit info (which
 * scx_nest prints) and the kernel's log keep the first error reported, so
 * the user reads this message rather than the kernel's bare errno.
 */
#define init_fail(err, fmt, args...)					\
	({ scx_bpf_error(fmt, ##args); (err); })

/*
 * Policy configuration, filled in by user space before loading. Not in
 * .rodata: the policy reads it through a plain const pointer, and a
 * zero-initialised const object read that way may be folded to zeros by
 * the compiler.
 */
struct nest_config nest_cfg;
/* enum scx_nest_policy. */
const volatile u32 policy_kind = POLICY_NEST;
/* Only SCHED_EXT tasks are ours (--partial). */
const volatile bool switch_partial;
/*
 * Test-only: tasks whose comm equals this are never run, so that the
 * kernel's watchdog ejects the scheduler (negative control of the tests).
 */
const volatile char stall_comm[COMM_LEN];

/* The nests. Read by user space for statistics. */
struct nest_state nest_state;
/* The CPUs whose LLC, core and socket user space read at load (online then). */
const volatile bool cpu_in_topology[NEST_MAX_CPUS];

/*
 * --trace-nests: each change of a CPU's nest is written to the trace
 * (bpf_printk(), tracepoint bpf_trace:bpf_trace_printk) as
 * "nest cpu=C in=N" (N: 0 none, 1 reserve, 2 primary), for `nest trace
 * record`. Every NEST_SYNC_NS, the whole nests are written, one line per
 * mask word, "nest sync word=W primary=HEX reserve=HEX", so that a
 * recording started meanwhile knows them from its first sync on, and a
 * change whose line was lost or overtaken (two CPUs reporting at once)
 * is put right within NEST_SYNC_NS.
 */
const volatile bool trace_nests;
/*
 * --trace-placements: each placement the policy decides in select_cpu is
 * written to the trace as "place pid=P cpu=C how=H" (H: the policy's
 * enum nest_stat value saying which step decided, NEST_STAT_NO_IDLE when
 * the task is queued), for `nest trace record`.
 */
const volatile bool trace_placements;
/*
 * Short, as a recording's first events come right after it starts; a sync
 * costs one line per 64 CPUs.
 */
#define NEST_SYNC_NS (10 * 1000 * 1000ULL)
/* The nests as last reported, and when they were last reported in full. */
u64 reported_primary[NEST_MASK_WORDS];
u64 reported_reserve[NEST_MASK_WORDS];
u64 nests_synced_at;

/*
 * Report the CPUs of mask word @w whose nest changed since the last report.
 * The exchange makes each change reported by exactly one caller, with the
 * nests that caller installed as reported; plain reads first, so that the
 * common call, with nothing changed, writes nothing.
 */
static void report_nest_word(u32 w)
{
	u64 primary = READ_ONCE(nest_state.primary[w]);
	u64 reserve = READ_ONCE(nest_state.reserve[w]);
	u64 changed;
	u32 bit;

	if (READ_ONCE(reported_primary[w]) == primary &&
	    READ_ONCE(reported_reserve[w]) == reserve)
		return;
	changed = (__sync_lock_test_and_set(&reported_primary[w], primary) ^ primary) |
		  (__sync_lock_test_and_set(&reported_reserve[w], reserve) ^ reserve);
	if (!changed)
		return;
	bpf_for(bit, 0, 64) {
		u64 mask = 1ULL << bit;

		if (changed & mask)
			bpf_printk("nest cpu=%u in=%u", w * 64 + bit,
				   primary & mask ? 2 : reserve & mask ? 1 : 0);
	}
}

/*
 * Once every NEST_SYNC_NS (one caller wins the exchange), write the whole
 * nests and take them as reported. A function of its own, so that the
 * print's arguments are not in the frames of the callbacks on the deepest
 * call chain (BPF allows 512 bytes of stack for the whole chain).
 */
static __noinline void sync_nest_reports(u32 words)
{
	u64 now = scx_bpf_now();
	u64 last = READ_ONCE(nests_synced_at);
	u32 w;

	if (now - last < NEST_SYNC_NS ||
	    !__sync_bool_compare_and_swap(&nests_synced_at, last, now))
		return;
	bpf_for(w, 0, words) {
		u32 i = w & (NEST_MASK_WORDS - 1);
		u64 primary = READ_ONCE(nest_state.primary[i]);
		u64 reserve = READ_ONCE(nest_state.reserve[i]);

		WRITE_ONCE(reported_primary[i], primary);
		WRITE_ONCE(reported_reserve[i], reserve);
		bpf_printk("nest sync word=%u primary=%llx reserve=%llx", w,
			   primary, reserve);
	}
}

/* Called after every policy call that may change the nests. */
static void report_nest_changes(void)
{
	u32 words = (nest_cfg.nr_cpus + 63) / 64;
	u32 w;

	if (!trace_nests)
		return;
	sync_nest_reports(words);
	for (w = 0; w < NEST_MASK_WORDS && w < words; w++)
		report_nest_word(w);
}

/* What a policy call made at time @now about @env works with. */
static struct nest_ctx policy_ctx_at(struct nest_bpf_env *env, u64 now)
{
	struct nest_ctx ctx = {
		.st = &nest_state,
		.cfg = &nest_cfg,
		.env = env,
		.now = now,
	};

	return ctx;
}

static struct nest_ctx policy_ctx(struct nest_bpf_env *env)
{
	return policy_ctx_at(env, scx_bpf_now());
}

/*
 * The global functions behind NEST_SCAN and NEST_SCAN_VISIT
 * (platform.bpf.h): the policy's state is rebuilt from the arguments.
 */
__noinline s32 scan_nest_verified_once(struct task_struct *p __arg_trusted __arg_nullable,
				       struct nest_call_args *args)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx ctx;

	if (!args)
		return -1;
	env.wake_flags = args->wake_flags;
	ctx = policy_ctx_at(&env, args->now);
	return scan_nest(&ctx, args->set, args->cpu, args->llc, args->flags);
}

__noinline s32 scan_visit_verified_once(struct task_struct *p __arg_trusted __arg_nullable,
					struct nest_call_args *args, bool *compact)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx ctx;

	if (!args || !compact)
		return -1;
	env.wake_flags = args->wake_flags;
	ctx = policy_ctx_at(&env, args->now);
	return scan_visit(&ctx, args->cpu, args->flags, compact);
}

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static struct task_ctx *lookup_task(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

/*
 * Cgroup weights
 * --------------
 * A task of a cgroup other than the root runs with its share of the
 * cgroup's cpu.weight (nest_task_weight()). Each cgroup keeps its weight
 * (ops.cgroup_init(), ops.cgroup_set_weight()) and the weight of its
 * runnable tasks (ops.runnable(), ops.quiescent(), ops.cgroup_move()).
 * scx_bpf_task_cgroup() may only be asked about the task an op is called
 * for, so ops.dispatch() uses the weight saved in the task's context.
 */
struct cgrp_ctx {
	/* Sum of p->scx.weight of its runnable tasks. */
	u64 runnable;
	/* cpu.weight. */
	u32 weight;
	u32 __pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cgrp_ctx);
} cgrp_ctxs SEC(".maps");

/* The context of @cgrp; NULL for the root cgroup, whose tasks stand alone. */
static struct cgrp_ctx *cgrp_ctx_of(struct cgroup *cgrp)
{
	if (!cgrp || !cgrp->level)
		return NULL;
	return bpf_cgrp_storage_get(&cgrp_ctxs, cgrp, 0, 0);
}

/* The context of @p's cgroup; only for the task the op is called for. */
static struct cgrp_ctx *task_cgrp_ctx(struct task_struct *p)
{
	struct cgroup *cgrp = scx_bpf_task_cgroup(p);
	struct cgrp_ctx *c;

	if (!cgrp)
		return NULL;
	c = cgrp_ctx_of(cgrp);
	bpf_cgroup_release(cgrp);
	return c;
}

/* Save and return the weight @p, of cgroup context @c, runs with. */
static u32 save_weight(struct task_struct *p, struct task_ctx *t,
		       struct cgrp_ctx *c)
{
	t->weight = c ? nest_task_weight(p->scx.weight, READ_ONCE(c->weight),
					 READ_ONCE(c->runnable)) :
			p->scx.weight;
	return t->weight;
}

/*
 * Save and return the weight @p runs with; as task_cgrp_ctx(). A task of
 * the root cgroup (counted in none: cg_runnable 0) runs with its own
 * weight, with no cgroup lookup, which takes and drops a reference.
 */
static u32 refresh_weight(struct task_struct *p, struct task_ctx *t)
{
	return save_weight(p, t, t->cg_runnable ? task_cgrp_ctx(p) : NULL);
}

static void cgrp_add_runnable(struct cgrp_ctx *c, struct task_ctx *t,
			      u32 weight)
{
	if (c && weight) {
		t->cg_runnable = weight;
		__sync_fetch_and_add(&c->runnable, weight);
	}
}

static void cgrp_sub_runnable(struct cgrp_ctx *c, struct task_ctx *t)
{
	if (c && t->cg_runnable)
		__sync_fetch_and_sub(&c->runnable, t->cg_runnable);
	t->cg_runnable = 0;
}

static bool task_pinned(const struct task_struct *p);

/*
 * @p became runnable (woke up, or is new): count it in its cgroup, and
 * place its virtual time against the queue it would wait in
 * (nest_task_woken()), whether it gets an idle CPU or not.
 */
void BPF_STRUCT_OPS(nest_runnable, struct task_struct *p, u64 enq_flags)
{
	struct nest_bpf_env env = { .p = p };
	/* nest_task_woken() reads no clock: none read at every wake-up. */
	struct nest_ctx pctx = policy_ctx_at(&env, 0);
	struct task_ctx *t = lookup_task(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct cgrp_ctx *c;

	if (!t)
		return;
	c = task_cgrp_ctx(p);
	if (!t->cg_runnable)
		cgrp_add_runnable(c, t, p->scx.weight);
	nest_task_woken(&pctx, &t->nest,
			task_pinned(p) ? NEST_QUEUE_PINNED - cpu :
					 (s32)nest_queue_llc(&pctx, cpu),
			save_weight(p, t, c));
}

void BPF_STRUCT_OPS(nest_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *t = lookup_task(p);

	if (t && t->cg_runnable)
		cgrp_sub_runnable(task_cgrp_ctx(p), t);
}

void BPF_STRUCT_OPS(nest_cgroup_move, struct task_struct *p,
		    struct cgroup *from, struct cgroup *to)
{
	struct task_ctx *t = lookup_task(p);
	bool runnable;

	if (!t)
		return;
	runnable = t->cg_runnable || (p->scx.flags & SCX_TASK_QUEUED);
	cgrp_sub_runnable(cgrp_ctx_of(from), t);
	if (runnable)
		cgrp_add_runnable(cgrp_ctx_of(to), t, p->scx.weight);
}

s32 BPF_STRUCT_OPS(nest_cgroup_init, struct cgroup *cgrp,
		   struct scx_cgroup_init_args *args)
{
	struct cgrp_ctx *c;

	c = bpf_cgrp_storage_get(&cgrp_ctxs, cgrp, 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return -ENOMEM;
	c->weight = args->weight;
	return 0;
}

void BPF_STRUCT_OPS(nest_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	struct cgrp_ctx *c = bpf_cgrp_storage_get(&cgrp_ctxs, cgrp, 0, 0);

	if (c)
		WRITE_ONCE(c->weight, weight);
}

/*
 * The slice of a task about to run on @cpu (policy/nest_sched.c): from the
 * policy's counts, with no clock read.
 */
static u64 slice_on(s32 cpu)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx = policy_ctx_at(&env, 0);

	return nest_slice(&pctx, cpu);
}

/*
 * Every kick goes through here. scx_bpf_kick_cpu() queues an irq_work on
 * the calling CPU (kick_cpus_irq_work). A CPU going offline flushes its
 * irq_works (smpcfd_dying_cpu()), yet BPF code can still run on it after
 * (read in the kernel, not traced: its stopper, completing stop_machine(),
 * wakes a task); a kick queued then never runs, and its busy
 * flag makes disabling the scheduler spin for ever in irq_work_sync()
 * (free_kick_syncs(), 7.3). The hotplug VM test hung so, in state
 * "disabling" (every CPU's backtrace: irq_work_sync() spinning on an
 * idle CPU's work). From
 * ops.cpu_offline() to ops.cpu_online() the CPU kicks no one; the woken
 * task's CPU is still sent an IPI by the kernel's own wakeup path, and
 * queued work is taken at the next tick (nest_tick()).
 */
static void kick_cpu(s32 cpu, u64 flags)
{
	if (cpu_offline(&nest_state, bpf_get_smp_processor_id())) {
		count_event(NEST_EV_KICK_DROPPED, 1);
		return;
	}
	scx_bpf_kick_cpu(cpu, flags);
}
#include "perf.bpf.h"

static bool is_stall_target(const struct task_struct *p)
{
	int i;

	if (!stall_comm[0])
		return false;
	/* Unrolled: task_struct fields need constant offsets. */
#pragma unroll
	for (i = 0; i < COMM_LEN; i++) {
		if (p->comm[i] != stall_comm[i])
			return false;
		if (!stall_comm[i])
			break;
	}
	return true;
}

/*
 * S_local and S_move (policy/smove_policy.c)
 * ------------------------------------------
 * The waker is the task running on the CPU where ops.select_cpu() runs.
 * A task placed on a CPU is inserted straight into that CPU's local queue,
 * behind whatever runs there.
 *
 * S_move's deferred move: a task left on the waker's CPU w waits in w's
 * pending DSQ (PENDING_DSQ_BASE + w), which w consumes first in
 * ops.dispatch(), and w's timer is armed. A local DSQ cannot be iterated,
 * so a task there could not be moved; a user DSQ can be, and
 * scx_bpf_dsq_move() may be called from a BPF timer (no rq lock held).
 * When the timer fires it scans w's pending DSQ: each task whose delay has
 * passed is handed to nest_smove_timer() and moved to the local DSQ of the
 * CPU it returns. A task that ran has left the DSQ, so there is nothing to
 * cancel, ever; timers only fire and look. One timer per CPU (a bpf_timer
 * lives in an array map value, not in task storage). The timer keeps coming
 * back while its DSQ holds tasks; if its CPU went offline (it will never
 * dispatch), it hands them to its LLC queue.
 */
static void kick_idle_near(s32 cpu, struct task_struct *p);

struct pending_timer {
	struct bpf_timer timer;
	/* The timer is started and has not fired yet. */
	u32 armed;
	/* The CPU whose pending DSQ it scans. */
	s32 cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NEST_MAX_CPUS);
	__type(key, u32);
	__type(value, struct pending_timer);
} pending_timers SEC(".maps");

static struct pending_timer *pending_timer_of(s32 cpu)
{
	u32 key = cpu_index(cpu);

	return bpf_map_lookup_elem(&pending_timers, &key);
}

/* Start @pt to fire in @delay_ns unless it is already started. */
static void arm_pending_timer(struct pending_timer *pt, u64 delay_ns)
{
	if (__sync_val_compare_and_swap(&pt->armed, 0, 1) == 0)
		bpf_timer_start(&pt->timer, delay_ns, 0);
}

/* The policy's deferred move of @p, which waits in the DSQ being iterated. */
static __always_inline void move_pending(struct bpf_iter_scx_dsq *it,
					 struct task_struct *p,
					 struct task_ctx *t)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	s32 cpu = nest_smove_timer(&pctx, &t->nest);

	if (cpu < 0)
		return;
	if (scx_bpf_dsq_move(it, p, SCX_DSQ_LOCAL_ON | cpu, 0))
		kick_cpu(cpu, SCX_KICK_IDLE);
	else
		count_event(NEST_EV_MOVE_FAILED, 1);
}

/*
 * Move @p, of context @t, from the DSQ being iterated to the LLC queue of
 * @cpu, an offline CPU that will never take it, with its virtual time, and
 * wake an idle CPU for it.
 */
static __always_inline void move_to_llc_queue(struct bpf_iter_scx_dsq *it,
					      struct task_struct *p,
					      struct task_ctx *t, s32 cpu)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx = policy_ctx(&env);
	u32 llc = nest_queue_llc(&pctx, cpu);

	scx_bpf_dsq_move_set_vtime(it, t ? t->nest.vtime : 0);
	if (!scx_bpf_dsq_move_vtime(it, p, LLC_DSQ_BASE + llc, 0))
		return;
	if (t)
		nest_task_queued(&pctx, &t->nest, llc);
	kick_idle_near(cpu, p);
}

/*
 * A CPU's pending timer fired: move the tasks whose delay passed, and come
 * back for the others. A task inserted while the scan ran is caught by the
 * final check of the queue length. The scan holds the RCU read lock: 6.12's
 * verifier refuses a DSQ iterator in a timer callback without it ("expected
 * an RCU CS"); later kernels run timer callbacks under it anyway.
 */
static int pending_timer_fn(void *map, int *key, struct pending_timer *pt)
{
	u64 dsq = PENDING_DSQ_BASE + pt->cpu, now = scx_bpf_now(), next = 0;
	struct task_struct *p;

	WRITE_ONCE(pt->armed, 0);
	bpf_rcu_read_lock();
	bpf_for_each(scx_dsq, p, dsq, 0) {
		struct task_ctx *t = lookup_task(p);

		/* An offline CPU never dispatches: hand its tasks to all. */
		if (cpu_offline(&nest_state, pt->cpu)) {
			move_to_llc_queue(BPF_FOR_EACH_ITER, p, t, pt->cpu);
			continue;
		}
		if (!t || t->nest.move_to < 0)
			continue;
		if (t->nest.move_at <= now)
			move_pending(BPF_FOR_EACH_ITER, p, t);
		else if (!next || t->nest.move_at - now < next)
			next = t->nest.move_at - now;
	}
	bpf_rcu_read_unlock();
	if (!next && scx_bpf_dsq_nr_queued(dsq))
		next = nest_cfg.smove_delay_ns;
	if (next)
		arm_pending_timer(pt, next);
	return 0;
}

/* @cpu's pending DSQ and timer; errors as init_fail(). */
static s32 init_pending_cpu(s32 cpu)
{
	struct pending_timer *pt = pending_timer_of(cpu);
	s32 err;

	err = scx_bpf_create_dsq(PENDING_DSQ_BASE + cpu, -1);
	if (err)
		return init_fail(err, "cannot create CPU %d's S_move queue: error %d", cpu, err);
	if (!pt)
		return init_fail(-ENOENT, "no S_move timer slot for CPU %d", cpu);
	pt->cpu = cpu;
	err = bpf_timer_init(&pt->timer, &pending_timers, CLOCK_MONOTONIC);
	if (!err)
		err = bpf_timer_set_callback(&pt->timer, pending_timer_fn);
	if (err)
		return init_fail(err, "cannot set up CPU %d's S_move timer: error %d", cpu, err);
	return 0;
}

/* Set up every CPU's pending DSQ and timer (S_move only). */
static s32 init_pending(void)
{
	s32 cpu, err;

	bpf_for(cpu, 0, nest_cfg.nr_cpus) {
		err = init_pending_cpu(cpu);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Leave @p on the waker's CPU (choice->cpu) for a deferred move. The
 * default CPU may have been claimed idle by the placement: a kick sends it
 * through the idle loop once more, which marks it idle again.
 */
static void defer_move(struct task_struct *p, const struct nest_choice *choice)
{
	struct pending_timer *pt = pending_timer_of(choice->cpu);

	scx_bpf_dsq_insert(p, PENDING_DSQ_BASE + cpu_index(choice->cpu),
			   slice_on(choice->cpu), 0);
	if (pt)
		arm_pending_timer(pt, choice->defer_ns);
	kick_cpu(choice->cpu, SCX_KICK_IDLE);
	kick_cpu(choice->defer_cpu, SCX_KICK_IDLE);
}

static s32 select_cpu_smove(struct task_struct *p, struct task_ctx *t,
			    s32 prev_cpu, u64 wake_flags)
{
	struct nest_bpf_env env = { .p = p, .wake_flags = wake_flags };
	struct nest_ctx pctx = policy_ctx(&env);
	struct nest_choice choice = {};
	s32 waker = bpf_get_smp_processor_id();

	if (policy_kind == POLICY_SLOCAL)
		nest_slocal_select(&pctx, waker, prev_cpu, &choice);
	else
		nest_smove_select(&pctx, &t->nest, waker, prev_cpu, &choice);
	/* Not usable: ops.enqueue() queues the task. */
	if (!cpu_valid(&nest_cfg, choice.cpu) ||
	    !bpf_cpumask_test_cpu(choice.cpu, p->cpus_ptr))
		return prev_cpu;
	if (choice.defer_cpu >= 0)
		defer_move(p, &choice);
	else
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(choice.cpu), 0);
	return choice.cpu;
}

/* The minimal baseline: the kernel's default idle-CPU selection. */
static s32 select_cpu_builtin(struct task_struct *p, s32 prev_cpu,
			      u64 wake_flags)
{
	bool idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);

	if (idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(cpu), 0);
	return cpu;
}

/*
 * --policy spread, the negative control of the placement tests: the
 * opposite of Nest. Every placement claims the first idle CPU at or after a
 * global cursor, which moves one step per placement through spread_order
 * (filled in by user space: CPUs of the sockets interleaved), so
 * consecutive placements land on different sockets and every CPU gets
 * used. Tests assert that this policy fails the checks Nest passes.
 */
u32 spread_order[NEST_MAX_CPUS];
u32 spread_cursor;

static s32 select_cpu_spread(struct task_struct *p, s32 prev_cpu)
{
	u32 nr_cpus = nest_cfg.nr_cpus, start, i;
	s32 cpu;

	if (!nr_cpus)
		return prev_cpu;
	start = __sync_fetch_and_add(&spread_cursor, 1);
	bpf_for(i, 0, nr_cpus) {
		cpu = spread_order[cpu_index((start + i) % nr_cpus)];
		if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_test_and_clear_cpu_idle(cpu)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(cpu), 0);
			return cpu;
		}
	}
	return prev_cpu;
}

s32 BPF_STRUCT_OPS(nest_select_cpu_op, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct nest_bpf_env env = { .p = p, .wake_flags = wake_flags };
	struct nest_ctx pctx = policy_ctx(&env);
	struct nest_choice choice = {};
	struct task_ctx *t = lookup_task(p);

	if (!t || is_stall_target(p))
		return prev_cpu;
	if (policy_kind == POLICY_BUILTIN)
		return select_cpu_builtin(p, prev_cpu, wake_flags);
	if (policy_kind == POLICY_SPREAD)
		return select_cpu_spread(p, prev_cpu);
	if (policy_kind == POLICY_SLOCAL || policy_kind == POLICY_SMOVE)
		return select_cpu_smove(p, t, prev_cpu, wake_flags);

	nest_select_cpu(&pctx, &t->nest, prev_cpu, &choice);
	report_nest_changes();
	if (trace_placements)
		bpf_printk("place pid=%d cpu=%d how=%u", p->pid, choice.cpu, choice.how);
	if (choice.idle) {
		t->placed_ns = pctx.now;
		t->placed_on_spinning = nest_cpu_spinning(&nest_state, choice.cpu);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(choice.cpu), 0);
	}
	return choice.cpu;
}


/*
 * Queues and kicks
 * ----------------
 * Idle CPUs are found without claiming them (a kick only makes a CPU look
 * at the queues): first in @cpu's LLC, through the LLC's cpumask, then
 * anywhere @p may run.
 */
struct llc_cpus {
	struct bpf_cpumask __kptr *mask;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NEST_MAX_LLCS);
	__type(key, u32);
	__type(value, struct llc_cpus);
} llc_cpumasks SEC(".maps");

static const struct cpumask *llc_mask_of(s32 cpu)
{
	u32 key = llc_index(cpu_llc(&nest_cfg, cpu));
	struct llc_cpus *l = bpf_map_lookup_elem(&llc_cpumasks, &key);

	return l && l->mask ? (const struct cpumask *)l->mask : NULL;
}

/* Kick an idle CPU near @cpu that may run @p (any task if @p is NULL). */
static void kick_idle_near(s32 cpu, struct task_struct *p)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	const struct cpumask *llc = llc_mask_of(cpu);
	u32 target = nest_cfg.nr_cpus;

	if (llc)
		target = bpf_cpumask_any_and_distribute(idle, llc);
	if (target >= nest_cfg.nr_cpus ||
	    (p && !bpf_cpumask_test_cpu(target, p->cpus_ptr)))
		target = bpf_cpumask_any_and_distribute(idle, p ? p->cpus_ptr :
							 idle);
	scx_bpf_put_idle_cpumask(idle);
	if (target < nest_cfg.nr_cpus) {
		kick_cpu(target, SCX_KICK_IDLE);
		count_event(NEST_EV_KICKED, 1);
	}
}

/*
 * An idle CPU for @p, which is being queued without a placement (woken
 * without ops.select_cpu(), or leaving a shared core: see nest_tick()):
 * one of the nests first, then any. The CPU returned has been claimed, so
 * @p must be inserted there.
 */
static s32 claim_cpu_for_queued(struct task_struct *p, struct task_ctx *t)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	s32 cpu = -1;

	if (t && policy_kind == POLICY_NEST)
		cpu = nest_claim_for_queued(&pctx, &t->nest, scx_bpf_task_cpu(p));
	report_nest_changes();
	if (cpu < 0)
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	return cpu;
}

/*
 * Whole cores first, over time: a task that has shared its core with a busy
 * SMT sibling for two ticks (nest_tick_unpair()) while a whole core it may
 * use is idle gets its slice ended and is marked. ops.dispatch() then does
 * not keep it running, the kernel passes it to ops.enqueue() as its CPU's
 * last task (SCX_OPS_ENQ_LAST), and the claim there takes a whole idle
 * core.
 *
 * Work conservation: when tasks still wait in a CPU's LLC queue at its
 * tick, an idle CPU is woken to take one (as the fair scheduler's
 * nohz_balancer_kick()), beside the kick of queue_task().
 */
static void tick_unpair(struct task_struct *p, struct nest_ctx *pctx)
{
	const struct cpumask *idle_cores;
	struct task_ctx *t;
	bool idle_core;

	if (policy_kind != POLICY_NEST || p->nr_cpus_allowed == 1 ||
	    !nest_tick_unpair(pctx, scx_bpf_task_cpu(p)))
		return;
	idle_cores = scx_bpf_get_idle_smtmask();
	idle_core = bpf_cpumask_intersects(idle_cores, p->cpus_ptr);
	scx_bpf_put_idle_cpumask(idle_cores);
	t = lookup_task(p);
	if (!idle_core || !t)
		return;
	t->unpair = 1;
	scx_bpf_task_set_slice(p, 0);
	count_event(NEST_EV_UNPAIRED, 1);
}

void BPF_STRUCT_OPS(nest_tick, struct task_struct *p)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	s32 cpu = scx_bpf_task_cpu(p);

	perf_tick(p);
	tick_unpair(p, &pctx);
	if (nest_tick_kick(&pctx, cpu)) {
		kick_idle_near(cpu, NULL);
		count_event(NEST_EV_TICK_KICKED, 1);
	}
	report_nest_changes();
}

/*
 * May @p run on one CPU only (its current one)? A migration-disabled task
 * reaches ops.enqueue() through SCX_OPS_ENQ_MIGRATION_DISABLED (config.rs)
 * while its affinity may still list other CPUs, so it is tested apart; its
 * CPU's pinned queue is the one queue no other CPU consumes.
 */
static bool task_pinned(const struct task_struct *p)
{
	return p->nr_cpus_allowed == 1 || is_migration_disabled(p);
}

/*
 * Wake @cpu, which has just been given a task in its pinned queue, if it is
 * idle. Not from @cpu itself: it is then queueing a task of its own at a
 * switch (it dispatches next) or waking one on its own run queue, where
 * the kernel reschedules its idle task by itself (wakeup_preempt(): a
 * higher class than idle's). Every kick raises an irq_work interrupt on
 * the calling CPU (scx_bpf_kick_cpu() bounces kicks through
 * kick_cpus_irq_workfn()); these were interrupts for nothing, one per
 * wake-up of cyclictest pinned beside a hog (none under the default
 * scheduler).
 */
static void kick_pinned_cpu(s32 cpu)
{
	if (cpu != (s32)bpf_get_smp_processor_id())
		kick_cpu(cpu, SCX_KICK_IDLE);
}

/*
 * Queue @p, whose CPU is @cpu, with its virtual time, in the queue the
 * policy names (nest_queue_of()): @cpu's queue of pinned tasks if @p may
 * run there only, else @cpu's front queue (always if @home: a woken task
 * preempted @p there) or its LLC's. A woken task may preempt the task
 * running on @cpu, which then resumes there (nest_woken_preempts()); one
 * that @cpu would take next goes straight to its local queue
 * (nest_woken_runs_next()); otherwise an idle CPU is kicked (the
 * placement found none a moment ago, but one may have gone idle since).
 * Any other task (preempted, or moved here by an affinity change or a
 * migration) wakes an idle CPU too, its own first: waiting for the busy
 * CPU to take it back kept CPUs idle for 8-14 ms beside waiting threads
 * under overload, and a task moved onto an idle CPU, pinned there, would
 * wait for the watchdog.
 */
static void queue_task(struct task_struct *p, struct task_ctx *t, bool home,
		       s32 cpu, u64 enq_flags)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	bool pinned = task_pinned(p);
	u32 llc = nest_queue_llc(&pctx, cpu);
	/* Its CPU's queues are in its LLC's frame. */
	s32 frame = pinned ? NEST_QUEUE_PINNED - cpu : (s32)llc;
	u64 vtime = nest_queue_vtime(&pctx, &t->nest, frame, t->weight);
	bool woken = enq_flags & SCX_ENQ_WAKEUP;
	bool preempt = woken && bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		       nest_wakeup_preempts(&pctx, cpu, vtime);
	s32 queue;

	if (!t->queued_ns)
		t->queued_ns = pctx.now ? pctx.now : 1;
	if (preempt && nest_woken_runs_next(&pctx, cpu, vtime)) {
		/* In ops.enqueue(), SCX_DSQ_LOCAL is @p's CPU's: @cpu's. */
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, nest_slice(&pctx, cpu),
				   enq_flags | SCX_ENQ_HEAD | SCX_ENQ_PREEMPT);
		nest_woken_preempts(&pctx, cpu, pinned);
		count_event(NEST_EV_PREEMPTED, 1);
		return;
	}
	queue = nest_queue_of(&pctx, cpu, pinned, preempt || home);
	scx_bpf_dsq_insert_vtime(p, queue_dsq(queue), nest_slice(&pctx, cpu),
				 vtime, enq_flags);
	nest_task_queued(&pctx, &t->nest, queue);
	if (!woken) {
		if (pinned)
			kick_pinned_cpu(cpu);
		else
			kick_idle_near(cpu, p);
		return;
	}
	if (preempt) {
		nest_woken_preempts(&pctx, cpu, false);
		kick_cpu(cpu, SCX_KICK_PREEMPT);
		count_event(NEST_EV_PREEMPTED, 1);
	} else if (pinned) {
		kick_pinned_cpu(cpu);
	} else {
		kick_idle_near(cpu, p);
	}
}

/*
 * How does @p, running on @cpu a moment ago, resume: is it being queued
 * because a woken task preempted it there (nest_woken_preempts())? The
 * rule reads only @cpu's mark: no clock read on this path, which every
 * queued task takes. Neither a woken task nor one the kernel re-enqueues
 * (SCX_ENQ_REENQ: a higher class took @cpu, ops.cpu_release()) is that
 * task: the latter must leave @cpu, and taking the mark would keep it
 * there.
 */
static u32 preempted_resumes(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx_at(&env, 0);

	if ((enq_flags & (SCX_ENQ_WAKEUP | SCX_ENQ_REENQ)) ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return NEST_RESUME_QUEUED;
	return nest_preempted_resumes(&pctx, cpu);
}

void BPF_STRUCT_OPS(nest_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *t = lookup_task(p);
	s32 cpu = scx_bpf_task_cpu(p);
	bool unpair = t && t->unpair;
	u32 resume;

	if (t)
		t->unpair = 0;
	if (is_stall_target(p) || !t) {
		scx_bpf_dsq_insert(p, is_stall_target(p) ? STALL_DSQ :
				   SCX_DSQ_LOCAL, nest_cfg.slice_ns, enq_flags);
		count_event(NEST_EV_STALLED, is_stall_target(p));
		return;
	}
	if (task_pinned(p)) {
		queue_task(p, t, false, cpu, enq_flags);
		count_event(NEST_EV_PINNED, 1);
		return;
	}
	resume = preempted_resumes(p, cpu, enq_flags);
	if (resume == NEST_RESUME_LOCAL) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(cpu), enq_flags);
		count_event(NEST_EV_RESUMED, 1);
		return;
	}
	/*
	 * A task placed by ops.select_cpu() found nothing idle a moment ago.
	 * A task woken without it, or leaving a shared core, gets an idle
	 * CPU if there is one; a task preempted by another is queued (and
	 * an idle CPU kicked to take it: queue_task()). Kernels without
	 * SCX_ENQ_CPU_SELECTED (6.12, 6.13) call every wake-up placed, and
	 * mark no other enqueue: the unpairing must not depend on the flag.
	 */
	if (unpair || ((enq_flags & SCX_ENQ_WAKEUP) &&
		       !__COMPAT_is_enq_cpu_selected(enq_flags))) {
		s32 idle = claim_cpu_for_queued(p, t);

		if (idle >= 0) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle,
					   slice_on(idle), enq_flags);
			kick_cpu(idle, SCX_KICK_IDLE);
			count_event(NEST_EV_DIRECT, 1);
			return;
		}
	}
	/* The last task of its CPU (see nest_tick()): it stays there. */
	if (enq_flags & SCX_ENQ_LAST) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_on(cpu), enq_flags);
		return;
	}
	queue_task(p, t, resume == NEST_RESUME_FRONT, cpu, enq_flags);
	count_event(NEST_EV_QUEUED, 1);
}

/* Has @p, a task of one of @cpu's queues, waited too long, and may it run here? */
static bool starving_here(struct nest_ctx *pctx, s32 cpu, struct task_struct *p)
{
	struct task_ctx *t = lookup_task(p);

	return t && nest_starving(pctx, t->queued_ns) &&
	       bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

/*
 * Starvation guard: run a task of queue @dsq that has waited too long
 * (nest_starving()) and may run on @cpu, when the queue's sweep, with its
 * next time @sweep_at, is due (nest_starve_sweep_due()). The sweep has no
 * counter, so the verifier checks its loop once: it follows a counter
 * compared with a known limit through every value, and a limit of 1024
 * kept scx_nest from loading for over 8 minutes in an emulated guest.
 */
static bool consume_starving(struct nest_ctx *pctx, s32 cpu, u64 dsq,
			     u64 *sweep_at)
{
	struct task_struct *p;

	/* The sweep's time first: a queue's length is a lookup by its id. */
	if (!nest_starve_sweep_due(pctx, sweep_at) ||
	    scx_bpf_dsq_nr_queued(dsq) <= 0)
		return false;
	bpf_for_each(scx_dsq, p, dsq, SCX_DSQ_ITER_REV) {
		if (starving_here(pctx, cpu, p) &&
		    scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			nest_starve_rescued(pctx, sweep_at);
			count_event(NEST_EV_STARVED, 1);
			return true;
		}
	}
	return false;
}

/*
 * Should @prev, still runnable on @cpu at the end of its slice, keep the
 * CPU rather than give it to the next task of @queue (nest_prev_keeps_cpu())?
 * Not a task leaving a shared core (see nest_tick()).
 */
static bool prev_keeps_cpu(struct nest_ctx *pctx, struct task_struct *prev,
			   s32 cpu, s32 queue)
{
	struct task_ctx *t;

	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED))
		return false;
	t = lookup_task(prev);
	return t && !t->unpair &&
	       nest_prev_keeps_cpu(pctx, cpu, &t->nest, t->weight, queue);
}

/*
 * The starvation guard's sweep of @cpu's queues: its pinned and front
 * queues, and its LLC's.
 */
static bool consume_starving_near(struct nest_ctx *pctx, s32 cpu, u32 own)
{
	struct nest_cpu *c = &nest_state.cpus[cpu_index(cpu)];

	return consume_starving(pctx, cpu, PINNED_DSQ_BASE + cpu_index(cpu),
				&c->starve_sweep_at) ||
	       consume_starving(pctx, cpu, FRONT_DSQ_BASE + cpu_index(cpu),
				&c->front_sweep_at) ||
	       consume_starving(pctx, cpu, LLC_DSQ_BASE + own,
				&nest_state.starve_sweep_at[llc_index(own)]);
}

/* Count what @cpu took from @queue, another CPU's or LLC's or its front. */
static void count_consumed(s32 cpu, u32 own, s32 queue)
{
	if (queue == NEST_QUEUE_FRONT - cpu)
		count_event(NEST_EV_KEPT_LOCAL, 1);
	else if (queue <= NEST_QUEUE_FRONT || (queue >= 0 && queue != own))
		count_event(NEST_EV_STOLEN, 1);
}

/*
 * Zero, which the verifier cannot know: or-ed into a value, it drops the
 * bounds the verifier tracked for it. From the queue numbers that
 * nest_queue_to_consume() returns (LLC indexes, and negative numbers for
 * CPUs' queues), the verifiers of 6.17 to 7.0 derive contradictory bounds
 * and log a "REG INVARIANTS VIOLATION" kernel warning while loading
 * nest_dispatch (harmless, but a warning on every load); the tests that
 * follow on a queue of unknown bounds are sound on every kernel.
 */
u32 verifier_blind;

/*
 * Take the next task from the queue the policy names; false if there is
 * none, or if @prev keeps the CPU. When the named queue holds nothing this
 * CPU may run (affinity), its own queues are tried whatever their order:
 * a CPU must never go idle while its pinned queue holds tasks, which only
 * it can run. Each queue is looked at by a lockless peek; only the move
 * takes a queue's lock.
 */
static bool consume(s32 cpu, struct task_struct *prev)
{
	struct nest_bpf_env env = {};
	/* The choice of queue reads no clock; what follows it does. */
	struct nest_ctx pctx = policy_ctx_at(&env, 0);
	s32 queue = nest_queue_to_consume(&pctx, cpu) | verifier_blind;
	u32 own = nest_queue_llc(&pctx, cpu);

	if (queue == NEST_QUEUE_NONE)
		return false;
	pctx.now = scx_bpf_now();
	if (consume_starving_near(&pctx, cpu, own))
		return true;
	if (prev_keeps_cpu(&pctx, prev, cpu, queue))
		return false;
	if (scx_bpf_dsq_move_to_local(queue_dsq(queue), 0)) {
		count_consumed(cpu, own, queue);
		return true;
	}
	return scx_bpf_dsq_move_to_local(PINNED_DSQ_BASE + cpu_index(cpu), 0) ||
	       scx_bpf_dsq_move_to_local(FRONT_DSQ_BASE + cpu_index(cpu), 0) ||
	       scx_bpf_dsq_move_to_local(LLC_DSQ_BASE + own, 0);
}

/*
 * Keep a warm-spinning CPU executing: kicking itself makes it leave the
 * idle loop and come back through the scheduler, which calls
 * ops.dispatch() again, where the spin is continued or ended. The CPU stays
 * idle for placement throughout, so a task placed on it (or queued) is
 * picked up on the next pass, without waiting for the spin to end.
 */
static void keep_spinning(s32 cpu)
{
	kick_cpu(cpu, 0);
}

void BPF_STRUCT_OPS(nest_dispatch, s32 cpu, struct task_struct *prev)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx;

	if (policy_kind == POLICY_SMOVE &&
	    scx_bpf_dsq_move_to_local(PENDING_DSQ_BASE + cpu_index(cpu), 0))
		return;
	if (consume(cpu, prev))
		return;
	/*
	 * Nothing else to run, or @prev comes first: @prev, if still
	 * runnable, keeps the CPU with a new slice. Otherwise the kernel gives it SCX_SLICE_DFL (20 ms), and
	 * a task that can only run here waits that long.
	 */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		struct task_ctx *t = lookup_task(prev);

		/* Not a task leaving a shared core (see nest_tick()). */
		if (!t || !t->unpair)
			scx_bpf_task_set_slice(prev, slice_on(cpu));
		return;
	}
	if (!nest_cpu_spinning(&nest_state, cpu))
		return;
	pctx = policy_ctx(&env);
	if (nest_spin_continue(&pctx, cpu))
		keep_spinning(cpu);
	report_nest_changes();
}

/* Account the delay between placing @t on a claimed CPU and it running. */
static void account_wake_delay(struct task_ctx *t, u64 now)
{
	u64 delay = now > t->placed_ns ? now - t->placed_ns : 0;

	if (t->placed_on_spinning) {
		count_event(NEST_EV_SPIN_WAKE_NS, delay);
		count_event(NEST_EV_SPIN_WAKES, 1);
	} else {
		count_event(NEST_EV_IDLE_WAKE_NS, delay);
		count_event(NEST_EV_IDLE_WAKES, 1);
	}
	t->placed_ns = 0;
}

void BPF_STRUCT_OPS(nest_running, struct task_struct *p)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	struct task_ctx *t = lookup_task(p);
	s32 cpu = scx_bpf_task_cpu(p);

	perf_running(p, t);
	if (!t)
		return;
	t->queued_ns = 0;
	nest_sched_running(&pctx, &t->nest, cpu, refresh_weight(p, t));
	if (policy_kind == POLICY_SMOVE)
		nest_smove_task_running(&t->nest);
	if (policy_kind != POLICY_NEST)
		return;
	if (t->placed_ns)
		account_wake_delay(t, pctx.now);
	nest_task_running(&pctx, &t->nest, cpu);
	report_nest_changes();
}

void BPF_STRUCT_OPS(nest_stopping, struct task_struct *p, bool runnable)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx(&env);
	struct task_ctx *t = lookup_task(p);
	s32 cpu = scx_bpf_task_cpu(p);

	if (t)
		nest_sched_stopping(&pctx, &t->nest, cpu, t->weight);
	perf_stopping(p);
	if (policy_kind != POLICY_NEST)
		return;
	if (task_dead(p))
		nest_task_exiting(&nest_state, cpu);
	else if (!runnable && t) {
		t->nest.traits = (p->flags & PF_KTHREAD ? NEST_TASK_KTHREAD : 0) |
				 (task_pinned(p) ? NEST_TASK_PINNED : 0);
		nest_task_sleeping(&pctx, &t->nest, cpu);
	}
	report_nest_changes();
}

/*
 * @p leaves the scheduler (a change of scheduling class, in partial mode
 * or to real time; its exit): if it left one of the queues for that, it
 * is no longer counted there (policy/nest_sched.c, "Queue counts").
 */
void BPF_STRUCT_OPS(nest_disable, struct task_struct *p)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx = policy_ctx_at(&env, 0);
	struct task_ctx *t = lookup_task(p);

	if (t)
		nest_task_queued(&pctx, &t->nest, NEST_QUEUE_NONE);
}

/*
 * Only the idle transition matters to the policy in full mode: a CPU
 * counts as busy from the moment a task runs there (ops.running()). In
 * partial mode a CPU leaving idle (and not warm spinning) may be taken by
 * a fair or real-time task, which sched_ext does not report otherwise:
 * it is busy until it goes idle again.
 */
void BPF_STRUCT_OPS(nest_update_idle, s32 cpu, bool idle)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx;

	if (policy_kind != POLICY_NEST || (!idle && !switch_partial))
		return;
	pctx = policy_ctx(&env);
	if (!idle) {
		if (!nest_cpu_spinning(&nest_state, cpu))
			nest_cpu_busy(&pctx, cpu);
	} else if (nest_cpu_idle(&pctx, cpu)) {
		keep_spinning(cpu);
	}
	report_nest_changes();
}

/*
 * A higher scheduling class (real-time; fair tasks in partial mode) took
 * @cpu: it is busy for the policy, and the tasks waiting on its local queue
 * go back through ops.enqueue() to run elsewhere.
 */
void BPF_STRUCT_OPS(nest_cpu_release, s32 cpu,
		    struct scx_cpu_release_args *args)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx = policy_ctx(&env);

	nest_cpu_busy(&pctx, cpu);
	report_nest_changes();
	scx_bpf_reenqueue_local();
	count_event(NEST_EV_RELEASED, 1);
}

/*
 * CPU hotplug. Without these two callbacks the kernel ejects the scheduler
 * (asking user space to restart it) whenever a CPU goes offline or online.
 * A CPU that was offline at load has no LLC, core or socket here (sysfs
 * lists none for it): its coming online restarts scx_nest, which reads the
 * topology again, as the kernel's own restart would.
 */
void BPF_STRUCT_OPS(nest_cpu_online_op, s32 cpu)
{
	if (!cpu_in_topology[cpu_index(cpu)]) {
		scx_bpf_exit(SCX_ECODE_ACT_RESTART | SCX_ECODE_RSN_HOTPLUG,
			     "CPU %d, offline at load, came online: restart to learn its topology",
			     cpu);
		return;
	}
	nest_cpu_online(&nest_state, cpu);
	report_nest_changes();
}

/*
 * An offline CPU never dispatches, and a busy CPU takes no other CPU's
 * front task: the offline CPU's front task joins its LLC's queue.
 */
static void front_to_llc_queue(s32 cpu)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, FRONT_DSQ_BASE + cpu_index(cpu), 0)
		move_to_llc_queue(BPF_FOR_EACH_ITER, p, lookup_task(p), cpu);
}

void BPF_STRUCT_OPS(nest_cpu_offline_op, s32 cpu)
{
	nest_cpu_offline(&nest_state, cpu);
	front_to_llc_queue(cpu);
	report_nest_changes();
}

/*
 * Debug dump
 * ----------
 * The kernel's debug dump (sysrq-D, and the exit info of an ejection,
 * which scx_nest prints) shows scx_nest's view beside the kernel's: the
 * nests and the LLC queues (ops.dump()), each CPU's policy state
 * (ops.dump_cpu()) and each runnable task's (ops.dump_task()). Fields are
 * named as in struct nest_cpu, struct nest_task and struct task_ctx;
 * times are scx_bpf_now() ns, which the first line gives.
 */
void BPF_STRUCT_OPS(nest_dump, struct scx_dump_ctx *dctx)
{
	u32 words = (nest_cfg.nr_cpus + 63) / 64, w, llc;

	scx_bpf_dump("scx_nest: now=%llu policy=%u nr_reserve=%d (r_max %u), nests by 64 CPUs:",
		     scx_bpf_now(), policy_kind, READ_ONCE(nest_state.nr_reserve),
		     nest_cfg.r_max);
	bpf_for(w, 0, words) {
		u32 i = w & (NEST_MASK_WORDS - 1);

		scx_bpf_dump(" primary[%u]=0x%llx reserve[%u]=0x%llx", w,
			     READ_ONCE(nest_state.primary[i]), w,
			     READ_ONCE(nest_state.reserve[i]));
	}
	scx_bpf_dump("\n");
	bpf_for(llc, 0, nest_cfg.nr_llcs)
		scx_bpf_dump("scx_nest: LLC %u queue: %d tasks (counted %d), front queues: %d tasks, llc_vtime=%llu\n",
			     llc, scx_bpf_dsq_nr_queued(LLC_DSQ_BASE + llc),
			     READ_ONCE(nest_state.llc_queued[llc_index(llc)]),
			     READ_ONCE(nest_state.llc_fronts[llc_index(llc)]),
			     READ_ONCE(nest_state.llc_vtime[llc_index(llc)]));
	if (stall_comm[0])
		scx_bpf_dump("scx_nest: %d tasks held back by --debug-stall-comm\n",
			     scx_bpf_dsq_nr_queued(STALL_DSQ));
}

/*
 * An idle CPU in no nest with nothing in its pinned or front queue says
 * nothing, so the kernel leaves it out: on a large idle machine the dump's
 * space goes to the CPUs that matter.
 */
void BPF_STRUCT_OPS(nest_dump_cpu, struct scx_dump_ctx *dctx, s32 cpu, bool idle)
{
	struct nest_cpu *c = nest_cpu(&nest_state, cpu);
	bool primary = mask_test(nest_state.primary, cpu);
	bool reserve = mask_test(nest_state.reserve, cpu);
	s32 pinned = scx_bpf_dsq_nr_queued(PINNED_DSQ_BASE + cpu_index(cpu));
	s32 front = scx_bpf_dsq_nr_queued(FRONT_DSQ_BASE + cpu_index(cpu));

	if (!c || (idle && !primary && !reserve && pinned <= 0 && front <= 0))
		return;
	if (primary)
		scx_bpf_dump("scx_nest cpu: primary nest");
	else if (reserve)
		scx_bpf_dump("scx_nest cpu: reserve nest");
	else
		scx_bpf_dump("scx_nest cpu: no nest");
	scx_bpf_dump(", pinned queue %d tasks, front queue %d, LLC %u, running=%u offline=%u idle_since=%llu spin_until=%llu kept_since=%llu",
		     pinned, front, cpu_llc(&nest_cfg, cpu), READ_ONCE(c->running),
		     READ_ONCE(c->offline), READ_ONCE(c->idle_since),
		     READ_ONCE(c->spin_until), READ_ONCE(c->kept_since));
	scx_bpf_dump(" curr_vtime=%llu curr_weight=%u resume=%u counted: front %d pinned %d",
		     READ_ONCE(c->curr_vtime), READ_ONCE(c->curr_weight),
		     READ_ONCE(c->resume), READ_ONCE(c->front_queued),
		     READ_ONCE(c->pinned_queued));
}

void BPF_STRUCT_OPS(nest_dump_task, struct scx_dump_ctx *dctx, struct task_struct *p)
{
	struct task_ctx *t = lookup_task(p);

	if (!t) {
		scx_bpf_dump("scx_nest task: no context");
		return;
	}
	scx_bpf_dump("scx_nest task: weight=%u vtime=%llu vtime_llc=%u recent_cpu=%d,%d prev_misses=%u kept_cpu=%d",
		     t->weight, t->nest.vtime, t->nest.vtime_llc,
		     t->nest.recent_cpu[0], t->nest.recent_cpu[1],
		     t->nest.prev_misses, t->nest.kept_cpu);
	scx_bpf_dump(" queued_ns=%llu queue=%d unpair=%u pinned=%u stall=%u",
		     t->queued_ns, t->nest.queue, t->unpair, task_pinned(p),
		     is_stall_target(p));
}

s32 BPF_STRUCT_OPS(nest_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct task_ctx *t;

	t = bpf_task_storage_get(&task_ctxs, p, 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t)
		return -ENOMEM;
	nest_task_init(&t->nest);
	t->placed_ns = 0;
	t->weight = p->scx.weight;
	t->cg_runnable = 0;
	return 0;
}

/* LLC @llc's queue and cpumask; errors as init_fail(). */
static s32 init_llc(u32 llc)
{
	struct bpf_cpumask *mask;
	struct llc_cpus *l;
	u32 key = llc;
	s32 err;

	err = scx_bpf_create_dsq(LLC_DSQ_BASE + llc, -1);
	if (err)
		return init_fail(err, "cannot create LLC %u's queue: error %d", llc, err);
	l = bpf_map_lookup_elem(&llc_cpumasks, &key);
	if (!l)
		return init_fail(-ENOENT, "no cpumask slot for LLC %u", llc);
	mask = bpf_cpumask_create();
	if (!mask)
		return init_fail(-ENOMEM, "cannot allocate LLC %u's cpumask", llc);
	mask = bpf_kptr_xchg(&l->mask, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

/* @cpu's queue of pinned tasks, and @cpu in its LLC's cpumask. */
static s32 init_cpu(s32 cpu)
{
	u32 key = llc_index(cpu_llc(&nest_cfg, cpu));
	struct llc_cpus *l;
	s32 err;

	err = scx_bpf_create_dsq(PINNED_DSQ_BASE + cpu, -1);
	if (err)
		return init_fail(err, "cannot create CPU %d's pinned queue: error %d", cpu, err);
	err = scx_bpf_create_dsq(FRONT_DSQ_BASE + cpu, -1);
	if (err)
		return init_fail(err, "cannot create CPU %d's front queue: error %d", cpu, err);
	l = bpf_map_lookup_elem(&llc_cpumasks, &key);
	if (!l)
		return init_fail(-ENOENT, "no cpumask slot for LLC %u of CPU %d", key, cpu);
	bpf_rcu_read_lock();
	if (l->mask)
		bpf_cpumask_set_cpu(cpu, l->mask);
	bpf_rcu_read_unlock();
	return 0;
}

/* Each LLC's queue and cpumask, each CPU's pinned and front queues. */
static s32 init_queues(void)
{
	u32 llc;
	s32 cpu, err;

	bpf_for(llc, 0, nest_cfg.nr_llcs) {
		err = init_llc(llc);
		if (err)
			return err;
	}
	bpf_for(cpu, 0, nest_cfg.nr_cpus) {
		err = init_cpu(cpu);
		if (err)
			return err;
	}
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(nest_init)
{
	s32 err = init_queues();

	if (err)
		return err;
	perf_init();
	err = scx_bpf_create_dsq(STALL_DSQ, -1);
	if (err)
		return init_fail(err, "cannot create the stall test's queue: error %d", err);
	return policy_kind == POLICY_SMOVE ? init_pending() : 0;
}

void BPF_STRUCT_OPS(nest_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(nest_ops,
	       .select_cpu = (void *)nest_select_cpu_op,
	       .enqueue = (void *)nest_enqueue,
	       .dispatch = (void *)nest_dispatch,
	       .tick = (void *)nest_tick,
	       .runnable = (void *)nest_runnable,
	       .running = (void *)nest_running,
	       .stopping = (void *)nest_stopping,
	       .quiescent = (void *)nest_quiescent,
	       .disable = (void *)nest_disable,
	       .update_idle = (void *)nest_update_idle,
	       .cpu_release = (void *)nest_cpu_release,
	       .cpu_online = (void *)nest_cpu_online_op,
	       .cpu_offline = (void *)nest_cpu_offline_op,
	       .init_task = (void *)nest_init_task,
	       .dump = (void *)nest_dump,
	       .dump_cpu = (void *)nest_dump_cpu,
	       .dump_task = (void *)nest_dump_task,
	       .cgroup_init = (void *)nest_cgroup_init,
	       .cgroup_move = (void *)nest_cgroup_move,
	       .cgroup_set_weight = (void *)nest_cgroup_set_weight,
	       .init = (void *)nest_init,
	       .exit = (void *)nest_exit,
	       .name = "nest");
