/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Frequency requests, written once for every host. Included after
 * nest_policy.c, whose helpers and struct nest_ctx it uses.
 *
 * When a sched_ext scheduler is loaded the kernel sets every CPU's
 * performance target to SCX_CPUPERF_ONE, and schedutil reads that target
 * as the CPU's utilisation (all of it when every task is a sched_ext
 * task: sugov_get_util() in kernel/sched/cpufreq_schedutil.c). A scheduler
 * that never calls scx_bpf_cpuperf_set() therefore runs every CPU at full
 * speed under schedutil (NEST_PERF_MAX, the kernel's default).
 *
 * NEST_PERF_UTIL gives schedutil what the fair scheduler would have given
 * it: each CPU asks for its utilisation, tracked as PELT tracks it
 * (kernel/sched/pelt.c, kernel/sched/fair.c), in integers:
 *
 *   - a task's utilisation is a geometric average of the share of each
 *     period it ran, scaled by the frequency it ran at (frequency
 *     invariance: accumulate_sum() scales running time by
 *     arch_scale_freq_capacity(), which scx_bpf_cpuperf_cur() returns);
 *     1 ms periods, y^32 = 1/2 (the kernel's periods are 1024 us, so its
 *     half-life is 32.8 ms; 32 ms is what the simulator's Linux model
 *     uses), NEST_PELT_ONE = always running at maximum frequency;
 *   - a CPU's utilisation is the same average of the share of each period
 *     in which any task ran there (the cfs_rq's util_avg,
 *     __update_load_avg_cfs_rq()); a task that sleeps leaves its share
 *     there, decaying in place (blocked utilisation); a task that runs on
 *     another CPU takes its share with it (remove_entity_load_avg(): added
 *     to the old CPU's removed sum, which that CPU subtracts at its next
 *     update as update_cfs_rq_load_avg() does; attach_entity_load_avg() on
 *     the new CPU); an exiting task takes its share away the same way
 *     (task_dead_fair());
 *   - a new task starts with half its CPU's spare capacity, as that
 *     CPU's utilisation was last updated (post_init_entity_util_avg(),
 *     when the CPU's queue holds nothing else; its weighted share of the
 *     CPU's utilisation is not modelled).
 *
 * Not modelled: util_est (the utilisation a task had when it last slept),
 * uclamp, the iowait boost, and attaching on wakeup rather than when the
 * task first runs.
 *
 * The request is the utilisation, not 1.25 x utilisation: schedutil adds
 * its own 25% headroom to the sched_ext target (sugov_effective_cpu_perf()
 * -> map_util_perf()), so a CPU asking for util runs at
 * min(f_max, 1.25 x f_max x util / 1024), schedutil's rule
 * (nest_perf_freq()).
 *
 * NEST_PERF_NEST adds a floor, perf_floor, under the requests of primary
 * nest CPUs: the cores Nest keeps warm, and expects to use again within
 * P_remove, also ask for high frequency, as a warm core gets under HWP;
 * CPUs outside the primary nest follow their utilisation.
 *
 * The host calls nest_perf_init_cpu() for every CPU when it starts, and
 * nest_perf_running(), nest_perf_stopping() and nest_perf_tick() on the
 * CPU concerned (in BPF with its run queue
 * locked; only that CPU updates its utilisation) with the CPU's current
 * performance level (NEST_PERF_ONE: maximum), and passes the level they
 * return, unless negative, to scx_bpf_cpuperf_set().
 */

/* PELT period, ns. */
#define NEST_PELT_PERIOD_NS 1000000ULL
/* Fixed-point bits below the NEST_PERF_ONE scale in struct nest_pelt. */
#define NEST_PELT_SHIFT 10
#define NEST_PELT_ONE ((u64)NEST_PERF_ONE << NEST_PELT_SHIFT)

/*
 * y^n in 0.32 fixed point for n = 0..31, where y^32 = 1/2 (computed as
 * 2^32 x 2^(-n/32), rounded down; the kernel's runnable_avg_yN_inv[]).
 */
static const u32 pelt_y_n[32] = {
	0xffffffff, 0xfa83b2db, 0xf5257d15, 0xefe4b99b, 0xeac0c6e7, 0xe5b906e7,
	0xe0ccdeec, 0xdbfbb797, 0xd744fcca, 0xd2a81d91, 0xce248c15, 0xc9b9bd86,
	0xc5672a11, 0xc12c4cca, 0xbd08a39f, 0xb8fbaf47, 0xb504f333, 0xb123f581,
	0xad583eea, 0xa9a15ab4, 0xa5fed6a9, 0xa2704303, 0x9ef53260, 0x9b8d39b9,
	0x9837f051, 0x94f4efa8, 0x91c3d373, 0x8ea4398b, 0x8b95c1e3, 0x88980e80,
	0x85aac367, 0x82cd8698,
};

/* @val x y^@n (kernel: decay_load()). */
static u64 pelt_decay(u64 val, u64 n)
{
	if (n >= 32 * 32)
		return 0;
	val >>= n / 32;
	if (n & 31)
		val = (val * pelt_y_n[n & 31]) >> 32;
	return val;
}

/*
 * Advance @p to @now. Over the time since the last update the signal's
 * owner ran at performance level @level (0: it did not run). Periods that
 * ended meanwhile are folded into the average: avg' = y x avg + (1 - y) x
 * share (kernel: ___update_load_sum() and ___update_load_avg()).
 */
static void pelt_update(struct nest_pelt *p, u64 now, u32 level)
{
	u64 end, n, run, full, avg;

	if (!p->last) {
		p->period_start = now;
		/* Not 0 even at time 0, which would mean "never updated". */
		p->last = now ? now : 1;
		return;
	}
	if (now <= p->last)
		return;
	if (level > NEST_PERF_ONE)
		level = NEST_PERF_ONE;
	end = p->period_start + NEST_PELT_PERIOD_NS;
	if (now < end) {
		p->run += ((now - p->last) * level) >> NEST_PELT_SHIFT;
		p->last = now;
		return;
	}
	/* Close the current period... */
	run = p->run + (((end - p->last) * level) >> NEST_PELT_SHIFT);
	if (run > NEST_PELT_PERIOD_NS)
		run = NEST_PELT_PERIOD_NS;
	avg = pelt_decay(p->avg, 1) +
	      (NEST_PELT_ONE - pelt_decay(NEST_PELT_ONE, 1)) * run /
		      NEST_PELT_PERIOD_NS;
	/* ...then the whole periods after it. */
	n = (now - end) / NEST_PELT_PERIOD_NS;
	full = (NEST_PELT_ONE * level) >> NEST_PELT_SHIFT;
	avg = pelt_decay(avg, n) + full - pelt_decay(full, n);
	p->avg = avg < 0xffffffffULL ? avg : 0xffffffff;
	p->period_start = end + n * NEST_PELT_PERIOD_NS;
	p->run = ((now - p->period_start) * level) >> NEST_PELT_SHIFT;
	p->last = now;
}

/* A signal's value on the NEST_PERF_ONE scale, capped there. */
static u32 pelt_value(const struct nest_pelt *p)
{
	u32 v = p->avg >> NEST_PELT_SHIFT;

	return v < NEST_PERF_ONE ? v : NEST_PERF_ONE;
}

static struct nest_perf_cpu *perf_cpu(struct nest_state *st, s32 cpu)
{
	if (cpu < 0 || cpu >= NEST_MAX_CPUS)
		return NULL;
	return &st->perf[cpu_index(cpu)];
}

/* Bring @cpu's utilisation to now, minus what left it meanwhile. */
static void perf_cpu_update(const struct nest_ctx *ctx,
			    struct nest_perf_cpu *c, u32 level)
{
	u32 removed = READ_ONCE(c->removed);

	if (removed) {
		__sync_fetch_and_add(&c->removed, -removed);
		c->util.avg = c->util.avg > removed ? c->util.avg - removed : 0;
	}
	pelt_update(&c->util, ctx->now, c->running ? level : 0);
}

/*
 * The task's share leaves the CPU it was attached to, another CPU: that
 * CPU subtracts it at its next update. The share is taken as of that
 * CPU's last update, when the task's share in it was last aged
 * (sync_entity_load_avg()).
 */
static void perf_detach_remote(struct nest_state *st, struct nest_perf_task *pt)
{
	struct nest_perf_cpu *old = perf_cpu(st, pt->cpu);
	struct nest_pelt share = pt->util;
	u64 old_last;

	pt->attached = 0;
	if (!old)
		return;
	old_last = READ_ONCE(old->util.last);
	if (old_last > share.last)
		pelt_update(&share, old_last, 0);
	if (share.avg)
		__sync_fetch_and_add(&old->removed, share.avg);
}

/* The request for @cpu now, recorded for statistics. */
static s32 perf_request(const struct nest_ctx *ctx, struct nest_perf_cpu *c,
			s32 cpu)
{
	const struct nest_config *cfg = ctx->cfg;
	u32 level = pelt_value(&c->util);

	if (cfg->perf_mode == NEST_PERF_NEST && level < cfg->perf_floor &&
	    mask_test(ctx->st->primary, cpu))
		level = cfg->perf_floor < NEST_PERF_ONE ? cfg->perf_floor :
							  NEST_PERF_ONE;
	WRITE_ONCE(c->target, level);
	WRITE_ONCE(c->nr_requests, c->nr_requests + 1);
	return level;
}

/* Does the configuration ask for frequency requests at all? */
static bool nest_perf_enabled(const struct nest_config *cfg)
{
	return cfg->perf_mode == NEST_PERF_UTIL ||
	       cfg->perf_mode == NEST_PERF_NEST;
}

/*
 * The scheduler starts, and the kernel has set every CPU's target to
 * NEST_PERF_ONE: the request for @cpu, which has run nothing yet (its
 * utilisation is 0), or -1. Without it, a CPU that never runs a task of
 * ours would keep asking for the maximum.
 */
static s32 nest_perf_init_cpu(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_perf_cpu *c = perf_cpu(ctx->st, cpu);

	if (!nest_perf_enabled(ctx->cfg) || !c)
		return -1;
	return perf_request(ctx, c, cpu);
}

/*
 * The task described by @t starts running on @cpu, whose performance level
 * is @level. Returns the request for @cpu, or -1: none.
 */
static s32 nest_perf_running(const struct nest_ctx *ctx, struct nest_task *t,
			     s32 cpu, u32 level)
{
	struct nest_perf_cpu *c = perf_cpu(ctx->st, cpu);
	struct nest_perf_task *pt = &t->perf;
	bool new_task = !pt->util.last;
	u32 spare = 0;

	if (!nest_perf_enabled(ctx->cfg) || !c)
		return -1;
	/*
	 * post_init_entity_util_avg() reads the CPU's utilisation as last
	 * updated, before what left it meanwhile (e.g. the task that just
	 * exited there) is removed.
	 */
	if (new_task && c->util.avg < NEST_PELT_ONE)
		spare = NEST_PELT_ONE - c->util.avg;
	perf_cpu_update(ctx, c, level);
	/* Waiting or sleeping since its last update. */
	pelt_update(&pt->util, ctx->now, 0);
	if (new_task)
		pt->util.avg = spare / 2;
	if (pt->attached && pt->cpu != cpu)
		perf_detach_remote(ctx->st, pt);
	if (!pt->attached) {
		c->util.avg += pt->util.avg;
		pt->cpu = cpu;
		pt->attached = 1;
	}
	c->running = 1;
	return perf_request(ctx, c, cpu);
}

/*
 * The task described by @t stops running on @cpu (performance level
 * @level); @exiting: for good, its share leaves the CPU. Returns the
 * request for @cpu, or -1.
 */
static s32 nest_perf_stopping(const struct nest_ctx *ctx, struct nest_task *t,
			      s32 cpu, u32 level, bool exiting)
{
	struct nest_perf_cpu *c = perf_cpu(ctx->st, cpu);
	struct nest_perf_task *pt = &t->perf;

	if (!nest_perf_enabled(ctx->cfg) || !c)
		return -1;
	perf_cpu_update(ctx, c, level);
	pelt_update(&pt->util, ctx->now, level);
	c->running = 0;
	/* As task_dead_fair(): removed at the CPU's next update. */
	if (exiting && pt->attached && pt->cpu == cpu) {
		__sync_fetch_and_add(&c->removed, pt->util.avg);
		pt->attached = 0;
	}
	return perf_request(ctx, c, cpu);
}

/*
 * Scheduler tick of @cpu (performance level @level), running the task
 * described by @t. Returns the request for @cpu, or -1.
 */
static s32 nest_perf_tick(const struct nest_ctx *ctx, struct nest_task *t,
			  s32 cpu, u32 level)
{
	struct nest_perf_cpu *c = perf_cpu(ctx->st, cpu);

	if (!nest_perf_enabled(ctx->cfg) || !c)
		return -1;
	perf_cpu_update(ctx, c, level);
	pelt_update(&t->perf.util, ctx->now, level);
	return perf_request(ctx, c, cpu);
}

/*
 * The frequency, as a share of the maximum (NEST_PERF_ONE), that
 * schedutil picks for request @level: 1.25 x @level, capped
 * (sugov_effective_cpu_perf()).
 */
static inline u32 nest_perf_freq(u32 level)
{
	u32 f = level + (level >> 2);

	return f < NEST_PERF_ONE ? f : NEST_PERF_ONE;
}
