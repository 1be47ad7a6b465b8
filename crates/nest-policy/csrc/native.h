/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The native host's interface: the types policy/nest_policy.h expects from
 * its includer, and the nest_native_* entry points of native.c. Read by
 * native.c, so the C compiler checks these declarations against the
 * definitions, and by bindgen (build.rs), which generates the Rust side
 * from it: nothing here is mirrored by hand.
 */
#ifndef __NEST_NATIVE_H
#define __NEST_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t u32;
typedef int32_t s32;
typedef uint64_t u64;
typedef int64_t s64;
typedef void *nest_env_t;

#include "nest_policy.h"

void nest_native_select_cpu(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t, s32 prev_cpu,
			    struct nest_choice *out);
s32 nest_native_claim_for_queued(struct nest_state *st,
				 const struct nest_config *cfg, nest_env_t env,
				 u64 now, struct nest_task *t, s32 prev_cpu);
void nest_native_task_init(struct nest_task *t);
void nest_native_task_running(struct nest_state *st,
			      const struct nest_config *cfg, nest_env_t env,
			      u64 now, struct nest_task *t, s32 cpu);
void nest_native_task_exiting(struct nest_state *st, s32 cpu);
void nest_native_task_sleeping(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       u64 now, struct nest_task *t, s32 cpu);
bool nest_native_cpu_idle(struct nest_state *st, const struct nest_config *cfg,
			  nest_env_t env, s32 cpu, u64 now);
bool nest_native_spin_continue(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       s32 cpu, u64 now);
bool nest_native_tick_unpair(struct nest_state *st,
			     const struct nest_config *cfg, nest_env_t env,
			     s32 cpu);
bool nest_native_cpu_spinning(struct nest_state *st, s32 cpu);
void nest_native_cpu_offline(struct nest_state *st, s32 cpu);
void nest_native_cpu_online(struct nest_state *st, s32 cpu);
void nest_native_seed_cpu(struct nest_state *st, const struct nest_config *cfg,
			  u64 now, s32 cpu, bool primary, u64 idle_ns);
void nest_native_slocal_select(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       s32 waker_cpu, s32 prev_cpu,
			       struct nest_choice *out);
void nest_native_smove_select(struct nest_state *st,
			      const struct nest_config *cfg, nest_env_t env,
			      u64 now, struct nest_task *t, s32 waker_cpu,
			      s32 prev_cpu, struct nest_choice *out);
s32 nest_native_smove_timer(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t);
void nest_native_smove_task_running(struct nest_task *t);
u32 nest_native_task_weight(u32 weight, u32 cg_weight, u64 cg_runnable);
u32 nest_native_queue_llc(const struct nest_config *cfg, s32 prev_cpu);
void nest_native_task_queued(struct nest_state *st,
			     const struct nest_config *cfg, struct nest_task *t,
			     s32 queue);
s32 nest_native_queue_of(struct nest_state *st, const struct nest_config *cfg,
			 nest_env_t env, s32 cpu, bool pinned, bool front);
void nest_native_task_woken(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    u64 now, struct nest_task *t, s32 queue, u32 weight);
u64 nest_native_queue_vtime(struct nest_state *st,
			    const struct nest_config *cfg, nest_env_t env,
			    struct nest_task *t, s32 queue, u32 weight);
u64 nest_native_slice(struct nest_state *st, const struct nest_config *cfg,
		      nest_env_t env, s32 cpu);
void nest_native_sched_running(struct nest_state *st,
			       const struct nest_config *cfg, nest_env_t env,
			       u64 now, struct nest_task *t, s32 cpu,
			       u32 weight);
void nest_native_sched_stopping(struct nest_state *st,
				const struct nest_config *cfg, nest_env_t env,
				u64 now, struct nest_task *t, s32 cpu,
				u32 weight);
bool nest_native_wakeup_preempts(struct nest_state *st,
				 const struct nest_config *cfg, nest_env_t env,
				 u64 now, s32 cpu, u64 vtime);
bool nest_native_woken_runs_next(struct nest_state *st,
				  const struct nest_config *cfg, nest_env_t env,
				  s32 cpu, u64 vtime);
void nest_native_woken_preempts(struct nest_state *st,
				const struct nest_config *cfg, s32 cpu,
				bool pinned);
u32 nest_native_preempted_resumes(struct nest_state *st,
				  const struct nest_config *cfg, s32 cpu);
s32 nest_native_queue_to_consume(struct nest_state *st,
				 const struct nest_config *cfg,
				 nest_env_t env, s32 cpu);
bool nest_native_starving(u64 now, u64 queued_ns);
bool nest_native_starve_sweep_due(u64 now, u64 *sweep_at);
void nest_native_starve_rescued(u64 now, u64 *sweep_at);
bool nest_native_prev_keeps_cpu(struct nest_state *st,
				const struct nest_config *cfg, nest_env_t env,
				u64 now, s32 cpu, const struct nest_task *t,
				u32 weight, s32 queue);
bool nest_native_tick_kick(struct nest_state *st,
			   const struct nest_config *cfg, nest_env_t env,
			   s32 cpu);
void nest_native_cpu_busy(struct nest_state *st, const struct nest_config *cfg,
			  nest_env_t env, s32 cpu, u64 now);
s32 nest_native_perf_init_cpu(struct nest_state *st,
			       const struct nest_config *cfg, s32 cpu);
s32 nest_native_perf_running(struct nest_state *st,
			      const struct nest_config *cfg, u64 now,
			      struct nest_task *t, s32 cpu, u32 level);
s32 nest_native_perf_stopping(struct nest_state *st,
			       const struct nest_config *cfg, u64 now,
			       struct nest_task *t, s32 cpu, u32 level,
			       bool exiting);
s32 nest_native_perf_tick(struct nest_state *st, const struct nest_config *cfg,
			  u64 now, struct nest_task *t, s32 cpu, u32 level);
u32 nest_native_perf_util(struct nest_state *st, s32 cpu);
u32 nest_native_perf_task_util(const struct nest_task *t);
u32 nest_native_perf_freq(u32 level);

#endif /* __NEST_NATIVE_H */
