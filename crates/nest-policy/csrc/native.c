/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The native host of the Nest policy: the platform interface is implemented
 * in Rust (crates/nest-policy/src/lib.rs) and reached through `env`, and the
 * policy's static functions are exported under nest_native_* names.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t u32;
typedef int32_t s32;
typedef uint64_t u64;
typedef void *nest_env_t;

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
bool nest_plat_is_fork(nest_env_t env);
bool nest_plat_cpu_idle(nest_env_t env, s32 cpu);

#define plat_claim_idle nest_plat_claim_idle
#define plat_task_allowed nest_plat_task_allowed
#define plat_default_cpu nest_plat_default_cpu
#define plat_pick_any_idle nest_plat_pick_any_idle
#define plat_count nest_plat_count
#define plat_cpu_above_min nest_plat_cpu_above_min
#define plat_is_fork nest_plat_is_fork
#define plat_cpu_idle nest_plat_cpu_idle

#include "nest_policy.c"
#include "smove_policy.c"

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

/* Sizes of the shared structures and the number of statistics, to check
 * the Rust mirrors against. */
size_t nest_native_sizeof(u32 which)
{
	switch (which) {
	case 0: return sizeof(struct nest_config);
	case 1: return sizeof(struct nest_state);
	case 2: return sizeof(struct nest_task);
	case 3: return sizeof(struct nest_choice);
	case 4: return NEST_NR_STATS;
	default: return 0;
	}
}
