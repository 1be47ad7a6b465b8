/* SPDX-License-Identifier: GPL-2.0 */
/*
 * S_local and S_move (Gouicem et al., "Fewer Cores, More Hertz", USENIX
 * ATC 2020), the strategies Nest is compared with. Included after
 * nest_policy.c, whose helpers and struct nest_ctx it uses.
 *
 *   S_local: a forked or woken task goes on the waker's (parent's) CPU.
 *   S_move:  let c be the CPU of the host's default placement. If c ran
 *            above its minimum frequency at its last tick, use c. Otherwise
 *            queue the task on the waker's CPU and ask the host for a timer
 *            of D (nest_config.smove_delay_ns); if the task has not started
 *            running when it fires, move it to c.
 *
 * Timers are the host's: the decision only asks for one (nest_choice
 * defer_cpu/defer_ns) and the host calls nest_smove_timer() when it fires.
 * Nothing is ever cancelled: a task that runs forgets its pending move
 * (nest_task_running() or nest_smove_task_running()), so a late timer
 * finds nothing to do.
 */

/* Can the task being placed use @cpu? */
static bool cpu_usable(const struct nest_ctx *ctx, s32 cpu)
{
	return cpu_valid(ctx->cfg, cpu) && !cpu_offline(ctx->st, cpu) &&
	       plat_task_allowed(ctx->env, cpu);
}

static void place(const struct nest_ctx *ctx, struct nest_choice *out,
		  s32 cpu, u32 how)
{
	out->cpu = cpu;
	out->idle = 0;
	out->how = how;
	out->defer_cpu = -1;
	out->defer_ns = 0;
	count(ctx, how);
}

/*
 * S_local: the waker's CPU @waker_cpu (-1: no waker, e.g. a wakeup from an
 * interrupt; then the previous CPU). A CPU the task may not use is replaced
 * by the previous CPU too. Nothing is claimed: the task is queued there.
 */
static void nest_slocal_select(const struct nest_ctx *ctx, s32 waker_cpu,
			       s32 prev_cpu, struct nest_choice *out)
{
	s32 cpu = cpu_usable(ctx, waker_cpu) ? waker_cpu : prev_cpu;

	place(ctx, out, cpu, NEST_STAT_LOCAL);
}

/*
 * S_move for the task described by @t, woken (or forked) from @waker_cpu
 * (-1: none). out->idle tells whether out->cpu was claimed idle. When the
 * default CPU c is at its minimum frequency, out->cpu is the waker's CPU
 * and out->defer_cpu is c: c may have been claimed by plat_default_cpu(),
 * and a host whose claims last must release it.
 */
static void nest_smove_select(const struct nest_ctx *ctx, struct nest_task *t,
			      s32 waker_cpu, s32 prev_cpu,
			      struct nest_choice *out)
{
	bool idle = false;
	s32 c = plat_default_cpu(ctx->env, prev_cpu, false, &idle);

	t->move_to = -1;
	if (c == waker_cpu || !cpu_usable(ctx, waker_cpu)) {
		place(ctx, out, c,
		      c == waker_cpu ? NEST_STAT_LOCAL : NEST_STAT_DEFAULT);
		out->idle = idle;
		return;
	}
	if (plat_cpu_above_min(ctx->env, c)) {
		count(ctx, NEST_STAT_FREQ_ABOVE_MIN);
		place(ctx, out, c, NEST_STAT_DEFAULT);
		out->idle = idle;
		return;
	}
	count(ctx, NEST_STAT_FREQ_AT_MIN);
	place(ctx, out, waker_cpu, NEST_STAT_LOCAL);
	out->defer_cpu = c;
	out->defer_ns = ctx->cfg->smove_delay_ns;
	t->move_to = c;
	t->move_at = ctx->now + ctx->cfg->smove_delay_ns;
	count(ctx, NEST_STAT_TIMER_ARMED);
}

/*
 * The timer asked for by nest_smove_select() fired at ctx->now. Returns the
 * CPU to move the task to, or -1: it ran meanwhile, the timer is stale (a
 * later placement asked for a later one), or it may no longer use the CPU.
 */
static s32 nest_smove_timer(const struct nest_ctx *ctx, struct nest_task *t)
{
	s32 cpu = t->move_to;

	count(ctx, NEST_STAT_TIMER_FIRED);
	if (cpu < 0 || ctx->now < t->move_at)
		return -1;
	t->move_to = -1;
	if (!cpu_usable(ctx, cpu))
		return -1;
	count(ctx, NEST_STAT_MIGRATED);
	return cpu;
}

/* The task started running: any pending move is void. */
static void nest_smove_task_running(struct nest_task *t)
{
	t->move_to = -1;
}
