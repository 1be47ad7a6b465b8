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
 * When nothing is idle the task is queued on one shared FIFO queue
 * (NEST_DSQ) that every CPU consumes from when it runs out of work, so no
 * CPU stays idle while a task it may run waits (work conservation).
 *
 * The policy learns what happens on the CPUs through four callbacks:
 * ops.running() (the task's recent CPUs; the CPU is busy),
 * ops.update_idle() (the CPU went idle or woke up: compaction age and
 * immediate demotion after an exit), and ops.stopping() of an exiting
 * task; and about CPU hotplug through ops.cpu_online()/ops.cpu_offline()
 * (an offline CPU leaves both nests). The kernel's built-in idle tracking
 * is kept (SCX_OPS_KEEP_BUILTIN_IDLE): the policy claims CPUs with
 * scx_bpf_test_and_clear_cpu_idle(), which is atomic, so two placements can
 * never take the same idle CPU.
 *
 * Tasks restricted to one CPU skip ops.select_cpu(); ops.enqueue() puts
 * them straight into that CPU's local queue.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "platform.bpf.h"
#include "nest_policy.c"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/*
 * Policy configuration, filled in by user space before loading. Not in
 * .rodata: the policy reads it through a plain const pointer, and a
 * zero-initialised const object read that way may be folded to zeros by
 * the compiler.
 */
struct nest_config nest_cfg;
/* Time slice of a task, in ns. */
const volatile u64 slice_ns = 4000000;
/*
 * Test-only: tasks whose comm equals this are never run, so that the
 * kernel's watchdog ejects the scheduler (negative control of the tests).
 */
const volatile char stall_comm[COMM_LEN];

/* The nests. Read by user space for statistics. */
struct nest_state nest_state;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct nest_task);
} task_ctx SEC(".maps");

static struct nest_ctx policy_ctx(struct nest_bpf_env *env)
{
	struct nest_ctx ctx = {
		.st = &nest_state,
		.cfg = &nest_cfg,
		.env = env,
		.now = scx_bpf_now(),
	};

	return ctx;
}

static struct nest_task *lookup_task(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctx, p, 0, 0);
}

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

s32 BPF_STRUCT_OPS(nest_select_cpu_op, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct nest_bpf_env env = { .p = p, .wake_flags = wake_flags };
	struct nest_ctx pctx = policy_ctx(&env);
	struct nest_choice choice = {};
	struct nest_task *t = lookup_task(p);

	if (!t || is_stall_target(p))
		return prev_cpu;

	nest_select_cpu(&pctx, t, prev_cpu, &choice);
	if (choice.idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	return choice.cpu;
}

/* Wake an idle CPU that may run @p, now queued on the shared queue. */
static void kick_idle_cpu(struct task_struct *p)
{
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		count_event(NEST_EV_KICKED);
	}
}

void BPF_STRUCT_OPS(nest_enqueue, struct task_struct *p, u64 enq_flags)
{
	if (is_stall_target(p)) {
		scx_bpf_dsq_insert(p, STALL_DSQ, slice_ns, enq_flags);
		count_event(NEST_EV_STALLED);
		return;
	}
	if (p->nr_cpus_allowed == 1) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
		count_event(NEST_EV_LOCAL);
		return;
	}
	scx_bpf_dsq_insert(p, NEST_DSQ, slice_ns, enq_flags);
	count_event(NEST_EV_QUEUED);
	/*
	 * A task placed by ops.select_cpu() found nothing idle a moment ago;
	 * any other (a preempted task, a wakeup that skipped select_cpu) may
	 * have idle CPUs around that will not look at the queue by themselves.
	 */
	if (!__COMPAT_is_enq_cpu_selected(enq_flags))
		kick_idle_cpu(p);
}

void BPF_STRUCT_OPS(nest_dispatch, s32 cpu, struct task_struct *prev)
{
	scx_bpf_dsq_move_to_local(NEST_DSQ, 0);
}

void BPF_STRUCT_OPS(nest_running, struct task_struct *p)
{
	struct nest_task *t = lookup_task(p);

	if (t)
		nest_task_running(&nest_state, t, scx_bpf_task_cpu(p));
}

void BPF_STRUCT_OPS(nest_stopping, struct task_struct *p, bool runnable)
{
	if (p->flags & PF_EXITING)
		nest_task_exiting(&nest_state, scx_bpf_task_cpu(p));
}

void BPF_STRUCT_OPS(nest_update_idle, s32 cpu, bool idle)
{
	struct nest_bpf_env env = {};
	struct nest_ctx pctx = policy_ctx(&env);

	if (idle)
		nest_cpu_idle(&pctx, cpu);
	else
		nest_cpu_busy(&nest_state, cpu);
}

/*
 * CPU hotplug. Without these two callbacks the kernel ejects the scheduler
 * (asking user space to restart it) whenever a CPU goes offline or online.
 */
void BPF_STRUCT_OPS(nest_cpu_online_op, s32 cpu)
{
	nest_cpu_online(&nest_state, cpu);
}

void BPF_STRUCT_OPS(nest_cpu_offline_op, s32 cpu)
{
	nest_cpu_offline(&nest_state, cpu);
}

s32 BPF_STRUCT_OPS(nest_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct nest_task *t;

	t = bpf_task_storage_get(&task_ctx, p, 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t)
		return -ENOMEM;
	nest_task_init(t);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(nest_init)
{
	s32 err = scx_bpf_create_dsq(NEST_DSQ, -1);

	if (err)
		return err;
	return scx_bpf_create_dsq(STALL_DSQ, -1);
}

void BPF_STRUCT_OPS(nest_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(nest_ops,
	       .select_cpu = (void *)nest_select_cpu_op,
	       .enqueue = (void *)nest_enqueue,
	       .dispatch = (void *)nest_dispatch,
	       .running = (void *)nest_running,
	       .stopping = (void *)nest_stopping,
	       .update_idle = (void *)nest_update_idle,
	       .cpu_online = (void *)nest_cpu_online_op,
	       .cpu_offline = (void *)nest_cpu_offline_op,
	       .init_task = (void *)nest_init_task,
	       .init = (void *)nest_init,
	       .exit = (void *)nest_exit,
	       .name = "nest");
