/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The native host of the Nest policy: the platform interface is implemented
 * in Rust (crates/nest-policy/src/lib.rs) and reached through `env`, and the
 * policy's static functions are exported under nest_native_* names.
 */
#include "native.h"

#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define bpf_for(i, start, end) for ((i) = (start); (i) < (end); (i)++)

/* Implemented in Rust. */
bool nest_plat_claim_idle(nest_env_t env, s32 cpu);
bool nest_plat_task_allowed(nest_env_t env, s32 cpu);
s32 nest_plat_default_cpu(nest_env_t env, s32 prev_cpu, bool whole_core,
			  bool *idle);
s32 nest_plat_pick_any_idle(nest_env_t env);
void nest_plat_count(nest_env_t env, u32 stat, u64 amount);
bool nest_plat_cpu_above_min(nest_env_t env, s32 cpu);
u32 nest_plat_llc_queued(nest_env_t env, u32 llc);
bool nest_plat_queue_head(nest_env_t env, s32 queue, u64 *vtime);
bool nest_plat_is_fork(nest_env_t env);
bool nest_plat_cpu_idle(nest_env_t env, s32 cpu);
bool nest_plat_any_idle(nest_env_t env);

#define plat_claim_idle nest_plat_claim_idle
#define plat_task_allowed nest_plat_task_allowed
#define plat_default_cpu nest_plat_default_cpu
#define plat_pick_any_idle nest_plat_pick_any_idle
#define plat_count nest_plat_count
#define plat_cpu_above_min nest_plat_cpu_above_min
#define plat_llc_queued nest_plat_llc_queued
#define plat_queue_head nest_plat_queue_head
#define plat_is_fork nest_plat_is_fork
#define plat_cpu_idle nest_plat_cpu_idle
#define plat_any_idle nest_plat_any_idle

#include "nest_policy.c"
#include "nest_sched.c"
#include "smove_policy.c"
#include "nest_perf.c"

void nest_native_select_cpu(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t, s32 prev_cpu,
			    struct nest_choice *out)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_select_cpu(&ctx, t, prev_cpu, out);
}

s32 nest_native_claim_for_queued(struct nest_state *st,
				 const struct nest_config *cfg, nest_env_t env,
				 u64 now, struct nest_task *t, s32 prev_cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_claim_for_queued(&ctx, t, prev_cpu);
}

void nest_native_task_init(struct nest_task *t)
{
	nest_task_init(t);
}

void nest_native_task_running(struct nest_state *st,
			      const struct nest_config *cfg, nest_env_t env,
			      u64 now, struct nest_task *t, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_task_running(&ctx, t, cpu);
}

void nest_native_task_exiting(struct nest_state *st, s32 cpu)
{
	nest_task_exiting(st, cpu);
}

void nest_native_task_sleeping(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       u64 now, struct nest_task *t, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_task_sleeping(&ctx, t, cpu);
}

bool nest_native_cpu_idle(struct nest_state *st, const struct nest_config *cfg,
			  nest_env_t env, s32 cpu, u64 now)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_cpu_idle(&ctx, cpu);
}

bool nest_native_spin_continue(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       s32 cpu, u64 now)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_spin_continue(&ctx, cpu);
}

bool nest_native_tick_unpair(struct nest_state *st,
			     const struct nest_config *cfg, nest_env_t env,
			     s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_tick_unpair(&ctx, cpu);
}

bool nest_native_cpu_spinning(struct nest_state *st, s32 cpu)
{
	return nest_cpu_spinning(st, cpu);
}

void nest_native_cpu_offline(struct nest_state *st, s32 cpu)
{
	nest_cpu_offline(st, cpu);
}

void nest_native_cpu_online(struct nest_state *st, s32 cpu)
{
	nest_cpu_online(st, cpu);
}

void nest_native_seed_cpu(struct nest_state *st, const struct nest_config *cfg,
			  u64 now, s32 cpu, bool primary, u64 idle_ns)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .now = now };

	nest_seed_cpu(&ctx, cpu, primary, idle_ns);
}

void nest_native_slocal_select(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       s32 waker_cpu, s32 prev_cpu,
			       struct nest_choice *out)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	nest_slocal_select(&ctx, waker_cpu, prev_cpu, out);
}

void nest_native_smove_select(struct nest_state *st,
			      const struct nest_config *cfg, nest_env_t env,
			      u64 now, struct nest_task *t, s32 waker_cpu,
			      s32 prev_cpu, struct nest_choice *out)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_smove_select(&ctx, t, waker_cpu, prev_cpu, out);
}

s32 nest_native_smove_timer(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_smove_timer(&ctx, t);
}

void nest_native_smove_task_running(struct nest_task *t)
{
	nest_smove_task_running(t);
}

u32 nest_native_task_weight(u32 weight, u32 cg_weight, u64 cg_runnable)
{
	return nest_task_weight(weight, cg_weight, cg_runnable);
}

u32 nest_native_queue_llc(const struct nest_config *cfg, s32 prev_cpu)
{
	struct nest_ctx ctx = { .cfg = cfg };

	return nest_queue_llc(&ctx, prev_cpu);
}

void nest_native_task_queued(struct nest_state *st,
			     const struct nest_config *cfg, struct nest_task *t,
			     s32 queue)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg };

	nest_task_queued(&ctx, t, queue);
}

s32 nest_native_queue_of(struct nest_state *st, const struct nest_config *cfg,
			 nest_env_t env, s32 cpu, bool pinned, bool front)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_queue_of(&ctx, cpu, pinned, front);
}

void nest_native_task_woken(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t, s32 queue, u32 weight)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_task_woken(&ctx, t, queue, weight);
}

u64 nest_native_queue_vtime(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    struct nest_task *t, s32 queue, u32 weight)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_queue_vtime(&ctx, t, queue, weight);
}

u64 nest_native_slice(struct nest_state *st, const struct nest_config *cfg,
		      nest_env_t env, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_slice(&ctx, cpu);
}

void nest_native_sched_running(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       u64 now, struct nest_task *t, s32 cpu,
			       u32 weight)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_sched_running(&ctx, t, cpu, weight);
}

void nest_native_sched_stopping(struct nest_state *st,
				const struct nest_config *cfg, nest_env_t env,
				u64 now, struct nest_task *t, s32 cpu,
				u32 weight)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_sched_stopping(&ctx, t, cpu, weight);
}

bool nest_native_wakeup_preempts(struct nest_state *st,
				 const struct nest_config *cfg, nest_env_t env,
				 u64 now, s32 cpu, u64 vtime)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_wakeup_preempts(&ctx, cpu, vtime);
}

bool nest_native_woken_runs_next(struct nest_state *st,
				  const struct nest_config *cfg, nest_env_t env,
				  s32 cpu, u64 vtime)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_woken_runs_next(&ctx, cpu, vtime);
}

void nest_native_woken_preempts(struct nest_state *st,
				const struct nest_config *cfg, s32 cpu,
				bool pinned)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg };

	nest_woken_preempts(&ctx, cpu, pinned);
}

u32 nest_native_preempted_resumes(struct nest_state *st,
				  const struct nest_config *cfg, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg };

	return nest_preempted_resumes(&ctx, cpu);
}

s32 nest_native_queue_to_consume(struct nest_state *st,
				 const struct nest_config *cfg,
				 nest_env_t env, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_queue_to_consume(&ctx, cpu);
}

bool nest_native_starving(u64 now, u64 queued_ns)
{
	struct nest_ctx ctx = { .now = now };

	return nest_starving(&ctx, queued_ns);
}

bool nest_native_starve_sweep_due(u64 now, u64 *sweep_at)
{
	struct nest_ctx ctx = { .now = now };

	return nest_starve_sweep_due(&ctx, sweep_at);
}

void nest_native_starve_rescued(u64 now, u64 *sweep_at)
{
	struct nest_ctx ctx = { .now = now };

	nest_starve_rescued(&ctx, sweep_at);
}

bool nest_native_prev_keeps_cpu(struct nest_state *st,
				const struct nest_config *cfg, nest_env_t env,
				u64 now, s32 cpu, const struct nest_task *t,
				u32 weight, s32 queue)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	return nest_prev_keeps_cpu(&ctx, cpu, t, weight, queue);
}

bool nest_native_tick_kick(struct nest_state *st,
			   const struct nest_config *cfg, nest_env_t env,
			   s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env };

	return nest_tick_kick(&ctx, cpu);
}

void nest_native_cpu_busy(struct nest_state *st, const struct nest_config *cfg,
			  nest_env_t env, s32 cpu, u64 now)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .env = env, .now = now };

	nest_cpu_busy(&ctx, cpu);
}

s32 nest_native_perf_init_cpu(struct nest_state *st,
			       const struct nest_config *cfg, s32 cpu)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg };

	return nest_perf_init_cpu(&ctx, cpu);
}

s32 nest_native_perf_running(struct nest_state *st,
			      const struct nest_config *cfg, u64 now,
			      struct nest_task *t, s32 cpu, u32 level)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .now = now };

	return nest_perf_running(&ctx, t, cpu, level);
}

s32 nest_native_perf_stopping(struct nest_state *st,
			       const struct nest_config *cfg, u64 now,
			       struct nest_task *t, s32 cpu, u32 level,
			       bool exiting)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .now = now };

	return nest_perf_stopping(&ctx, t, cpu, level, exiting);
}

s32 nest_native_perf_tick(struct nest_state *st, const struct nest_config *cfg,
			  u64 now, struct nest_task *t, s32 cpu, u32 level)
{
	struct nest_ctx ctx = { .st = st, .cfg = cfg, .now = now };

	return nest_perf_tick(&ctx, t, cpu, level);
}

u32 nest_native_perf_util(struct nest_state *st, s32 cpu)
{
	struct nest_perf_cpu *c = perf_cpu(st, cpu);

	return c ? pelt_value(&c->util) : 0;
}

u32 nest_native_perf_task_util(const struct nest_task *t)
{
	return pelt_value(&t->perf.util);
}

u32 nest_native_perf_freq(u32 level)
{
	return nest_perf_freq(level);
}
