/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler around Nest's placement, written once for every host.
 *
 * Nest is "the kernel's fair scheduler except for the choice of core", so
 * what happens to a task that found no idle CPU follows the fair scheduler:
 *
 *   - Weighted virtual time. A task is charged its running time scaled by
 *     NEST_WEIGHT_DFL / weight (p->scx.weight: nice; times its share of
 *     its cgroup's cpu.weight, nest_task_weight()),
 *     and waiting tasks run in virtual-time order, so CPU shares under
 *     contention follow the weights (update_curr() / calc_delta_fair() in
 *     kernel/sched/fair.c).
 *   - Bounded credit. A task that wakes up is placed no earlier than two
 *     slices (scaled by its weight) before the earliest task waiting where
 *     it would wait, as update_entity_lag() bounds the lag place_entity()
 *     restores; a new task starts there (nest_task_woken()).
 *   - One queue per last-level cache (LLC), with its own virtual time. A
 *     task joins its previous CPU's LLC queue; its virtual time moves from
 *     one queue's frame to another's keeping its lag, bounded as at a
 *     wakeup, as the fair scheduler bounds a migrating entity's lag
 *     (update_entity_lag() at dequeue, place_entity() at enqueue). Tasks
 *     that may run on one CPU only (pinned, or migration disabled) wait
 *     in that CPU's own queue, in the same frame.
 *   - Locality. A task queued on a CPU waits in that CPU's front queue,
 *     of one task, when it is free, and in the LLC's queue otherwise. A
 *     CPU out of work takes its front task before the LLC queue's first
 *     unless that one is more than two slices earlier: a task preempted
 *     here comes back here, as the fair scheduler leaves a preempted task
 *     on its run queue. The bound is how unfair one CPU may be to the
 *     LLC's other tasks. One task per CPU keeps the imbalance between
 *     CPUs at one task; a CPU with nothing else to run takes another
 *     CPU's front task (its own LLC's first), as the fair scheduler's
 *     idle balance pulls a waiting task.
 *   - Balance and work conservation. A CPU takes from another LLC's queue
 *     when its own is empty (nearest LLC first), when the other queue is
 *     longer by more than one task and a quarter, per CPU, or when
 *     nothing waits for it and every CPU of the other LLC has a front
 *     task (a load balance).
 *     Idle CPUs are woken when a task is queued, and at every tick of a CPU
 *     whose LLC queue holds waiting tasks (as the fair scheduler's
 *     nohz_balancer_kick()).
 *   - Latency. A woken task whose virtual time is more than half a
 *     slice before that of the task running on its previous CPU preempts
 *     it (check_preempt_wakeup() / wakeup_preempt_entity()); slices shrink
 *     as more tasks wait, down to slice_min_ns.
 *
 * The host keeps the queues (sched_ext DSQs in BPF) and asks this file
 * what to do; it answers through the platform interface of nest_policy.h:
 *
 *   u32 plat_llc_queued(nest_env_t env, u32 llc);
 *	Number of tasks waiting in LLC @llc's queue (asked at ticks only:
 *	the policy counts the queues' tasks, "Queue counts" below).
 *   bool plat_queue_head(nest_env_t env, s32 queue, u64 *vtime);
 *	Virtual time of the first task of @queue (an LLC index,
 *	NEST_QUEUE_PINNED - cpu for CPU cpu's queue of pinned tasks or
 *	NEST_QUEUE_FRONT - cpu for its front queue); false if empty. Asked
 *	whenever the queue's count says a task may wait there: a host
 *	answers without taking the queue's lock where it can.
 *
 * Included after nest_policy.c.
 */

/*
 * How many slices of virtual time after the first task of its LLC's queue
 * a CPU's front task may be and still be taken first (nest_llc_next()).
 */
#define NEST_LOCALITY_SLICES 2
/* The least weight a task is charged with (nest_sched_stopping()). */
#define NEST_CHARGE_WEIGHT_MIN 5

/* @ns of running time in virtual time, for a task of weight @weight. */
static u64 scale_by_weight(u64 ns, u32 weight)
{
	return ns * NEST_WEIGHT_DFL / (weight ? weight : 1);
}

/*
 * The weight a task of weight @weight runs with when it belongs to a
 * cgroup (other than the root) of cpu.weight @cg_weight whose runnable
 * tasks weigh @cg_runnable in all: its share of the group's weight, as the
 * fair scheduler's group entity shares a group's weight among its tasks
 * (calc_group_shares() in kernel/sched/fair.c). Flat: only the task's own
 * cgroup counts, not its ancestors. Tasks of the root cgroup (@cg_weight
 * 0) keep their own weight.
 */
static u32 nest_task_weight(u32 weight, u32 cg_weight, u64 cg_runnable)
{
	u64 w;

	if (!cg_weight || !cg_runnable)
		return weight;
	w = (u64)cg_weight * weight / cg_runnable;
	if (w < 1)
		return 1;
	return w > 10000 ? 10000 : w;
}

/* Is virtual time @a before @b? (Wraps like the kernel's vruntime.) */
static bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

static u64 llc_vtime(const struct nest_ctx *ctx, u32 llc)
{
	return READ_ONCE(ctx->st->llc_vtime[llc_index(llc)]);
}

/* Is @queue a CPU's queue of pinned tasks (NEST_QUEUE_PINNED - cpu)? */
static bool queue_is_pinned(s32 queue)
{
	return queue <= NEST_QUEUE_PINNED && queue > NEST_QUEUE_FRONT;
}

/* The CPU of @queue, a CPU's pinned or front queue. */
static s32 queue_cpu(s32 queue)
{
	return queue_is_pinned(queue) ? NEST_QUEUE_PINNED - queue :
					NEST_QUEUE_FRONT - queue;
}

/*
 * Queue counts
 * ------------
 * The policy counts the tasks of each queue as the host reports them
 * (nest_task_queued()): counted when the host puts a task into a queue,
 * uncounted when the task starts running or is put into another queue.
 * A look into a queue is a lookup by its id in the host (a hash table in
 * sched_ext, about 200 instructions), asked at nearly every switch; a
 * count of zero answers without it. A count is never below the
 * queue's length: a task is counted before the host's insertion takes
 * effect and uncounted after it left. It may be above for a moment (a
 * task moved out to run, not started yet), which costs a look. The
 * tick's look for waiting work (nest_tick_kick()) asks the host itself.
 */

/* The count of @queue's tasks. */
static s32 *queue_count(const struct nest_ctx *ctx, s32 queue)
{
	struct nest_cpu *c;

	if (queue >= 0)
		return &ctx->st->llc_queued[llc_index(queue)];
	c = nest_cpu(ctx->st, queue_cpu(queue));
	if (!c)
		return NULL;
	return queue_is_pinned(queue) ? &c->pinned_queued : &c->front_queued;
}

/* Count @delta tasks into or out of @queue (NEST_QUEUE_NONE: none). */
static void count_queued(const struct nest_ctx *ctx, s32 queue, s32 delta)
{
	s32 *count;

	if (queue == NEST_QUEUE_NONE)
		return;
	count = queue_count(ctx, queue);
	if (count)
		__sync_fetch_and_add(count, delta);
	if (queue <= NEST_QUEUE_FRONT)
		__sync_fetch_and_add(&ctx->st->llc_fronts[llc_index(
					     cpu_llc(ctx->cfg, queue_cpu(queue)))],
				     delta);
}

/*
 * The host put @t into @queue, or @t left its queue (NEST_QUEUE_NONE: to
 * run, or to leave the scheduler for another scheduling class). A task
 * dequeued for an affinity or priority change is queued again, which
 * moves its count.
 */
static void nest_task_queued(const struct nest_ctx *ctx, struct nest_task *t,
			     s32 queue)
{
	if (t->queue == queue)
		return;
	count_queued(ctx, t->queue, -1);
	count_queued(ctx, queue, 1);
	t->queue = queue;
}

/* How many tasks wait in @queue, as counted. */
static u32 queue_waiting(const struct nest_ctx *ctx, s32 queue)
{
	s32 *count = queue_count(ctx, queue);
	s32 nr = count ? READ_ONCE(*count) : 0;

	return nr > 0 ? nr : 0;
}

/* How many tasks wait in LLC @llc's queue, as counted. */
static u32 llc_waiting(const struct nest_ctx *ctx, u32 llc)
{
	return queue_waiting(ctx, llc);
}

/*
 * The virtual time of @queue's first task; false if it is empty. The
 * host is asked only when the count says a task may be there.
 */
static bool queue_head(const struct nest_ctx *ctx, s32 queue, u64 *vtime)
{
	s32 *count = queue_count(ctx, queue);

	if (count && READ_ONCE(*count) <= 0)
		return false;
	return plat_queue_head(ctx->env, queue, vtime);
}

/* Lower *@ref to the virtual time of @queue's first task, if earlier. */
static void earliest_of(const struct nest_ctx *ctx, s32 queue, u64 *ref)
{
	u64 head;

	if (queue_head(ctx, queue, &head) && vtime_before(head, *ref))
		*ref = head;
}

/*
 * Where LLC @llc's frame stands now: its virtual time, or its first
 * waiting task's if that is earlier.
 */
static u64 frame_ref(const struct nest_ctx *ctx, u32 llc)
{
	u64 ref = llc_vtime(ctx, llc);

	earliest_of(ctx, llc, &ref);
	return ref;
}

/*
 * How far a task of weight @weight may be from its frame's reference:
 * two slices, scaled by its weight (update_entity_lag() bounds a lag to
 * two slices, calc_delta_fair()-scaled).
 */
static u64 lag_bound(const struct nest_ctx *ctx, u32 weight)
{
	return scale_by_weight(2 * ctx->cfg->slice_ns, weight);
}

/* @vtime kept within @bound of @ref, on either side. */
static u64 clamp_lag(u64 vtime, u64 ref, u64 bound)
{
	if (vtime_before(vtime, ref - bound))
		return ref - bound;
	if (vtime_before(ref + bound, vtime))
		return ref + bound;
	return vtime;
}

/*
 * Express @t's virtual time, for weight @weight, in LLC @llc's frame. A
 * task seen for the first time starts at @ref. A task from another frame
 * keeps its lag against that frame's reference, bounded by lag_bound():
 * an unbounded lag carried credit from one frame into another, where
 * tasks that never sleep (sched_yield() loops) kept it for good. An LLC's
 * virtual time is pushed far ahead by a low-weight task run out of turn,
 * and a task leaving that LLC arrived tens of seconds before everyone in
 * the next one, which then waited behind it until sched_ext's watchdog
 * ejected the scheduler (stress-ng yield, race-sched, affinity in an
 * emulated guest).
 */
static void rebase_vtime(const struct nest_ctx *ctx, struct nest_task *t,
			 u32 llc, u64 ref, u32 weight)
{
	if (t->vtime_llc == NEST_LLC_NONE) {
		t->vtime = ref;
	} else if (t->vtime_llc != llc) {
		u64 from = frame_ref(ctx, t->vtime_llc);
		u64 to = frame_ref(ctx, llc);

		t->vtime = clamp_lag(t->vtime, from, lag_bound(ctx, weight)) -
			   from + to;
	}
	t->vtime_llc = llc;
}

/*
 * The LLC whose frame the virtual times of @queue are in: a CPU's queues
 * are in its LLC's.
 */
static u32 queue_frame(const struct nest_ctx *ctx, s32 queue)
{
	if (queue >= 0)
		return llc_index(queue);
	return llc_index(cpu_llc(ctx->cfg, queue_cpu(queue)));
}

/*
 * @t, of weight @weight, woke up (or is new) and will wait in @queue (an
 * LLC index, or a CPU's queue) unless it gets an idle CPU. Its
 * credit is bounded: no earlier than two slices, scaled by its weight,
 * before the earliest task waiting where it would (its LLC's queue, and
 * its CPU's own queue if pinned), or the LLC's virtual time if that is
 * earlier. As the fair scheduler at a wakeup (place_entity() restores a
 * lag that update_entity_lag() clamped to two slices): a task that slept
 * runs before the tasks that kept running, but a long sleep earns no more
 * than two slices. With one slice, a sleeper charged for a few ms it did
 * not run (a vCPU the host stopped while it ran) was no longer the
 * quarter slice behind a CPU hog that nest_wakeup_preempts() asked for
 * then (half a slice now), and waited out the hog's slice: cyclictest
 * beside a hog, on a loaded emulator, 25-58 of 1470 wake-ups against the
 * default scheduler's 2-9.
 * A debt is bounded likewise (update_entity_lag() clamps both ways): a
 * low-weight task, charged many times what it ran, would otherwise wake
 * seconds ahead of its frame, and run only out of turn.
 * Only at wakeups and frame changes: a task preempted or at the end of
 * its slice keeps its virtual time, or weights would not hold. Reads no
 * clock (ctx->now may be 0): hosts call it at every wake-up.
 */
static void nest_task_woken(const struct nest_ctx *ctx, struct nest_task *t,
			    s32 queue, u32 weight)
{
	u32 llc = queue_frame(ctx, queue);
	u64 ref = frame_ref(ctx, llc);

	if (queue_is_pinned(queue)) {
		struct nest_cpu *c = nest_cpu(ctx->st, queue_cpu(queue));

		earliest_of(ctx, queue, &ref);
		/*
		 * A pinned task can only take its CPU from the task running
		 * there: place it against that one too, or it waits until a
		 * task lagging the LLC catches up (cyclictest's p99 beside a
		 * hog: 145 ms). Only pinned tasks: done for every task, it
		 * undid the locality order under overload.
		 */
		if (c && READ_ONCE(c->curr_weight) &&
		    vtime_before(READ_ONCE(c->curr_vtime), ref))
			ref = READ_ONCE(c->curr_vtime);
	}
	rebase_vtime(ctx, t, llc, ref, weight);
	t->vtime = clamp_lag(t->vtime, ref, lag_bound(ctx, weight));
	t->run_since_wake = 0;
}

/* The virtual time with which @t, of weight @weight, joins @queue. */
static u64 nest_queue_vtime(const struct nest_ctx *ctx, struct nest_task *t,
			    s32 queue, u32 weight)
{
	u32 llc = queue_frame(ctx, queue);

	rebase_vtime(ctx, t, llc, frame_ref(ctx, llc), weight);
	return t->vtime;
}

/* The LLC queue a task whose previous CPU is @prev_cpu joins. */
static u32 nest_queue_llc(const struct nest_ctx *ctx, s32 prev_cpu)
{
	return llc_index(cpu_llc(ctx->cfg, prev_cpu));
}

/*
 * The queue a task queued on @cpu waits in: @cpu's queue of pinned tasks
 * if it may run there only (@pinned), else @cpu's front queue if that is
 * free or if the task belongs there whatever waits there (@front: it
 * preempts @cpu's task, nest_wakeup_preempts(), and is to run next there;
 * or a woken task preempted it there, NEST_RESUME_FRONT), else @cpu's LLC
 * queue. The host queues tasks of @cpu under @cpu's lock, so the front
 * holds one task but for those, and tasks moved there by others. An
 * offline CPU never dispatches: its tasks wait in the LLC queue.
 */
static s32 nest_queue_of(const struct nest_ctx *ctx, s32 cpu, bool pinned,
			 bool front)
{
	u64 head;

	if (pinned)
		return NEST_QUEUE_PINNED - cpu;
	if (!cpu_offline(ctx->st, cpu) &&
	    (front ||
	     !queue_head(ctx, NEST_QUEUE_FRONT - cpu, &head)))
		return NEST_QUEUE_FRONT - cpu;
	return nest_queue_llc(ctx, cpu);
}

/*
 * The slice of a task starting on @cpu: shorter as more tasks wait for
 * @cpu's LLC (slice x CPUs / (CPUs + waiting)), never below slice_min_ns.
 * A task of @cpu's pinned queue waits for @cpu alone, so it counts once
 * per CPU of the LLC: tasks piled on one CPU by their affinity (stress-ng's
 * affinity stressor pins dozens) take turns of the shortest slice, as
 * tasks piled in the LLC's queue do, rather than of whole slices.
 *
 * Inlined: as a call of its own, it took ops.select_cpu() past BPF's 512
 * bytes of stack for a chain of calls.
 */
static __always_inline u64 nest_slice(const struct nest_ctx *ctx, s32 cpu)
{
	const struct nest_config *cfg = ctx->cfg;
	u32 llc = nest_queue_llc(ctx, cpu);
	u64 nr_cpus = cfg->llc_nr_cpus[llc_index(llc)];
	u64 waiting = llc_waiting(ctx, llc) +
		      nr_cpus * queue_waiting(ctx, NEST_QUEUE_PINNED - cpu);
	u64 slice = cfg->slice_ns;

	if (nr_cpus && waiting)
		slice = slice * nr_cpus / (nr_cpus + waiting);
	return slice > cfg->slice_min_ns ? slice : cfg->slice_min_ns;
}

/*
 * The task described by @t, of weight @weight, starts running on @cpu.
 * The LLC's virtual time advances to the task's, but not past the first
 * task still waiting in the LLC's queue, as the fair scheduler's
 * min_vruntime follows the earliest of the running and the waiting
 * entities (update_min_vruntime()): a task run out of turn (on an idle
 * CPU, or by the starvation guard) does not drag the frame ahead of the
 * tasks that wait in it.
 */
static void nest_sched_running(const struct nest_ctx *ctx, struct nest_task *t,
			       s32 cpu, u32 weight)
{
	u32 llc = llc_index(cpu_llc(ctx->cfg, cpu));
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u64 ref = llc_vtime(ctx, llc), frontier, head = 0;
	/* One look at the queue (at every switch): frame_ref() and the cap. */
	bool waiting = queue_head(ctx, llc, &head);

	if (waiting && vtime_before(head, ref))
		ref = head;
	nest_task_queued(ctx, t, NEST_QUEUE_NONE);
	rebase_vtime(ctx, t, llc, ref, weight);
	frontier = t->vtime;
	if (waiting && vtime_before(head, frontier))
		frontier = head;
	if (vtime_before(llc_vtime(ctx, llc), frontier))
		WRITE_ONCE(ctx->st->llc_vtime[llc], frontier);
	t->run_start = ctx->now;
	if (!c)
		return;
	WRITE_ONCE(c->resume, NEST_RESUME_QUEUED);
	WRITE_ONCE(c->curr_vtime, t->vtime);
	WRITE_ONCE(c->curr_started, ctx->now);
	WRITE_ONCE(c->curr_ran_since_wake, t->run_since_wake);
	WRITE_ONCE(c->curr_weight, weight ? weight : 1);
}

/*
 * The task described by @t, of weight @weight, stops running on @cpu. The
 * charge uses a weight of at least NEST_CHARGE_WEIGHT_MIN: a task of the
 * lowest weight (SCHED_IDLE, nice 19, a crowded low-weight cgroup: 1) that
 * ran past its slice (a tick late, or under emulation) would otherwise
 * lead by seconds of virtual time and wait longer than sched_ext's
 * watchdog allows (30 s), which ejects the scheduler. Such tasks get up to
 * five times their weight's share.
 */
static void nest_sched_stopping(const struct nest_ctx *ctx,
				struct nest_task *t, s32 cpu, u32 weight)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (weight < NEST_CHARGE_WEIGHT_MIN)
		weight = NEST_CHARGE_WEIGHT_MIN;
	if (ctx->now > t->run_start) {
		t->vtime += scale_by_weight(ctx->now - t->run_start, weight);
		t->run_since_wake += ctx->now - t->run_start;
	}
	if (c)
		WRITE_ONCE(c->curr_weight, 0);
}

/*
 * Should the task running on @cpu give way to a woken task of virtual time
 * @vtime queued in @cpu's LLC? Yes when the running task is a CPU hog, and
 * its virtual time, counting what it has run so far, is ahead by more than
 * half a slice.
 *
 * A hog has run at least a slice since it last woke up. The fair
 * scheduler preempts, at a wakeup, a task that has run past its share
 * (pick_eevdf(): a curr that is no longer eligible), but not one that has
 * its slice still to run (RUN_TO_PARITY's slice protection,
 * set_protect_slice()). A task that sleeps often keeps its share; one that
 * runs on is the hog a sleeper must not wait behind. Preempting tasks
 * that sleep often too, as every wakeup of hackbench's senders and
 * receivers did, doubled their context switches, each with a kick, an
 * interrupt and a dispatch, and shrank the batches of messages each run
 * reads; cyclictest beside a CPU hog is preempted for at once still.
 *
 * Half a slice is the wakeup granularity (wakeup_preempt_entity() before
 * EEVDF): a woken task less far ahead waits for the slice end. A sleeper
 * keeps up to two slices of credit (nest_task_woken()), so it still
 * preempts a hog at once.
 */
static bool nest_wakeup_preempts(const struct nest_ctx *ctx, s32 cpu,
				 u64 vtime)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u64 curr, started, ran;
	u32 weight;

	if (!c)
		return false;
	weight = READ_ONCE(c->curr_weight);
	if (!weight)
		return false;
	started = READ_ONCE(c->curr_started);
	ran = ctx->now > started ? ctx->now - started : 0;
	if (READ_ONCE(c->curr_ran_since_wake) + ran < ctx->cfg->slice_ns)
		return false;
	curr = READ_ONCE(c->curr_vtime) + scale_by_weight(ran, weight);
	return (s64)(curr - vtime) > (s64)(ctx->cfg->slice_ns / 2);
}

/*
 * The task @cpu takes next from its LLC: its front task, unless the LLC
 * queue's first is more than NEST_LOCALITY_SLICES earlier, in which case
 * that one. Returns its queue (NEST_QUEUE_NONE when both are empty) and
 * its virtual time in *@vtime.
 */
static s32 nest_llc_next(const struct nest_ctx *ctx, s32 cpu, u64 *vtime)
{
	u32 own = llc_index(cpu_llc(ctx->cfg, cpu));
	u64 front = 0, head = 0;
	bool has_front = queue_head(ctx, NEST_QUEUE_FRONT - cpu, &front);
	bool has_head = queue_head(ctx, own, &head);

	if (has_front &&
	    (!has_head || !vtime_before(head + NEST_LOCALITY_SLICES *
						   ctx->cfg->slice_ns,
					front))) {
		*vtime = front;
		return NEST_QUEUE_FRONT - cpu;
	}
	*vtime = head;
	return has_head ? (s32)own : NEST_QUEUE_NONE;
}

/*
 * Would a task woken on @cpu, of virtual time @vtime, be the next task
 * @cpu takes (nest_queue_to_consume())? Yes when no task of @cpu's queue
 * of pinned tasks nor the task it would take from its LLC
 * (nest_llc_next()) is earlier. Such a task, woken with
 * nest_wakeup_preempts(), then goes straight to the CPU, without the
 * round trip through a queue, a kick (an interrupt, even on the waker's
 * own CPU) and ops.dispatch(): 19275 such kicks in a 50000-operation run
 * of stress-ng's switch stressor on 16 CPUs. Under emulation with
 * the host busy, that trip made cyclictest's wake-ups beside a CPU hog
 * take 157-267 us at p50 (the default scheduler's 31-44 us), and each
 * microsecond of it a chance for the emulator to stop: p99 5.5-6.2 ms
 * against 1.3-2.0 ms. Straight to the CPU: p50 54-74 us, p99 477-574 us.
 */
static bool nest_woken_runs_next(const struct nest_ctx *ctx, s32 cpu,
				  u64 vtime)
{
	u64 head;

	if (queue_head(ctx, NEST_QUEUE_PINNED - cpu, &head) &&
	    !vtime_before(vtime, head))
		return false;
	return nest_llc_next(ctx, cpu, &head) == NEST_QUEUE_NONE ||
	       !vtime_before(head, vtime);
}

/*
 * A woken task preempts the task running on @cpu (nest_wakeup_preempts()):
 * how does that task resume? Right after it on @cpu if the woken task is
 * pinned (@pinned: it went to the head of @cpu's local queue), else first
 * in line in @cpu's front queue, beside any task already there. Either
 * way it stays on @cpu, as the fair scheduler leaves a preempted task on
 * its runqueue, where idle balancing does not take it while it is cache
 * hot (task_hot(), sysctl_sched_migration_cost). Joining the LLC's queue
 * instead, it was taken by the next CPU of the LLC whose front task was
 * more than two slices later, and that CPU's own task, put back, became
 * the next to move: with every CPU busy, each wake-up of a kworker or
 * ksoftirqd beside CPU hogs started such a chain of migrations. A pinned
 * task runs for microseconds, so its victim may skip the queue: it waits
 * at most that task's slice. One that may run elsewhere may run a whole
 * slice, so its victim waits in the front queue, from which an idle CPU
 * takes it (nest_front_to_steal()) and where the LLC's earlier tasks
 * still go first (nest_llc_next()).
 */
static void nest_woken_preempts(const struct nest_ctx *ctx, s32 cpu,
				bool pinned)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);

	if (c && READ_ONCE(c->curr_weight))
		WRITE_ONCE(c->resume, pinned ? NEST_RESUME_LOCAL :
					       NEST_RESUME_FRONT);
}

/*
 * How does the task being queued from @cpu, not woken, resume: is it the
 * one a woken task preempted there (nest_woken_preempts())? Answers
 * NEST_RESUME_LOCAL or NEST_RESUME_FRONT once, else NEST_RESUME_QUEUED.
 */
static u32 nest_preempted_resumes(const struct nest_ctx *ctx, s32 cpu)
{
	struct nest_cpu *c = nest_cpu(ctx->st, cpu);
	u32 resume;

	if (!c)
		return NEST_RESUME_QUEUED;
	resume = READ_ONCE(c->resume);
	if (resume != NEST_RESUME_QUEUED)
		WRITE_ONCE(c->resume, NEST_RESUME_QUEUED);
	return resume;
}

/*
 * Is LLC @llc's queue, with @nr waiting tasks, longer than @own's, with
 * @nr_own, by more than one task and a quarter (the fair scheduler's
 * imbalance_pct of 125 between NUMA nodes), scaled to the LLCs' sizes?
 */
static bool llc_overloaded(const struct nest_config *cfg, u32 llc, u32 nr,
			   u32 own, u32 nr_own)
{
	u64 cpus = cfg->llc_nr_cpus[llc_index(llc)];
	u64 own_cpus = cfg->llc_nr_cpus[llc_index(own)];

	return (u64)nr * own_cpus > ((u64)nr_own + 1 + nr_own / 4) * cpus;
}

/*
 * Does every CPU of LLC @llc have a task waiting in its front queue? Then
 * a task waiting in @llc's queue is one more than its CPUs' share: a CPU
 * of another LLC with nothing waiting for it, neither in its front queue
 * nor in its LLC's, takes it (nest_queue_to_consume()), even at the end
 * of its running task's slice. Without that, 17 CPU hogs on one 8-CPU
 * LLC and 15 on the other stayed so, the one task more than two per CPU
 * passing from CPU to CPU of its LLC (the locality bound of
 * nest_llc_next()), a migration every few slices. The move cannot come
 * back: it leaves @llc's CPUs a front task each.
 */
static bool llc_fronts_full(const struct nest_ctx *ctx, u32 llc)
{
	return READ_ONCE(ctx->st->llc_fronts[llc_index(llc)]) >=
	       (s32)ctx->cfg->llc_nr_cpus[llc_index(llc)];
}

/* Does any front queue hold a task? One look per LLC, not per CPU. */
static bool any_front_task(const struct nest_ctx *ctx)
{
	u32 nr_llcs = ctx->cfg->nr_llcs, llc;

	if (nr_llcs > NEST_MAX_LLCS)
		nr_llcs = NEST_MAX_LLCS;
	bpf_for(llc, 0, nr_llcs) {
		if (READ_ONCE(ctx->st->llc_fronts[llc_index(llc)]) > 0)
			return true;
	}
	return false;
}

/*
 * A front task for @cpu, which has nothing else to run, to take from
 * another CPU, as the fair scheduler's idle balance pulls a waiting task
 * (sched_balance_newidle() in kernel/sched/fair.c):
 * the earliest of @cpu's LLC, else the first of another LLC's. Returns
 * NEST_QUEUE_FRONT - cpu of that CPU, or NEST_QUEUE_NONE. Only a CPU that
 * would otherwise go idle looks, only when some front queue holds a task,
 * and only into the front queues counted non-empty: CPUs go idle at most
 * switches of a ping-pong, and a walk over every CPU costs as much as a
 * few lookups.
 */
static s32 nest_front_to_steal(const struct nest_ctx *ctx, s32 cpu)
{
	const struct nest_config *cfg = ctx->cfg;
	u32 own = cpu_llc(cfg, cpu), nr_cpus = cfg->nr_cpus, c;
	s32 best = NEST_QUEUE_NONE, other = NEST_QUEUE_NONE;
	u64 best_vtime = 0, vtime;

	if (!any_front_task(ctx))
		return NEST_QUEUE_NONE;
	if (nr_cpus > NEST_MAX_CPUS)
		nr_cpus = NEST_MAX_CPUS;
	bpf_for(c, 0, nr_cpus) {
		if ((s32)c == cpu ||
		    !queue_head(ctx, NEST_QUEUE_FRONT - (s32)c, &vtime))
			continue;
		if (cpu_llc(cfg, c) != own) {
			if (other == NEST_QUEUE_NONE)
				other = NEST_QUEUE_FRONT - (s32)c;
		} else if (best == NEST_QUEUE_NONE ||
			   vtime_before(vtime, best_vtime)) {
			best = NEST_QUEUE_FRONT - (s32)c;
			best_vtime = vtime;
		}
	}
	return best != NEST_QUEUE_NONE ? best : other;
}

/*
 * @cpu is out of work: which queue should it take its next task from? Its
 * queue of pinned tasks if that one's first task is earliest, another
 * LLC's queue if that one is overloaded (nearest first) or, with nothing
 * waiting for @cpu, holds more than its CPUs' front queues
 * (llc_fronts_full()), what it takes from its own LLC (nest_llc_next()),
 * another front task of its LLC, the nearest non-empty LLC queue, or
 * another LLC's front task. Returns an LLC
 * index, a CPU's queue (NEST_QUEUE_PINNED - cpu, NEST_QUEUE_FRONT - cpu)
 * or NEST_QUEUE_NONE. Reads no clock (ctx->now may be 0): hosts ask at
 * every switch, and most find nothing to take.
 */
static s32 nest_queue_to_consume(const struct nest_ctx *ctx, s32 cpu)
{
	const struct nest_config *cfg = ctx->cfg;
	u32 own = llc_index(cpu_llc(cfg, cpu));
	u32 nr_own = llc_waiting(ctx, own);
	u64 pinned_vtime, next_vtime;
	s32 next = nest_llc_next(ctx, cpu, &next_vtime);
	s32 nearest = NEST_QUEUE_NONE, stolen;
	u32 i, nr_llcs = cfg->nr_llcs;

	if (queue_head(ctx, NEST_QUEUE_PINNED - cpu, &pinned_vtime) &&
	    (next == NEST_QUEUE_NONE || !vtime_before(next_vtime, pinned_vtime)))
		return NEST_QUEUE_PINNED - cpu;
	if (nr_llcs > NEST_MAX_LLCS)
		nr_llcs = NEST_MAX_LLCS;
	bpf_for(i, 1, nr_llcs) {
		u32 llc = llc_index(cfg->llc_order[own][llc_index(i)]);
		u32 nr = llc_waiting(ctx, llc);

		if (!nr)
			continue;
		if (llc_overloaded(cfg, llc, nr, own, nr_own) ||
		    (next == NEST_QUEUE_NONE && llc_fronts_full(ctx, llc)))
			return llc;
		if (nearest == NEST_QUEUE_NONE)
			nearest = llc;
	}
	if (next != NEST_QUEUE_NONE)
		return next;
	stolen = nest_front_to_steal(ctx, cpu);
	if (stolen != NEST_QUEUE_NONE &&
	    cpu_llc(cfg, queue_cpu(stolen)) == cpu_llc(cfg, cpu))
		return stolen;
	return nearest != NEST_QUEUE_NONE ? nearest : stolen;
}

/*
 * @cpu ran out of slice for @t (weight @weight), which is still runnable,
 * and would next take a task from @queue (nest_queue_to_consume()):
 * should @t keep the CPU instead? From @cpu's own queues or LLC queue,
 * yes while its virtual time, counting what it has just run, is not after
 * that task's: the task with the earliest virtual time runs, the running
 * one included, as the fair scheduler's pick_next_entity() considers curr.
 * Not for another LLC's queue (a load balance, whose frame does not
 * compare), and always rather than another CPU's front task, which is
 * only taken by a CPU out of work: it runs at its own CPU's next switch.
 *
 * Inlined: BPF passes at most five arguments to a called function.
 */
static __always_inline bool
nest_prev_keeps_cpu(const struct nest_ctx *ctx, s32 cpu,
		    const struct nest_task *t, u32 weight, s32 queue)
{
	u64 vtime = t->vtime, head;

	if (queue <= NEST_QUEUE_FRONT && queue != NEST_QUEUE_FRONT - cpu)
		return true;
	if (queue >= 0 && queue != (s32)nest_queue_llc(ctx, cpu))
		return false;
	if (!queue_head(ctx, queue, &head))
		return false;
	if (ctx->now > t->run_start)
		vtime += scale_by_weight(ctx->now - t->run_start, weight);
	return !vtime_before(head, vtime);
}

/*
 * Starvation guard: has a task queued at @queued_ns (0: not queued) waited
 * so long that it must run next, whatever its virtual time? sched_ext
 * ejects a scheduler that leaves a runnable task waiting for its watchdog
 * timeout (30 s), and weighted virtual time alone can make a task wait
 * that long: a SCHED_IDLE task (weight 1, charged as
 * NEST_CHARGE_WEIGHT_MIN) beside nice -20 hogs (weight 8668) waits about
 * 1700 of their slices, and a run far past its slice (a vCPU the host
 * stopped, under emulation) leads by as much again. Seen: a stress-ng
 * race-sched task in a loaded emulated guest, ejected. The fair scheduler
 * has no such limit; here a task that waited NEST_STARVE_NS runs next,
 * which costs the others at most a slice per second.
 */
static bool nest_starving(const struct nest_ctx *ctx, u64 queued_ns)
{
	return queued_ns && (s64)(ctx->now - queued_ns) > (s64)NEST_STARVE_NS;
}

/*
 * Should the host look through a queue for a starving task now, given the
 * queue's next sweep time @sweep_at? Once per NEST_STARVE_SWEEP_NS per
 * queue: the first caller for which it is due gets the sweep and sets the
 * next one. A task counts as starving only after NEST_STARVE_NS, so a look
 * every NEST_STARVE_SWEEP_NS finds it soon enough; a look at every switch
 * took a queue that all the CPUs of an LLC share a few more times per
 * switch. The sweep looks at the whole queue: a starving task is usually
 * at its end (the latest virtual time), but one can wait further up,
 * behind tasks whose virtual time lags (a task second in its queue once
 * waited 31.5 s).
 */
static bool nest_starve_sweep_due(const struct nest_ctx *ctx, u64 *sweep_at)
{
	u64 at = READ_ONCE(*sweep_at);

	return (s64)(ctx->now - at) >= 0 &&
	       __sync_bool_compare_and_swap(sweep_at, at,
					    ctx->now + NEST_STARVE_SWEEP_NS);
}

/*
 * A sweep found a starving task in the queue whose next sweep time is
 * @sweep_at: sweep again at the queue's next dispatch, as others may be
 * starving behind it.
 */
static void nest_starve_rescued(const struct nest_ctx *ctx, u64 *sweep_at)
{
	WRITE_ONCE(*sweep_at, ctx->now);
}

/*
 * A tick on @cpu: should the host wake an idle CPU to take a task waiting
 * in @cpu's LLC queue or front queue? (Nothing else wakes an idle CPU for
 * a task that was preempted rather than woken, after its queueing.) The
 * host's queues themselves, not the counts: a count left above its
 * queue's length must not wake idle CPUs at every tick.
 */
static bool nest_tick_kick(const struct nest_ctx *ctx, s32 cpu)
{
	u64 head;

	return plat_llc_queued(ctx->env, nest_queue_llc(ctx, cpu)) > 0 ||
	       plat_queue_head(ctx->env, NEST_QUEUE_FRONT - cpu, &head);
}
