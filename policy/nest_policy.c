/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nest placement policy (Nest, EuroSys 2022), written once for every host.
 *
 * Nest keeps two CPU sets. The primary nest holds CPUs used recently and
 * expected to be used again soon; the reserve nest holds at most R_max CPUs
 * that either left the primary nest or were picked by the fallback and have
 * not yet proved themselves. A task being placed tries, in order:
 *
 *   1. its attached CPU (the last two CPUs it ran on are the same), if that
 *      CPU is in the primary nest and idle, even if it is due for compaction;
 *   2. unless the task is impatient, the primary nest, from its previous CPU
 *      onwards, CPUs of its previous CPU's LLC first, demoting CPUs that have
 *      been idle longer than P_remove as the scan meets them (lazy
 *      compaction: no timers);
 *   3. the reserve nest, from a fixed CPU (where Nest started), same LLC
 *      first; a CPU found there is promoted to the primary nest;
 *   4. the host's default placement, then any idle CPU of any socket (work
 *      conservation); the CPU found joins the reserve, or the primary nest
 *      if the task is impatient.
 *
 * CPUs are only ever taken through plat_claim_idle(), an atomic claim of the
 * CPU's idle state, so two racing placements cannot take the same CPU; a
 * lost claim just continues the search.
 *
 * Whole cores first (NEST_MECH_WHOLE_CORES, an addition to the published
 * design, which ignores SMT siblings): steps 1 to 3 and the default
 * placement first run restricted to CPUs whose SMT siblings are all idle;
 * only when that finds nothing do steps 1 to 4 run as published, taking
 * any idle CPU. The restricted pass compacts no more than the published
 * scan would (see scan_visit()), and a previous CPU it skips because its
 * sibling runs is idle, so not a miss for impatience. Without whole cores
 * first, threads that run at the same time settle as pairs on sibling
 * threads of one core while other cores stay idle: with one thread per
 * core and barriers, every phase waits for the slowest, SMT-sharing thread
 * (about 1.5x slower in the simulator on Gold 5218).
 *
 * Impatience, as published: a placement that finds the task's previous CPU
 * busy (the host's idle state, after the search) is a miss; after
 * R_impatient misses in a row the next placement is impatient. That one
 * placement skips the primary search and puts its CPU straight into the
 * primary nest; the count then starts again. Getting the previous CPU
 * back also resets it. A fork does not count: its previous CPU is the
 * parent's. When a task exits and its CPU goes idle, the CPU leaves the
 * primary nest at once.
 *
 * Fork reuse (NEST_MECH_FORK_REUSE, an addition to the published design):
 * a fork first takes the CPU that the last task to exit in its parent's LLC
 * left, if it is idle and went idle at most P_remove ago (other tasks may
 * have run there since: the exit itself wakes the CPU's kernel workers);
 * the CPU is promoted back to the primary nest. A shell or make
 * forks, waits for the child's exit and forks again: exit demotion alone
 * makes the next child take another primary CPU, then the reserve, so the
 * children rotate over five or six CPUs (measured in the 2x4x2 guest, see
 * docs/scheduler.md), while the fair scheduler's fork path takes the CPU
 * that went idle most recently (find_idlest_group_cpu(): the latest
 * idle_stamp among equally shallow idle CPUs), the one the last child left.
 *
 * Warm previous CPU (NEST_MECH_WARM_PREV, an addition to the published
 * design): a woken task whose previous CPU is idle, outside the primary
 * nest, and was last used at most P_remove ago takes it back and promotes
 * it, before the primary search. The published search offers such a task
 * another primary CPU, and the task moves although its own CPU is as
 * recently used. CPUs fall out of the primary nest all the time under a
 * configure script (exit demotion of a child that ran there, fallback
 * CPUs that wait in the reserve): in GNU hello's configure in the 2x4x2
 * guest, 1727 of the tree's 4472 wake-ups that left their CPU found it
 * idle in the reserve (docs/scheduler.md). The fair scheduler takes an
 * idle previous CPU first (select_idle_sibling()); the age limit keeps
 * Nest's compaction: a CPU idle longer than P_remove is cold, and the
 * task goes to the nests as published. Forks (whose previous CPU is the
 * parent's) and impatient tasks (which skip the primary nest) are left
 * as published.
 *
 * Kept CPU (NEST_MECH_KEEP_ATTACHED, an addition to the published design):
 * while a task attached to a CPU (step 1) sleeps there, for at most
 * P_remove, the CPU is kept for it: other placements pass over it in
 * steps 1 to 3 and take it only when the nests have no other idle CPU,
 * before the fallback (step 4), which ignores keeps: no task waits while
 * a CPU idles. A shell or make waits for its child on a CPU of the
 * primary nest, often its only idle one; the published scan hands that
 * CPU to the next task that wakes nearby (kernel threads, the scheduler's
 * own thread, a tracer), and when the child exits its parent finds its
 * CPU taken and moves. In the placement test's fork/wait chain in the
 * 2x4x2 guest, a stranger had claimed the parent's idle CPU just before
 * its wake-up in 8 of its 10 moves over two runs (docs/scheduler.md). The
 * fair scheduler has no such rule, but it spreads such strangers instead
 * of gathering them in the nest. A keep lasts until its task runs again
 * (anywhere), another task runs there (taking a kept CPU for lack of
 * another, or through the fallback), or P_remove passes.
 * Without the second end, a keep outlived the CPU's next tenants, which
 * were then sent away from their own idle previous CPU: GNU hello's
 * configure migrated 5.2x as often as under the default scheduler.
 * Kernel threads and pinned tasks keep no CPU (nest_task_sleeping()),
 * and forks take kept CPUs like any idle one (nest_select_cpu()).
 * Kernel threads, in turn, never take a kept CPU in the nests, nor the
 * CPU fork reuse holds for the next fork (held_for_other()): they go to
 * the fallback, which takes their previous CPU when it is idle, as the
 * fair scheduler does. Kernel threads (rcu_preempt, woken every few ms,
 * five times; kcompactd once) took the CPU the placement test's chain was
 * about to use in 6 of its 8 moves over three runs with two host hogs: a
 * CPU claimed under emulation stays claimed for about 1 ms before its
 * task runs (docs/scheduler.md).
 *
 * A CPU taken offline (CPU hotplug) leaves both nests and is never claimed
 * nor admitted to a nest until it comes back online; it then has to earn
 * its place again like any other CPU.
 *
 * The includer defines the platform interface (see nest_policy.h), the
 * integer types, bool, READ_ONCE/WRITE_ONCE and bpf_for() first, and calls
 * the nest_* entry points at the end of this file with a struct nest_ctx.
 */
#include "nest_policy.h"

/*
 * Everything one policy call works with. BPF functions take at most five
 * arguments, so the shared pieces travel together.
 */
struct nest_ctx {
	struct nest_state *st;
	const struct nest_config *cfg;
	nest_env_t env;
	/* Time of the call, in ns. */
	u64 now;
};

static void count(const struct nest_ctx *ctx, enum nest_stat stat)
{
	plat_count(ctx->env, stat, 1);
}

static bool mech_on(const struct nest_config *cfg, u32 mech)
{
	return !(cfg->disabled & mech);
}

static bool cpu_valid(const struct nest_config *cfg, s32 cpu)
{
	return cpu >= 0 && cpu < NEST_MAX_CPUS && (u32)cpu < cfg->nr_cpus;
}

static u64 cpu_bit(s32 cpu)
{
	return 1ULL << (cpu & 63);
}

static bool mask_test(const u64 *mask, s32 cpu)
{
	return READ_ONCE(mask[(cpu / 64) & (NEST_MASK_WORDS - 1)]) & cpu_bit(cpu);
}

/* Set @cpu in @mask; true if it was not set before. */
static bool mask_set(u64 *mask, s32 cpu)
{
	u64 old = __sync_fetch_and_or(&mask[(cpu / 64) & (NEST_MASK_WORDS - 1)],
				      cpu_bit(cpu));

	return !(old & cpu_bit(cpu));
}

/* Clear @cpu in @mask; true if it was set before. */
static bool mask_clear(u64 *mask, s32 cpu)
{
	u64 old = __sync_fetch_and_and(&mask[(cpu / 64) & (NEST_MASK_WORDS - 1)],
				       ~cpu_bit(cpu));

	return old & cpu_bit(cpu);
}

/*
 * Hides @x's value from the compiler, so that a mask applied after it
 * stays even where the compiler has proved it a no-op.
 */
#define nest_opaque(x) asm volatile("" : "+r"(x))

/*
 * Array indexes are masked after the range check: the BPF verifier does not
 * always see a signed range check survive compiler optimisation, but it
 * always understands a mask. The mask must survive too: where the compiler
 * knows the range (a CPU computed from a pinned queue's number) it drops
 * both the check and the mask, and 6.12's verifier, which tracks that
 * range less closely than 7.x's, then refuses the access.
 */
static u32 cpu_index(s32 cpu)
{
	u32 index = cpu;

	nest_opaque(index);
	return index & (NEST_MAX_CPUS - 1);
}

static struct nest_cpu *nest_cpu(struct nest_state *st, s32 cpu)
{
	if (cpu < 0 || cpu >= NEST_MAX_CPUS)
		return NULL;
	return &st->cpus[cpu_index(cpu)];
}

static u32 cpu_llc(const struct nest_config *cfg, s32 cpu)
{
	if (cpu < 0 || cpu >= NEST_MAX_CPUS)
		return 0;
	return cfg->cpu_llc[cpu_index(cpu)];
}

/* LLC index @llc, masked for the verifier (see cpu_index()). */
static u32 llc_index(u32 llc)
{
	nest_opaque(llc);
	return llc & (NEST_MAX_LLCS - 1);
}

/* Is @cpu offline (CPU hotplug)? */
static bool cpu_offline(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	return !c || READ_ONCE(c->offline);
}

/*
 * Add @cpu to the reserve if it has room (an offline CPU is left out);
 * false if it was full.
 */
static bool reserve_add(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_state *st = ctx->st;

	if (cpu_offline(st, cpu))
		return true;
	if (__sync_fetch_and_add(&st->nr_reserve, 1) >= (s32)ctx->cfg->r_max) {
		__sync_fetch_and_add(&st->nr_reserve, -1);
		return false;
	}
	if (!mask_set(st->reserve, cpu))
		__sync_fetch_and_add(&st->nr_reserve, -1);
	return true;
}

static void reserve_remove(struct nest_state *st, s32 cpu)
{
	if (mask_clear(st->reserve, cpu))
		__sync_fetch_and_add(&st->nr_reserve, -1);
}

/*
 * Move @cpu from the primary nest to the reserve (or out of both nests when
 * the reserve is full). @why is the statistic to count.
 */
static void demote(const struct nest_ctx *ctx, s32 cpu, enum nest_stat why)
{
	if (!mask_clear(ctx->st->primary, cpu))
		return;
	count(ctx, why);
	if (mech_on(ctx->cfg, NEST_MECH_RESERVE) && !reserve_add(ctx, cpu))
		count(ctx, NEST_STAT_RESERVE_FULL);
}

static void promote(const struct nest_ctx *ctx, s32 cpu)
{
	reserve_remove(ctx->st, cpu);
	if (mask_set(ctx->st->primary, cpu))
		count(ctx, NEST_STAT_PROMOTED);
}

/*
 * Has primary CPU @cpu been idle for longer than P_remove, by the time it
 * went idle? A CPU another placement has claimed keeps its idle_since
 * until its task runs, but it is no longer idle: a task is on its way
 * there, and the host no longer reports it idle (plat_cpu_idle()).
 * Compacting it then would take a CPU about to run out of the nest. In
 * the 2x4x2 guest under load a claimed vCPU took 2-4 ms (median) to run
 * its task, and scans compacted such CPUs (docs/scheduler.md).
 */
static bool idle_past_p_remove(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u64 idle_since;

	if (!c || !mech_on(ctx->cfg, NEST_MECH_COMPACTION))
		return false;
	idle_since = READ_ONCE(c->idle_since);
	return idle_since && ctx->now > idle_since &&
	       ctx->now - idle_since > ctx->cfg->p_remove_ns;
}

static bool try_claim(const struct nest_ctx *ctx, s32 cpu)
{
	return !cpu_offline(ctx->st, cpu) && plat_task_allowed(ctx->env, cpu) &&
	       plat_claim_idle(ctx->env, cpu);
}

/* Options of a nest search. */
enum nest_search {
	/*
	 * The primary nest: CPUs idle longer than P_remove are not used, and
	 * are demoted as the published scan would (see scan_visit()).
	 */
	NEST_SEARCH_COMPACT = 1 << 0,
	/* Only CPUs whose SMT sibling is idle (whole idle cores). */
	NEST_SEARCH_WHOLE_CORE = 1 << 1,
	/* The task is impatient: skip the primary nest. */
	NEST_SEARCH_IMPATIENT = 1 << 2,
	/* A fork, with fork reuse on: try the last exit's CPU first. */
	NEST_SEARCH_FORK_REUSE = 1 << 3,
	/* A wake-up, with warm previous CPU on: try the previous CPU first. */
	NEST_SEARCH_WARM_PREV = 1 << 4,
	/* CPUs kept for sleeping tasks may be taken too (the published scan). */
	NEST_SEARCH_TAKE_KEPT = 1 << 5,
	/*
	 * A kernel thread, with the kept CPU on: it never takes a CPU held for
	 * another task in the nests (see held_for_other()).
	 */
	NEST_SEARCH_KTHREAD = 1 << 6,
};

/*
 * Is @cpu's SMT sibling running a task, or claimed for one (see
 * mark_running())? An absent or offline sibling is not.
 */
static bool sibling_busy(const struct nest_ctx *ctx, s32 cpu)
{
	s32 sibling = ctx->cfg->cpu_sibling[cpu_index(cpu)];
	struct nest_cpu *s = nest_cpu(ctx->st, sibling);

	return s && !READ_ONCE(s->offline) && READ_ONCE(s->running);
}

/*
 * A placement claimed @cpu: count it as running from now on, so that the
 * next placement (often a moment later, in a burst of wakeups) sees the
 * core as busy before the task gets there. nest_cpu_idle() clears it.
 */
static void mark_running(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	if (c)
		WRITE_ONCE(c->running, 1);
}

/* May a search with options @flags take idle @cpu? */
static bool try_claim_for(const struct nest_ctx *ctx, s32 cpu, u32 flags)
{
	if ((flags & NEST_SEARCH_WHOLE_CORE) && sibling_busy(ctx, cpu))
		return false;
	return try_claim(ctx, cpu);
}

/*
 * Is @cpu kept for a sleeping task other than @t (NULL: any task)? A keep
 * lasts P_remove at most: by then the CPU is as cold as the nests allow.
 */
static bool kept_for_other(const struct nest_ctx *ctx,
			   const struct nest_task *t, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u64 since;

	if (!c || !mech_on(ctx->cfg, NEST_MECH_KEEP_ATTACHED))
		return false;
	since = READ_ONCE(c->kept_since);
	if (!since || (s64)(ctx->now - since) > (s64)ctx->cfg->p_remove_ns)
		return false;
	return !t || t->kept_cpu != cpu || t->kept_at != since;
}

/*
 * Is @c idle, and has it been for at most P_remove: idle, but as recently
 * used as the primary nest's CPUs are?
 */
static bool idle_and_warm(const struct nest_ctx *ctx, const struct nest_cpu *c)
{
	u64 since = READ_ONCE(c->idle_since);

	return since && (s64)(ctx->now - since) <= (s64)ctx->cfg->p_remove_ns;
}

/*
 * Is @cpu the CPU fork reuse holds for the next fork: the one the last
 * task to exit in its LLC left, still idle and warm (idle_and_warm())?
 */
static bool held_for_fork(const struct nest_ctx *ctx, s32 cpu)
{
	const struct nest_exit *e =
		&ctx->st->last_exit[llc_index(cpu_llc(ctx->cfg, cpu))];
	const struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	return c && READ_ONCE(e->cpu) == cpu && READ_ONCE(e->idle_since) &&
	       idle_and_warm(ctx, c);
}

/* Does a search with enum nest_search options @flags leave @cpu to a fork? */
static bool left_for_fork(const struct nest_ctx *ctx, s32 cpu, u32 flags)
{
	return (flags & NEST_SEARCH_KTHREAD) &&
	       mech_on(ctx->cfg, NEST_MECH_FORK_REUSE) && held_for_fork(ctx, cpu);
}

/*
 * Is @cpu held for a task other than @t (NULL: any task), for a search
 * with enum nest_search options @flags? A CPU kept for a sleeping task is
 * held for every search; for a kernel thread (NEST_SEARCH_KTHREAD), so is
 * the CPU fork reuse holds for the next fork (see "Kept CPU" at the top of
 * this file).
 */
static bool held_for_other(const struct nest_ctx *ctx,
			   const struct nest_task *t, s32 cpu, u32 flags)
{
	return kept_for_other(ctx, t, cpu) || left_for_fork(ctx, cpu, flags);
}

/*
 * Could the published scan, blind to SMT siblings, take @cpu, which the
 * restricted pass skipped for its busy sibling? (Nothing is claimed.)
 */
static bool takeable_when_paired(const struct nest_ctx *ctx, s32 cpu)
{
	return !cpu_offline(ctx->st, cpu) && plat_task_allowed(ctx->env, cpu) &&
	       plat_cpu_idle(ctx->env, cpu);
}

/*
 * Visit @cpu, a member of the nest being scanned with enum nest_search
 * options @flags. Returns @cpu if it was claimed, else -1. A kernel
 * thread leaves the CPU held for the next fork (left_for_fork()).
 *
 * Compaction happens exactly where the published scan (unrestricted, which
 * stops at the first CPU it can take) would meet a CPU idle for longer than
 * P_remove. *@compact starts true; the restricted pass (whole cores first)
 * looks further than the published scan, so once it passes a CPU that scan
 * would have taken (idle but for its busy sibling) it clears *@compact and
 * only skips stale CPUs from then on: compacting them would shrink the
 * primary nest further than the published design does.
 */
static s32 scan_visit(const struct nest_ctx *ctx, s32 cpu, u32 flags,
		      bool *compact)
{
	if (left_for_fork(ctx, cpu, flags))
		return -1;
	if ((flags & NEST_SEARCH_COMPACT) && idle_past_p_remove(ctx, cpu)) {
		bool idle = plat_cpu_idle(ctx->env, cpu);

		if (idle && *compact)
			demote(ctx, cpu, NEST_STAT_COMPACTED);
		else
			count(ctx, idle ? NEST_STAT_STALE_SPARED :
					  NEST_STAT_STALE_CLAIMED);
		return -1;
	}
	if (try_claim_for(ctx, cpu, flags))
		return cpu;
	if (*compact && (flags & NEST_SEARCH_COMPACT) &&
	    (flags & NEST_SEARCH_WHOLE_CORE) && sibling_busy(ctx, cpu) &&
	    takeable_when_paired(ctx, cpu))
		*compact = false;
	return -1;
}

/*
 * How scan_nest() visits a CPU. A host may route the call through a
 * function of its own: BPF does, so that the verifier checks the visit
 * once instead of in every iteration of every scan it inlines.
 */
#ifndef NEST_SCAN_VISIT
#define NEST_SCAN_VISIT scan_visit
#endif

/* Number of trailing zero bits of @v, which is not 0. */
static u32 ctz64(u64 v)
{
#if !defined(__BPF__) || (defined(__clang_major__) && __clang_major__ >= 19)
	/* The BPF backend lowers the builtin from clang 19 on. */
	return __builtin_ctzll(v);
#else
	u32 n = 0;

	if (!(v & 0xffffffffULL)) {
		n += 32;
		v >>= 32;
	}
	if (!(v & 0xffffULL)) {
		n += 16;
		v >>= 16;
	}
	if (!(v & 0xffULL)) {
		n += 8;
		v >>= 8;
	}
	if (!(v & 0xfULL)) {
		n += 4;
		v >>= 4;
	}
	if (!(v & 0x3ULL)) {
		n += 2;
		v >>= 2;
	}
	return n + !(v & 1);
#endif
}

/* The bits of mask word @w that stand for one of the @nr_cpus CPUs. */
static u64 word_cpus(s32 nr_cpus, s32 w)
{
	s32 left = nr_cpus > w * 64 ? nr_cpus - w * 64 : 0;

	return left >= 64 ? ~0ULL : (1ULL << left) - 1;
}

/* scan_nest() found no CPU, but passed over a CPU kept for a sleeper. */
#define NEST_SCAN_PASSED_KEPT (-2)

/* The nests, as scan_nest() names them. */
enum nest_set {
	NEST_SET_PRIMARY = 0,
	NEST_SET_RESERVE = 1,
};

/*
 * Scan nest @set for an idle CPU the task may use, starting at @start and
 * wrapping around: CPUs of LLC @llc first, then the others. @flags are
 * enum nest_search options. Returns the claimed CPU or -1.
 *
 * Only members are visited, word by word (a nest is small, the machine
 * may have 512 CPUs): the word of @start first from @start on, the next
 * words, wrapping, and last the bits of @start's word below @start. This is
 * the order of the CPU ids from @start, wrapping. Each word is read once
 * per pass: members that join during the scan are not seen, members that
 * leave are still tried (and the claim fails or takes an idle CPU as a
 * racing placement could).
 *
 * Unless NEST_SEARCH_TAKE_KEPT, CPUs kept for a sleeping task are passed
 * over (their owners find them in step 1); NEST_SCAN_PASSED_KEPT instead
 * of -1 says that one was. (Checked here, not in scan_visit(): the
 * visit's stack adds to every frame of the chain, and BPF allows 512
 * bytes.) A kernel thread's search also passes over the CPU held for the
 * next fork, in scan_visit(): checked here, it took scan_nest()'s frame
 * over that limit.
 */
static s32 scan_nest(const struct nest_ctx *ctx, enum nest_set set, s32 start,
		     u32 llc, u32 flags)
{
	const struct nest_config *cfg = ctx->cfg;
	u64 *mask = set == NEST_SET_RESERVE ? ctx->st->reserve : ctx->st->primary;
	s32 nr_cpus = cfg->nr_cpus < NEST_MAX_CPUS ? cfg->nr_cpus : NEST_MAX_CPUS;
	s32 nr_words = (nr_cpus + 63) / 64, first;
	bool compact = true, passed_kept = false;
	u64 from_start;
	s32 pass, i, b;

	if (!cpu_valid(cfg, start))
		start = 0;
	first = start / 64;
	from_start = ~0ULL << (start & 63);

	bpf_for(pass, 0, 2) {
		bpf_for(i, 0, nr_words + 1) {
			s32 w = first + i < nr_words ? first + i : first + i - nr_words;
			u64 bits = READ_ONCE(mask[w & (NEST_MASK_WORDS - 1)]) &
				   word_cpus(nr_cpus, w);

			if (i == 0)
				bits &= from_start;
			else if (i == nr_words)
				bits &= ~from_start;
			bpf_for(b, 0, 64) {
				s32 cpu;

				if (!bits)
					break;
				cpu = w * 64 + ctz64(bits);
				bits &= bits - 1;
				if ((cpu_llc(cfg, cpu) == llc) != (pass == 0))
					continue;
				if (!(flags & NEST_SEARCH_TAKE_KEPT) &&
				    kept_for_other(ctx, NULL, cpu)) {
					passed_kept = true;
					continue;
				}
				if (NEST_SCAN_VISIT(ctx, cpu, flags, &compact) < 0)
					continue;
				if (passed_kept)
					count(ctx, NEST_STAT_KEPT_SPARED);
				return cpu;
			}
		}
	}
	return passed_kept ? NEST_SCAN_PASSED_KEPT : -1;
}

/*
 * How search_nests() calls scan_nest(). A host may route the call through a
 * function of its own: BPF does (see NEST_SCAN_VISIT).
 */
#ifndef NEST_SCAN
#define NEST_SCAN scan_nest
#endif

/* The task's attached CPU: its last two CPUs when they are equal, or -1. */
static s32 attached_cpu(const struct nest_task *t)
{
	if (t->recent_cpu[0] >= 0 && t->recent_cpu[0] == t->recent_cpu[1])
		return t->recent_cpu[0];
	return -1;
}

static bool task_impatient(const struct nest_config *cfg,
			   const struct nest_task *t)
{
	return mech_on(cfg, NEST_MECH_IMPATIENCE) &&
	       t->prev_misses >= cfg->r_impatient;
}

/* Put a CPU found by the fallback into a nest. */
static void adopt_fallback_cpu(const struct nest_ctx *ctx, s32 cpu,
			       bool impatient)
{
	struct nest_state *st = ctx->st;

	if (!cpu_valid(ctx->cfg, cpu) || mask_test(st->primary, cpu) ||
	    cpu_offline(st, cpu))
		return;
	if (impatient || !mech_on(ctx->cfg, NEST_MECH_RESERVE)) {
		reserve_remove(st, cpu);
		mask_set(st->primary, cpu);
		count(ctx, NEST_STAT_JOINED_PRIMARY);
	} else if (mask_test(st->reserve, cpu)) {
		/* Already in the reserve: nothing to add. */
	} else if (reserve_add(ctx, cpu)) {
		count(ctx, NEST_STAT_JOINED_RESERVE);
	} else {
		count(ctx, NEST_STAT_RESERVE_FULL);
	}
}

/*
 * Fork reuse: claim the CPU the last exiting task of LLC @llc left, if it
 * still holds it for a fork (held_for_fork()); it is promoted to the
 * primary nest.
 * Returns the CPU or -1. Tasks may have run there since the exit: most
 * often the CPU's own kernel workers (per-CPU kworkers, rcu_preempt),
 * which ran there between the exit and the next fork in 31 of the 100
 * forks of one run of the placement test's chain in the guest; while the
 * rule asked for no task since, those forks went to another CPU.
 */
static s32 claim_exit_cpu(const struct nest_ctx *ctx, u32 llc, u32 flags)
{
	s32 cpu = READ_ONCE(ctx->st->last_exit[llc_index(llc)].cpu);

	if (!held_for_fork(ctx, cpu) || !try_claim_for(ctx, cpu, flags))
		return -1;
	promote(ctx, cpu);
	return cpu;
}

/* The task that ran on @cpu exited and @cpu went idle: remember it. */
static void note_exit_cpu(const struct nest_ctx *ctx, s32 cpu, u64 idle_since)
{
	struct nest_exit *e =
		&ctx->st->last_exit[llc_index(cpu_llc(ctx->cfg, cpu))];

	WRITE_ONCE(e->cpu, cpu);
	WRITE_ONCE(e->idle_since, idle_since);
}

/*
 * Warm previous CPU: claim @prev_cpu if it is outside the primary nest (a
 * primary one is the primary search's first visit) and went idle at most
 * P_remove ago; it is promoted to the primary nest. Returns it or -1.
 */
static s32 claim_warm_prev(const struct nest_ctx *ctx, s32 prev_cpu, u32 flags)
{
	struct nest_cpu *c = nest_cpu(ctx->st, prev_cpu);

	if (!c || mask_test(ctx->st->primary, prev_cpu) ||
	    !idle_and_warm(ctx, c) || !try_claim_for(ctx, prev_cpu, flags))
		return -1;
	promote(ctx, prev_cpu);
	return prev_cpu;
}

/*
 * Step 2, the primary nest's scan from @prev_cpu, with enum nest_search
 * options @flags. Returns scan_nest()'s answer; *how says which step
 * found the CPU.
 */
static s32 scan_primary(const struct nest_ctx *ctx, s32 prev_cpu, u32 llc,
			u32 flags, u32 *how)
{
	s32 cpu = NEST_SCAN(ctx, NEST_SET_PRIMARY, prev_cpu, llc, flags);

	if (cpu >= 0)
		*how = cpu == prev_cpu ? NEST_STAT_PREV : NEST_STAT_PRIMARY;
	return cpu;
}

/*
 * Steps 1 to 3: the nests, with enum nest_search options @flags. Returns the
 * claimed CPU or -1. A CPU kept for another, sleeping task (see "Kept CPU"
 * at the top of this file) is taken only when the nests have no other.
 */
static s32 search_nests(const struct nest_ctx *ctx, struct nest_task *t,
			s32 prev_cpu, u32 flags, u32 *how)
{
	const struct nest_config *cfg = ctx->cfg;
	struct nest_state *st = ctx->st;
	u32 llc = cpu_llc(cfg, prev_cpu);
	s32 cpu = attached_cpu(t);
	bool passed_kept = false;

	if (mech_on(cfg, NEST_MECH_ATTACH) && cpu_valid(cfg, cpu) &&
	    mask_test(st->primary, cpu) && !held_for_other(ctx, t, cpu, flags) &&
	    try_claim_for(ctx, cpu, flags)) {
		*how = NEST_STAT_ATTACHED;
		return cpu;
	}

	if (flags & NEST_SEARCH_FORK_REUSE) {
		cpu = claim_exit_cpu(ctx, llc, flags);
		if (cpu >= 0) {
			*how = NEST_STAT_FORK_REUSE;
			return cpu;
		}
	}

	if ((flags & NEST_SEARCH_WARM_PREV) &&
	    !held_for_other(ctx, t, prev_cpu, flags)) {
		cpu = claim_warm_prev(ctx, prev_cpu, flags);
		if (cpu >= 0) {
			*how = NEST_STAT_WARM_PREV;
			return cpu;
		}
	}

	if (!(flags & NEST_SEARCH_IMPATIENT)) {
		cpu = scan_primary(ctx, prev_cpu, llc, flags | NEST_SEARCH_COMPACT,
				   how);
		if (cpu >= 0)
			return cpu;
		passed_kept = cpu == NEST_SCAN_PASSED_KEPT;
	}

	if (mech_on(cfg, NEST_MECH_RESERVE)) {
		cpu = NEST_SCAN(ctx, NEST_SET_RESERVE, cfg->reserve_start, llc,
				flags & ~NEST_SEARCH_COMPACT);
		if (cpu >= 0) {
			promote(ctx, cpu);
			if (passed_kept)
				count(ctx, NEST_STAT_KEPT_SPARED);
			*how = NEST_STAT_RESERVE;
			return cpu;
		}
	}

	/*
	 * Nothing else idle in the nests: the kept primary CPU after all. (A
	 * kept reserve CPU, rare, is left to the fallback, and so is a kernel
	 * thread.)
	 */
	if (!passed_kept || (flags & NEST_SEARCH_KTHREAD))
		return -1;
	cpu = scan_primary(ctx, prev_cpu, llc, flags | NEST_SEARCH_TAKE_KEPT,
			   how);
	if (cpu >= 0)
		count(ctx, NEST_STAT_KEPT_TAKEN);
	return cpu;
}

/* Step 4, first part: the host's default placement. */
static s32 search_default(const struct nest_ctx *ctx, s32 prev_cpu,
			  bool whole_core, u32 *how)
{
	bool idle = false;
	s32 cpu = plat_default_cpu(ctx->env, prev_cpu, whole_core, &idle);

	if (!idle)
		return -1;
	*how = NEST_STAT_FALLBACK;
	return cpu;
}

/*
 * Claim an idle CPU for a task that is queued without a placement, e.g.
 * after preemption: the nests (steps 1 to 3), whole cores first: the nests
 * and then the default placement are asked for a whole idle core before
 * the nests are searched for any idle CPU; beyond that the host decides.
 * Returns -1 if none; the task's impatience and the nests are left alone.
 */
static s32 nest_claim_for_queued(const struct nest_ctx *ctx,
				 struct nest_task *t, s32 prev_cpu)
{
	u32 how;
	s32 cpu = -1;

	if (!plat_any_idle(ctx->env))
		return -1;
	if (mech_on(ctx->cfg, NEST_MECH_WHOLE_CORES)) {
		cpu = search_nests(ctx, t, prev_cpu, NEST_SEARCH_WHOLE_CORE,
				   &how);
		if (cpu < 0)
			cpu = search_default(ctx, prev_cpu, true, &how);
	}
	if (cpu < 0)
		cpu = search_nests(ctx, t, prev_cpu, 0, &how);
	if (cpu >= 0)
		mark_running(ctx->st, cpu);
	return cpu;
}

/* Step 4, last resort: any idle CPU on any socket (work conservation). */
static s32 search_wide(const struct nest_ctx *ctx, u32 *how)
{
	s32 cpu;

	if (!mech_on(ctx->cfg, NEST_MECH_WIDE_FALLBACK))
		return -1;
	cpu = plat_pick_any_idle(ctx->env);
	if (cpu >= 0)
		*how = NEST_STAT_FALLBACK_WIDE;
	return cpu;
}

/*
 * Steps 1 to 4 in order, after the same steps restricted to whole idle cores
 * (see "Whole cores first" at the top of this file). Returns the claimed
 * CPU or -1; *how says which step found it.
 */
static s32 search_all(const struct nest_ctx *ctx, struct nest_task *t,
		      s32 prev_cpu, u32 flags, u32 *how)
{
	s32 cpu;

	/*
	 * Nothing the task may use is idle: every step would come back
	 * empty-handed (compaction only demotes idle CPUs). Under overload,
	 * which is most placements then, the scans and the host's idle
	 * searches are skipped at once.
	 */
	if (!plat_any_idle(ctx->env))
		return -1;
	if (mech_on(ctx->cfg, NEST_MECH_WHOLE_CORES)) {
		cpu = search_nests(ctx, t, prev_cpu,
				   flags | NEST_SEARCH_WHOLE_CORE, how);
		if (cpu >= 0)
			return cpu;
		cpu = search_default(ctx, prev_cpu, true, how);
		if (cpu >= 0)
			return cpu;
	}
	cpu = search_nests(ctx, t, prev_cpu, flags, how);
	if (cpu >= 0)
		return cpu;
	cpu = search_default(ctx, prev_cpu, false, how);
	if (cpu >= 0)
		return cpu;
	return search_wide(ctx, how);
}

/*
 * Impatience bookkeeping after a placement of the task described by @t,
 * whose previous CPU is @prev_cpu, got @cpu (-1: none). The task was
 * impatient for this placement if @impatient.
 */
static void count_prev_miss(const struct nest_ctx *ctx, struct nest_task *t,
			    s32 prev_cpu, s32 cpu, bool impatient)
{
	if (impatient || cpu == prev_cpu)
		t->prev_misses = 0;
	else if (mech_on(ctx->cfg, NEST_MECH_IMPATIENCE) &&
		 cpu_valid(ctx->cfg, prev_cpu) &&
		 !plat_cpu_idle(ctx->env, prev_cpu))
		t->prev_misses++;
}

/*
 * Choose a CPU for the task described by @t, whose previous CPU (on fork:
 * the parent's CPU) is @prev_cpu. Fills @out; out->idle tells whether an
 * idle CPU was claimed (otherwise the task should be queued).
 */
static void nest_select_cpu(const struct nest_ctx *ctx, struct nest_task *t,
			    s32 prev_cpu, struct nest_choice *out)
{
	/* A fork has no previous CPU of its own: no impatience either way. */
	bool fork = plat_is_fork(ctx->env);
	bool impatient = !fork && task_impatient(ctx->cfg, t);
	u32 how = NEST_STAT_NO_IDLE, flags = 0;
	s32 cpu;

	if (impatient) {
		count(ctx, NEST_STAT_IMPATIENT);
		flags |= NEST_SEARCH_IMPATIENT;
	}
	if (fork && mech_on(ctx->cfg, NEST_MECH_FORK_REUSE))
		flags |= NEST_SEARCH_FORK_REUSE;
	/*
	 * A fork may take a kept CPU like any idle one (see "Kept CPU"): in
	 * GNU hello's configure the waiting ancestors (configure, its
	 * subshell, gcc) each kept a CPU, and their descendants' forks,
	 * passed over them, spread beyond the nests.
	 */
	if (fork)
		flags |= NEST_SEARCH_TAKE_KEPT;
	if ((t->traits & NEST_TASK_KTHREAD) &&
	    mech_on(ctx->cfg, NEST_MECH_KEEP_ATTACHED))
		flags |= NEST_SEARCH_KTHREAD;
	if (!fork && !impatient && mech_on(ctx->cfg, NEST_MECH_WARM_PREV))
		flags |= NEST_SEARCH_WARM_PREV;

	cpu = search_all(ctx, t, prev_cpu, flags, &how);
	if (how == NEST_STAT_FALLBACK || how == NEST_STAT_FALLBACK_WIDE)
		adopt_fallback_cpu(ctx, cpu, impatient);
	if (cpu >= 0)
		mark_running(ctx->st, cpu);
	count(ctx, how);

	if (!fork)
		count_prev_miss(ctx, t, prev_cpu, cpu, impatient);

	out->idle = cpu >= 0;
	out->cpu = cpu >= 0 ? cpu : prev_cpu;
	out->how = how;
	out->defer_cpu = -1;
	out->defer_ns = 0;
}

/* End @cpu's warm spin, counting why (@why) and how long it lasted. */
static void end_spin(const struct nest_ctx *ctx, struct nest_cpu *c,
		     enum nest_stat why)
{
	u64 until = c->spin_until, start = c->idle_since;
	u64 end = ctx->now < until ? ctx->now : until;

	c->spin_until = 0;
	count(ctx, why);
	if (start && end > start)
		plat_count(ctx->env, NEST_STAT_SPIN_NS, end - start);
}

/*
 * The task described by @t went to sleep on @cpu (it blocked: not
 * preempted, not exiting). If it is attached to @cpu, the CPU is kept for
 * it (see "Kept CPU" at the top of this file); no other task keeps it
 * then, since @t's running there ended any earlier keep. Kernel threads
 * and pinned tasks keep nothing: a pinned task goes to its CPU anyway,
 * and per-CPU kworkers, ksoftirqd and rcu_preempt, which sleep between
 * short bursts, kept the CPUs of GNU hello's configure from its own tasks
 * (in 947 of its wake-ups that left an idle previous CPU, against 85
 * without the rule).
 */
static void nest_task_sleeping(const struct nest_ctx *ctx, struct nest_task *t,
			       s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u64 now = ctx->now ? ctx->now : 1;

	if (!c || !mech_on(ctx->cfg, NEST_MECH_KEEP_ATTACHED) ||
	    !mech_on(ctx->cfg, NEST_MECH_ATTACH) || attached_cpu(t) != cpu ||
	    (t->traits & (NEST_TASK_KTHREAD | NEST_TASK_PINNED)))
		return;
	t->kept_cpu = cpu;
	t->kept_at = now;
	WRITE_ONCE(c->kept_since, now);
}

/*
 * The task described by @t runs again: the CPU it kept, if it still keeps
 * it, is free for others. Only the CPU's own stopping task sets a keep,
 * so the compare-and-swap only loses to a newer keep, which stays.
 */
static void release_kept_cpu(struct nest_state *st, struct nest_task *t)
{
	struct nest_cpu *c = nest_cpu(st, t->kept_cpu);

	if (c && t->kept_at)
		__sync_val_compare_and_swap(&c->kept_since, t->kept_at, 0);
	t->kept_cpu = -1;
	t->kept_at = 0;
}

/* The task described by @t started running on @cpu. */
static void nest_task_running(const struct nest_ctx *ctx, struct nest_task *t,
			      s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	release_kept_cpu(ctx->st, t);
	t->recent_cpu[1] = t->recent_cpu[0];
	t->recent_cpu[0] = cpu;
	t->move_to = -1;
	if (!c)
		return;
	/* Whoever kept this CPU lost it to @t (see "Kept CPU"). */
	WRITE_ONCE(c->kept_since, 0);
	if (c->spin_until)
		end_spin(ctx, c, NEST_STAT_SPIN_WORK);
	WRITE_ONCE(c->idle_since, 0);
	WRITE_ONCE(c->task_exited, 0);
	WRITE_ONCE(c->running, 1);
	WRITE_ONCE(c->paired_ticks, 0);
}

/* Ticks a task shares its core before nest_tick_unpair() moves it. */
#define NEST_PAIRED_TICKS 2

/*
 * Scheduler tick of @cpu, which runs a task. Whole cores first, over time:
 * true when the task has shared its physical core with a busy SMT sibling
 * for NEST_PAIRED_TICKS ticks in a row; the host then re-places it (whole
 * cores first) if a whole idle core exists. This catches pairs placement
 * could not avoid, e.g. threads created while their parent still ran on
 * the core that is idle now: CPU-bound threads never sleep, so nothing
 * else would ever re-place them.
 */
static bool nest_tick_unpair(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u32 ticks;

	if (!c || !mech_on(ctx->cfg, NEST_MECH_WHOLE_CORES))
		return false;
	if (!sibling_busy(ctx, cpu)) {
		WRITE_ONCE(c->paired_ticks, 0);
		return false;
	}
	ticks = READ_ONCE(c->paired_ticks) + 1;
	WRITE_ONCE(c->paired_ticks, ticks < NEST_PAIRED_TICKS ? ticks : 0);
	return ticks >= NEST_PAIRED_TICKS;
}

/* The task running on @cpu is exiting. */
static void nest_task_exiting(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	if (c)
		WRITE_ONCE(c->task_exited, 1);
}

/* Should idle @cpu keep warm? Primary CPUs do, unless the sibling runs. */
static bool spin_wanted(const struct nest_ctx *ctx, s32 cpu)
{
	return mech_on(ctx->cfg, NEST_MECH_WARM_SPIN) && ctx->cfg->s_max_ns &&
	       mask_test(ctx->st->primary, cpu) && !sibling_busy(ctx, cpu);
}

/*
 * @cpu went idle at ctx->now. If the last task to run there exited, the CPU
 * leaves the primary nest at once. Returns true when the CPU should start
 * warm spinning: the host then keeps it executing, calling
 * nest_spin_continue() until that returns false, and ends the spin at once
 * when a task arrives (nest_task_running()).
 *
 * Repeated calls without a task running in between (some kernels report
 * idle again on every pass through the idle loop) change nothing.
 */
static bool nest_cpu_idle(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (!c || READ_ONCE(c->idle_since))
		return false;
	WRITE_ONCE(c->running, 0);
	WRITE_ONCE(c->idle_since, ctx->now ? ctx->now : 1);
	if (READ_ONCE(c->task_exited)) {
		WRITE_ONCE(c->task_exited, 0);
		note_exit_cpu(ctx, cpu, READ_ONCE(c->idle_since));
		if (mech_on(ctx->cfg, NEST_MECH_EXIT_DEMOTION))
			demote(ctx, cpu, NEST_STAT_EXIT_DEMOTED);
	}
	if (!spin_wanted(ctx, cpu))
		return false;
	/*
	 * A CPU can still be in the primary nest when it goes offline (a
	 * placement that checked the flag just before promoted it). It must
	 * not spin: a spin is kept going by kicks, and sched_ext's host
	 * drops the kicks of a CPU going offline (kick_cpu() in scx_nest).
	 */
	if (cpu_offline(ctx->st, cpu)) {
		count(ctx, NEST_STAT_SPIN_OFFLINE);
		return false;
	}
	c->spin_until = ctx->now + ctx->cfg->s_max_ns;
	count(ctx, NEST_STAT_SPIN_STARTED);
	return true;
}

/*
 * Idle @cpu is spinning and found no work: should it go on? It stops after
 * S_max, when its SMT sibling runs a task (the sibling keeps the core warm),
 * when it left the primary nest or when it is going offline (see
 * nest_cpu_idle()).
 */
static bool nest_spin_continue(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (!c || !c->spin_until)
		return false;
	if (cpu_offline(ctx->st, cpu))
		end_spin(ctx, c, NEST_STAT_SPIN_OFFLINE);
	else if (!mask_test(ctx->st->primary, cpu))
		end_spin(ctx, c, NEST_STAT_SPIN_DEMOTED);
	else if (sibling_busy(ctx, cpu))
		end_spin(ctx, c, NEST_STAT_SPIN_SIBLING);
	else if (ctx->now >= c->spin_until)
		end_spin(ctx, c, NEST_STAT_SPIN_EXPIRED);
	else
		return true;
	return false;
}

/*
 * A task of another scheduling class (fair or real-time, in partial mode)
 * took @cpu: it is busy for the nests, for spinning and for its SMT
 * sibling until it next goes idle (nest_cpu_idle()). A spin in progress
 * ends.
 */
static void nest_cpu_busy(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (!c)
		return;
	if (c->spin_until)
		end_spin(ctx, c, NEST_STAT_SPIN_WORK);
	WRITE_ONCE(c->idle_since, 0);
	WRITE_ONCE(c->running, 1);
}

/* Is @cpu warm spinning? */
static bool nest_cpu_spinning(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	return c && READ_ONCE(c->spin_until);
}

/* A new task: it has run nowhere yet. */
static void nest_task_init(struct nest_task *t)
{
	t->recent_cpu[0] = -1;
	t->recent_cpu[1] = -1;
	t->prev_misses = 0;
	t->move_to = -1;
	t->move_at = 0;
	t->vtime = 0;
	t->run_start = 0;
	t->vtime_llc = NEST_LLC_NONE;
	t->queue = NEST_QUEUE_NONE;
	t->kept_cpu = -1;
	t->traits = 0;
	t->kept_at = 0;
}

/*
 * @cpu went offline: it leaves both nests (which ends a warm spin at its
 * next nest_spin_continue()) and is never chosen again until
 * nest_cpu_online(). The flag is set first (an atomic, so ordered before the
 * mask updates); a placement that read the flag just before may still put
 * the CPU back into a nest, but try_claim() checks the flag, so such a
 * stale member is never chosen.
 */
static void nest_cpu_offline(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	if (!c)
		return;
	__sync_fetch_and_or(&c->offline, 1);
	mask_clear(st->primary, cpu);
	reserve_remove(st, cpu);
}

/*
 * Start with idle @cpu in the primary nest (@primary) or the reserve, idle
 * from ctx->now on: a simulation that replays a recorded schedule from the
 * nests scx_nest had when the recording started. It had been idle for
 * @idle_ns then: a primary CPU idle for longer than P_remove is compacted
 * at once, as the next scan visiting it would. The reserve keeps its bound
 * (R_max). Not in scx_nest, whose nests start empty.
 */
#ifndef __BPF__
static void nest_seed_cpu(const struct nest_ctx *ctx, s32 cpu, bool primary,
			  u64 idle_ns)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (!c || !cpu_valid(ctx->cfg, cpu) || cpu_offline(ctx->st, cpu))
		return;
	if (primary && idle_ns > ctx->cfg->p_remove_ns &&
	    mech_on(ctx->cfg, NEST_MECH_COMPACTION))
		primary = false;
	if (primary) {
		reserve_remove(ctx->st, cpu);
		mask_set(ctx->st->primary, cpu);
	} else if (!mask_test(ctx->st->primary, cpu)) {
		reserve_add(ctx, cpu);
	}
	WRITE_ONCE(c->idle_since, ctx->now ? ctx->now : 1);
}
#endif

/*
 * @cpu came (back) online: usable again, in no nest until it is found. What
 * it was doing when it went down (idle, spinning, running) is forgotten.
 */
static void nest_cpu_online(struct nest_state *st, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(st, cpu);

	if (!c)
		return;
	WRITE_ONCE(c->idle_since, 0);
	WRITE_ONCE(c->spin_until, 0);
	WRITE_ONCE(c->task_exited, 0);
	WRITE_ONCE(c->running, 0);
	WRITE_ONCE(c->offline, 0);
}
