/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Frequency requests from the BPF host (policy/nest_perf.c, --perf):
 * ops.init(), ops.running(), ops.stopping() and ops.tick() each call one
 * function below, for every placement policy. Each runs on the CPU concerned with
 * its run queue locked, which is also the only CPU scx_bpf_cpuperf_set()
 * may be asked about there. The policy is fed the CPU's current
 * performance level (frequency invariance) and its request is passed on.
 *
 * scx_bpf_cpuperf_set() and scx_bpf_cpuperf_cur() came with Linux 6.11;
 * on a kernel without them nothing is requested (the kernel's default:
 * every CPU at SCX_CPUPERF_ONE). Included by main.bpf.c after
 * policy_ctx() and lookup_task().
 */
#ifndef __NEST_PERF_BPF_H
#define __NEST_PERF_BPF_H

/* @cpu's current performance level; NEST_PERF_ONE when unknown. */
static u32 perf_level(s32 cpu)
{
	u32 cur;

	if (!bpf_ksym_exists(scx_bpf_cpuperf_cur))
		return NEST_PERF_ONE;
	cur = scx_bpf_cpuperf_cur(cpu);
	return cur && cur <= NEST_PERF_ONE ? cur : NEST_PERF_ONE;
}

/* Pass the policy's request for @cpu (-1: none) to the kernel. */
static void perf_request_cpu(s32 cpu, s32 level)
{
	if (level >= 0 && bpf_ksym_exists(scx_bpf_cpuperf_set))
		scx_bpf_cpuperf_set(cpu, level);
}

/*
 * ops.init(): the kernel has set every CPU's target to SCX_CPUPERF_ONE; ask
 * for what an idle CPU needs (no run queue lock is held here, so any CPU
 * may be set).
 */
static void perf_init(void)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx;
	s32 cpu;

	if (!nest_perf_enabled(&nest_cfg))
		return;
	pctx = policy_ctx(&env);
	bpf_for(cpu, 0, nest_cfg.nr_cpus)
		perf_request_cpu(cpu, nest_perf_init_cpu(&pctx, cpu));
}

/* ops.running(): @p, whose context is @t, starts running. */
static void perf_running(struct task_struct *p, struct task_ctx *t)
{
	struct nest_bpf_env env = { .p = p };
	struct nest_ctx pctx;
	s32 cpu;

	if (!t || !nest_perf_enabled(&nest_cfg))
		return;
	pctx = policy_ctx(&env);
	cpu = scx_bpf_task_cpu(p);
	perf_request_cpu(cpu, nest_perf_running(&pctx, &t->nest, cpu,
						perf_level(cpu)));
}

/* ops.stopping(): @p stops running; for good if it is dead (task_dead()). */
static void perf_stopping(struct task_struct *p)
{
	struct nest_bpf_env env = { .p = p };
	struct task_ctx *t;
	struct nest_ctx pctx;
	s32 cpu;

	if (!nest_perf_enabled(&nest_cfg))
		return;
	t = lookup_task(p);
	if (!t)
		return;
	pctx = policy_ctx(&env);
	cpu = scx_bpf_task_cpu(p);
	perf_request_cpu(cpu, nest_perf_stopping(&pctx, &t->nest, cpu,
						 perf_level(cpu), task_dead(p)));
}

/* ops.tick(): the tick of the CPU running @p. */
static void perf_tick(struct task_struct *p)
{
	struct nest_bpf_env env = { .p = p };
	struct task_ctx *t;
	struct nest_ctx pctx;
	s32 cpu;

	if (!nest_perf_enabled(&nest_cfg))
		return;
	t = lookup_task(p);
	if (!t)
		return;
	pctx = policy_ctx(&env);
	cpu = scx_bpf_task_cpu(p);
	perf_request_cpu(cpu, nest_perf_tick(&pctx, &t->nest, cpu,
					     perf_level(cpu)));
}

#endif /* __NEST_PERF_BPF_H */
