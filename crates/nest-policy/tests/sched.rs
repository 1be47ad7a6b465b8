//! The scheduler around the placement (`policy/nest_sched.c`): virtual
//! time, weights, queue choice, locality, wakeup preemption, driven through
//! the real C policy on a 2 sockets x 4 cores x 2 threads machine (one LLC
//! per socket: CPUs 0-3 and 8-11 in LLC 0, 4-7 and 12-15 in LLC 1).

use std::collections::HashMap;

use nest_policy::{NestPolicy, Params, Platform, Queue, Resume, TaskState, task_weight};
use nest_topology::Topology;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SLICE: u64 = 4 * MS;
/// p->scx.weight of nice 0 and nice 10.
const NICE_0: u32 = 100;
const NICE_10: u32 = 11;

/// Queues with a length and the virtual time of their first task, and
/// stand-ins for their tasks, reported to the policy as a host reports the
/// tasks it queues (`task_queued()`): the policy looks only into queues
/// that it counts tasks in.
#[derive(Default)]
struct Queues {
    queued: HashMap<u32, u32>,
    heads: HashMap<Queue, u64>,
    counted: HashMap<Queue, Vec<TaskState>>,
}

impl Queues {
    /// The first task of `queue` has virtual time `vtime`.
    fn set_head(&mut self, p: &NestPolicy, queue: Queue, vtime: u64) {
        self.heads.insert(queue, vtime);
        if let Queue::Llc(llc) = queue {
            let len = self.queued.entry(llc).or_insert(0);
            *len = (*len).max(1);
        }
        self.report(p, queue);
    }

    /// `len` tasks wait in LLC `llc`'s queue.
    fn set_len(&mut self, p: &NestPolicy, llc: u32, len: u32) {
        self.queued.insert(llc, len);
        self.report(p, Queue::Llc(llc));
    }

    /// Nothing waits in `queue`.
    fn empty(&mut self, p: &NestPolicy, queue: Queue) {
        self.heads.remove(&queue);
        if let Queue::Llc(llc) = queue {
            self.queued.remove(&llc);
        }
        self.report(p, queue);
    }

    /// Nothing waits anywhere.
    fn clear(&mut self, p: &NestPolicy) {
        let queues: Vec<Queue> = self.counted.keys().copied().collect();
        for queue in queues {
            self.empty(p, queue);
        }
    }

    /// Report as many tasks in `queue` to the policy as it holds.
    fn report(&mut self, p: &NestPolicy, queue: Queue) {
        let len = match queue {
            Queue::Llc(llc) => self.queued.get(&llc).copied().unwrap_or(0),
            _ => u32::from(self.heads.contains_key(&queue)),
        } as usize;
        let tasks = self.counted.entry(queue).or_default();
        while tasks.len() < len {
            let mut task = TaskState::new();
            p.task_queued(&mut task, queue);
            tasks.push(task);
        }
        for mut task in tasks.split_off(len.min(tasks.len())) {
            p.task_dequeued(&mut task);
        }
    }
}

impl Platform for Queues {
    fn claim_idle(&mut self, _cpu: u32) -> bool {
        false
    }
    fn task_allowed(&self, _cpu: u32) -> bool {
        true
    }
    fn default_cpu(&mut self, prev: u32, _whole_core: bool) -> (u32, bool) {
        (prev, false)
    }
    fn pick_any_idle(&mut self) -> Option<u32> {
        None
    }
    fn cpu_idle(&self, _cpu: u32) -> bool {
        false
    }
    fn now_ns(&self) -> u64 {
        0
    }
    fn llc_queued(&self, llc: u32) -> u32 {
        self.queued.get(&llc).copied().unwrap_or(0)
    }
    fn queue_head(&self, queue: Queue) -> Option<u64> {
        self.heads.get(&queue).copied()
    }
}

fn policy() -> NestPolicy {
    NestPolicy::new(&Topology::regular(2, 4, 2), 0, &Params::default()).unwrap()
}

/// Run `task` on `cpu` from `start` for `ran` ns, with no task waiting.
fn run(p: &NestPolicy, task: &mut TaskState, cpu: u32, weight: u32, start: u64, ran: u64) {
    p.sched_running(&mut Queues::default(), task, cpu, weight, start);
    p.sched_stopping(task, cpu, weight, start + ran);
}

/// Is virtual time `a` before `b`? (They wrap, as the kernel's.)
fn before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

#[test]
fn cpu_shares_follow_the_weights() {
    // Two always-runnable tasks on one CPU: the one with the earlier
    // virtual time runs next, a slice at a time.
    let p = policy();
    let mut plat = Queues::default();
    let mut tasks = [
        (TaskState::new(), NICE_0, 0u64),
        (TaskState::new(), NICE_10, 0),
    ];
    for (task, weight, _) in &mut tasks {
        p.task_woken(&mut plat, task, Queue::Pinned(1), *weight, 0);
    }
    let mut now = 0;
    for _ in 0..2000 {
        plat.set_head(&p, Queue::Pinned(1), tasks[1].0.vtime());
        let next = if p.prev_keeps_cpu(&mut plat, 1, &tasks[0].0, NICE_0, Queue::Pinned(1), now) {
            0
        } else {
            1
        };
        let (task, weight, ran) = &mut tasks[next];
        run(&p, task, 1, *weight, now, SLICE);
        *ran += SLICE;
        now += SLICE;
        // Back in the CPU's queue, behind or before the other one: a
        // task at the end of its slice keeps its virtual time.
        let other = tasks[1 - next].0.vtime();
        plat.set_head(&p, Queue::Pinned(1), other);
        let (task, weight, _) = &mut tasks[next];
        let kept = task.vtime();
        assert_eq!(
            p.queue_vtime(&mut plat, task, Queue::Pinned(1), *weight),
            kept
        );
    }
    let ratio = tasks[0].2 as f64 / tasks[1].2 as f64;
    let weights = NICE_0 as f64 / NICE_10 as f64;
    assert!(
        (ratio / weights - 1.0).abs() < 0.15,
        "nice 0 / nice 10 CPU time {ratio:.2}, weights {weights:.2}"
    );
}

#[test]
fn a_sleeper_keeps_at_most_two_slices_of_credit() {
    let p = policy();
    let mut plat = Queues::default();
    let mut hog = TaskState::new();
    let mut sleeper = TaskState::new();
    p.task_woken(&mut plat, &mut sleeper, Queue::Llc(0), NICE_0, 0);
    // The hog runs 1 s while the sleeper sleeps.
    p.task_woken(&mut plat, &mut hog, Queue::Llc(0), NICE_0, 0);
    for i in 0..250 {
        run(&p, &mut hog, 0, NICE_0, i * SLICE, SLICE);
    }
    p.task_woken(&mut plat, &mut sleeper, Queue::Llc(0), NICE_0, 1000 * MS);
    let woken = sleeper.vtime();
    let hog_vtime = hog.vtime();
    assert!(woken < hog_vtime, "a sleeper goes before the hog");
    // Two slices before the LLC's virtual time: the hog's at its last start.
    let last_start = hog_vtime - SLICE;
    assert_eq!(last_start - woken, 2 * SLICE, "credit for a 1 s sleep");
}

/// cyclictest beside a hog on one CPU: a 2 ms sleeper that ran 100 us a
/// period, once charged 6 ms (a vCPU the host stopped while it ran),
/// must still preempt the hog at its next wake-ups. With one slice of
/// credit it waited out the hog's slice once after each such charge.
#[test]
fn a_sleeper_charged_for_a_stop_still_preempts_a_hog() {
    let p = policy();
    let mut plat = Queues::default();
    let (mut hog, mut sleeper) = (TaskState::new(), TaskState::new());
    let (cpu, queue) = (5, Queue::Pinned(5));
    p.task_woken(&mut plat, &mut hog, queue, NICE_0, 0);
    p.sched_running(&mut plat, &mut hog, cpu, NICE_0, 0);
    let mut hog_since = 0;
    // The sleeper's first wake-up comes 4 ms after the hog started: a new
    // task has no credit, and preempts only a task that ran half a slice.
    for period in 2..40u64 {
        let now = period * 2 * MS;
        if now < hog_since {
            continue; // the sleeper was still running (its charged run)
        }
        p.task_woken(&mut plat, &mut sleeper, queue, NICE_0, now);
        let vtime = p.queue_vtime(&mut plat, &mut sleeper, queue, NICE_0);
        assert!(
            p.wakeup_preempts(cpu, vtime, now),
            "period {period}: the woken sleeper waits behind the hog"
        );
        let ran = if period == 10 { 6 * MS } else { 100 * US };
        p.sched_stopping(&mut hog, cpu, NICE_0, now);
        run(&p, &mut sleeper, cpu, NICE_0, now, ran);
        hog_since = now + ran;
        p.sched_running(&mut plat, &mut hog, cpu, NICE_0, hog_since);
    }
}

#[test]
fn a_sleeper_is_placed_against_the_earliest_waiting_task() {
    let p = policy();
    let mut plat = Queues::default();
    let mut hog = TaskState::new();
    p.task_woken(&mut plat, &mut hog, Queue::Llc(0), NICE_0, 0);
    run(&p, &mut hog, 0, NICE_0, 0, 100 * SLICE);
    // Tasks wait in LLC 0 far behind the queue's virtual time.
    plat.set_len(&p, 0, 3);
    plat.set_head(&p, Queue::Llc(0), 10 * SLICE);
    let mut sleeper = TaskState::new();
    p.task_woken(&mut plat, &mut sleeper, Queue::Llc(0), NICE_0, 0);
    let vtime = sleeper.vtime();
    assert!(
        vtime <= 10 * SLICE,
        "new task at {vtime}, first waiting at {}",
        10 * SLICE
    );
}

#[test]
fn a_woken_task_preempts_a_task_far_ahead_in_virtual_time_only() {
    let p = policy();
    let mut plat = Queues::default();
    let mut hog = TaskState::new();
    p.task_woken(&mut plat, &mut hog, Queue::Llc(0), NICE_0, 0);
    p.sched_running(&mut plat, &mut hog, 2, NICE_0, 0);
    let start = hog.vtime();
    // Just started: a woken task at the same virtual time does not preempt.
    assert!(!p.wakeup_preempts(2, start, 0));
    // Nor one a slice behind: the running task has not run a slice since
    // it woke up, it is no hog yet.
    assert!(!p.wakeup_preempts(2, start.wrapping_sub(SLICE), SLICE - 1));
    // Once it has run a slice, a task half a slice behind or less waits
    // (the granularity); one further behind preempts.
    assert!(!p.wakeup_preempts(2, start.wrapping_add(SLICE / 2), SLICE));
    assert!(p.wakeup_preempts(2, start.wrapping_add(SLICE / 2 - 1), SLICE));
    assert!(p.wakeup_preempts(2, start.wrapping_sub(SLICE), SLICE));
    // What it ran before its last stop counts, until it sleeps.
    p.sched_stopping(&mut hog, 2, NICE_0, SLICE);
    p.sched_running(&mut plat, &mut hog, 2, NICE_0, SLICE + MS);
    assert!(p.wakeup_preempts(2, hog.vtime().wrapping_sub(SLICE), SLICE + MS));
    p.sched_stopping(&mut hog, 2, NICE_0, SLICE + MS);
    p.task_woken(&mut plat, &mut hog, Queue::Llc(0), NICE_0, 10 * SLICE);
    p.sched_running(&mut plat, &mut hog, 2, NICE_0, 10 * SLICE);
    assert!(
        !p.wakeup_preempts(2, hog.vtime().wrapping_sub(SLICE), 10 * SLICE + MS),
        "a task that just woke up is no hog"
    );
    // Nothing of ours runs on CPU 3.
    assert!(!p.wakeup_preempts(3, 0, SLICE));
    p.sched_stopping(&mut hog, 2, NICE_0, 10 * SLICE + MS);
    assert!(
        !p.wakeup_preempts(2, start, 20 * SLICE),
        "CPU 2 runs nothing now"
    );
}

#[test]
fn a_task_preempted_by_a_woken_task_resumes_on_its_cpu_once() {
    let p = policy();
    let mut plat = Queues::default();
    let mut task = TaskState::new();
    let mut woken = TaskState::new();
    p.task_woken(&mut plat, &mut task, Queue::Llc(0), NICE_0, 0);
    p.sched_running(&mut plat, &mut task, 2, NICE_0, 0);
    // Nothing preempted it yet: it is queued as any other task.
    assert_eq!(p.preempted_resumes(2), Resume::Queued);
    p.woken_preempts(2, true);
    // Another CPU's tasks are not concerned.
    assert_eq!(p.preempted_resumes(3), Resume::Queued);
    // The task queued from CPU 2 next, the preempted one, stays; once.
    assert_eq!(p.preempted_resumes(2), Resume::Local);
    assert_eq!(p.preempted_resumes(2), Resume::Queued);
    // After a task that may run elsewhere, it waits in CPU 2's front queue.
    p.woken_preempts(2, false);
    assert_eq!(p.preempted_resumes(2), Resume::Front);
    assert_eq!(p.preempted_resumes(2), Resume::Queued);
    // Left unused (the preempted task went to sleep instead), the mark
    // goes when the woken task starts.
    p.woken_preempts(2, true);
    p.sched_stopping(&mut task, 2, NICE_0, SLICE);
    p.sched_running(&mut plat, &mut woken, 2, NICE_0, SLICE);
    assert_eq!(p.preempted_resumes(2), Resume::Queued);
    // A CPU that runs nothing of ours has nothing to resume.
    p.sched_stopping(&mut woken, 2, NICE_0, 2 * SLICE);
    p.woken_preempts(2, false);
    assert_eq!(p.preempted_resumes(2), Resume::Queued);
}

#[test]
fn a_task_preempted_by_a_woken_task_waits_in_its_front_queue_even_if_taken() {
    let p = policy();
    let mut plat = Queues::default();
    plat.set_head(&p, Queue::Front(2), 100);
    // Another task waits in CPU 2's front queue: the next joins the LLC's.
    assert_eq!(p.queue_of(&mut plat, 2, false, false), Queue::Llc(0));
    // One that belongs there (it preempts, or a woken task preempted it)
    // joins the front queue anyway.
    assert_eq!(p.queue_of(&mut plat, 2, false, true), Queue::Front(2));
    // A pinned task waits in its CPU's queue of pinned tasks.
    assert_eq!(p.queue_of(&mut plat, 2, true, true), Queue::Pinned(2));
}

#[test]
fn a_cpu_takes_its_own_llc_then_steals_from_the_nearest_or_an_overloaded_one() {
    let p = policy();
    let mut plat = Queues::default();
    assert_eq!(p.queue_to_consume(&mut plat, 0), None);
    plat.set_len(&p, 1, 2);
    plat.set_head(&p, Queue::Llc(1), 0);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Llc(1)),
        "steal when empty"
    );
    plat.set_len(&p, 0, 2);
    plat.set_head(&p, Queue::Llc(0), 0);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Llc(0)),
        "own first"
    );
    plat.set_len(&p, 1, 5);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Llc(1)),
        "balance"
    );
}

#[test]
fn a_cpu_with_nothing_waiting_for_it_takes_the_task_beyond_another_llcs_fronts() {
    let p = policy();
    let mut plat = Queues::default();
    // CPU 2 of LLC 0 has a front task; LLC 1 (CPUs 4-7 and 12-15) has
    // one task waiting in its queue.
    let mut front = TaskState::new();
    p.task_queued(&mut front, Queue::Front(2));
    plat.set_head(&p, Queue::Front(2), 0);
    plat.set_len(&p, 1, 1);
    plat.set_head(&p, Queue::Llc(1), 0);
    let mut fronts: Vec<TaskState> = (0..7).map(|_| TaskState::new()).collect();
    for (cpu, task) in [4, 5, 6, 7, 12, 13, 14].into_iter().zip(fronts.iter_mut()) {
        p.task_queued(task, Queue::Front(cpu));
    }
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Front(2)),
        "a CPU of LLC 1 has no front task: that one takes LLC 1's"
    );
    let mut last = TaskState::new();
    p.task_queued(&mut last, Queue::Front(15));
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Llc(1)),
        "every CPU of LLC 1 has a front task: CPU 0 takes the one more"
    );
    plat.set_head(&p, Queue::Front(0), 5);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Front(0)),
        "a task waits for CPU 0"
    );
}

#[test]
fn a_woken_pinned_task_runs_next_only_if_no_queued_task_is_earlier() {
    let p = policy();
    let mut plat = Queues::default();
    assert!(p.woken_runs_next(&mut plat, 2, 100), "nothing waits");
    plat.set_len(&p, 0, 1);
    plat.set_head(&p, Queue::Llc(0), 100);
    assert!(
        p.woken_runs_next(&mut plat, 2, 100),
        "the LLC's first is as late"
    );
    assert!(
        !p.woken_runs_next(&mut plat, 2, 101),
        "the LLC's first is earlier"
    );
    plat.set_head(&p, Queue::Pinned(2), 50);
    assert!(p.woken_runs_next(&mut plat, 2, 40), "earlier than both");
    assert!(
        !p.woken_runs_next(&mut plat, 2, 50),
        "its own queue's first came first"
    );
    // Another CPU's pinned queue and another LLC's queue do not count.
    plat.set_head(&p, Queue::Pinned(3), 10);
    plat.set_len(&p, 1, 1);
    plat.set_head(&p, Queue::Llc(1), 10);
    assert!(p.woken_runs_next(&mut plat, 2, 40));
}

#[test]
fn pinned_tasks_compete_with_the_llc_queue_on_virtual_time() {
    let p = policy();
    let mut plat = Queues::default();
    plat.set_len(&p, 0, 1);
    plat.set_head(&p, Queue::Llc(0), 100);
    plat.set_head(&p, Queue::Pinned(2), 200);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Llc(0)));
    plat.set_head(&p, Queue::Pinned(2), 50);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Pinned(2)));
    // CPU 3's queue is CPU 3's only.
    assert_eq!(p.queue_to_consume(&mut plat, 3), Some(Queue::Llc(0)));
}

#[test]
fn a_task_queued_on_a_cpu_waits_in_its_front_queue_when_free() {
    let p = policy();
    let mut plat = Queues::default();
    assert_eq!(p.queue_of(&mut plat, 2, false, false), Queue::Front(2));
    assert_eq!(p.queue_of(&mut plat, 2, true, false), Queue::Pinned(2));
    plat.set_head(&p, Queue::Front(2), 100);
    assert_eq!(
        p.queue_of(&mut plat, 2, false, false),
        Queue::Llc(0),
        "one task per front queue"
    );
    assert_eq!(
        p.queue_of(&mut plat, 2, false, true),
        Queue::Front(2),
        "but for one that is to run next there"
    );
    assert_eq!(p.queue_of(&mut plat, 5, false, false), Queue::Front(5));
    assert_eq!(p.queue_of(&mut plat, 3, false, false), Queue::Front(3));
}

#[test]
fn a_cpu_takes_its_front_task_unless_the_llc_queue_s_first_is_far_earlier() {
    let p = policy();
    let mut plat = Queues::default();
    plat.set_head(&p, Queue::Front(2), 100 * SLICE);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Front(2)));
    plat.set_len(&p, 0, 1);
    plat.set_head(&p, Queue::Llc(0), 98 * SLICE);
    assert_eq!(
        p.queue_to_consume(&mut plat, 2),
        Some(Queue::Front(2)),
        "two slices later is within the locality window"
    );
    plat.set_head(&p, Queue::Llc(0), 98 * SLICE - 1);
    assert_eq!(
        p.queue_to_consume(&mut plat, 2),
        Some(Queue::Llc(0)),
        "fairness first beyond it"
    );
    plat.set_head(&p, Queue::Pinned(2), 98 * SLICE - 2);
    assert_eq!(
        p.queue_to_consume(&mut plat, 2),
        Some(Queue::Pinned(2)),
        "a pinned task earlier than what the CPU would take"
    );
    plat.set_head(&p, Queue::Llc(0), 200 * SLICE);
    plat.set_head(&p, Queue::Pinned(2), 150 * SLICE);
    assert_eq!(
        p.queue_to_consume(&mut plat, 2),
        Some(Queue::Front(2)),
        "the front task is earlier than the pinned one"
    );
    assert!(p.woken_runs_next(&mut plat, 2, 99 * SLICE));
    assert!(
        !p.woken_runs_next(&mut plat, 2, 101 * SLICE),
        "the front task comes first"
    );
}

#[test]
fn a_cpu_out_of_work_takes_another_cpu_s_front_task_its_own_llc_s_first() {
    let p = policy();
    let mut plat = Queues::default();
    let front = |plat: &mut Queues, cpu: u32, vtime: u64| {
        plat.heads.insert(Queue::Front(cpu), vtime);
        p.task_queued(&mut TaskState::new(), Queue::Front(cpu));
    };
    plat.heads.insert(Queue::Front(5), 10);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        None,
        "no look into a front queue counted as empty"
    );
    front(&mut plat, 5, 10);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Front(5)),
        "another LLC's, when nothing else waits"
    );
    front(&mut plat, 3, 300);
    front(&mut plat, 2, 200);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Front(2)),
        "its own LLC's, earliest first"
    );
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Front(2)));
    plat.empty(&p, Queue::Front(2));
    plat.empty(&p, Queue::Front(3));
    plat.set_len(&p, 1, 1);
    plat.set_head(&p, Queue::Llc(1), 10);
    assert_eq!(
        p.queue_to_consume(&mut plat, 0),
        Some(Queue::Llc(1)),
        "another LLC's queue before another LLC's front task"
    );
}

#[test]
fn a_running_task_keeps_its_cpu_against_later_tasks_and_other_cpus_front_tasks() {
    let p = policy();
    let mut plat = Queues::default();
    let mut task = TaskState::new();
    p.task_woken(&mut plat, &mut task, Queue::Llc(0), NICE_0, 0);
    run(&p, &mut task, 2, NICE_0, 0, 3 * SLICE);
    // Running again, at the end of its slice now.
    p.sched_running(&mut plat, &mut task, 2, NICE_0, 3 * SLICE);
    let now = 4 * SLICE;
    let vtime = task.vtime() + SLICE;
    plat.set_head(&p, Queue::Front(2), vtime);
    assert!(p.prev_keeps_cpu(&mut plat, 2, &task, NICE_0, Queue::Front(2), now));
    plat.set_head(&p, Queue::Front(2), vtime - 1);
    assert!(
        !p.prev_keeps_cpu(&mut plat, 2, &task, NICE_0, Queue::Front(2), now),
        "its front task is earlier"
    );
    plat.set_head(&p, Queue::Front(3), 0);
    assert!(
        p.prev_keeps_cpu(&mut plat, 2, &task, NICE_0, Queue::Front(3), now),
        "another CPU's front task runs at its own CPU's next switch"
    );
    plat.set_len(&p, 1, 1);
    plat.set_head(&p, Queue::Llc(1), u64::MAX / 2);
    assert!(
        !p.prev_keeps_cpu(&mut plat, 2, &task, NICE_0, Queue::Llc(1), now),
        "a load balance from another LLC"
    );
    plat.set_head(&p, Queue::Llc(0), vtime + SLICE);
    assert!(p.prev_keeps_cpu(&mut plat, 2, &task, NICE_0, Queue::Llc(0), now));
}

#[test]
fn slices_shrink_as_tasks_wait_down_to_a_quarter() {
    let p = policy();
    let mut plat = Queues::default();
    assert_eq!(p.slice(&mut plat, 0), SLICE);
    plat.set_len(&p, 0, 8);
    assert_eq!(p.slice(&mut plat, 0), SLICE / 2, "8 CPUs, 8 waiting");
    plat.set_len(&p, 0, 100);
    assert_eq!(p.slice(&mut plat, 0), SLICE / 4);
    assert!(p.tick_kick(&mut plat, 1), "tasks wait in CPU 1's LLC");
    assert!(!p.tick_kick(&mut plat, 4), "LLC 1 is empty");
    plat.set_head(&p, Queue::Front(4), 0);
    assert!(
        p.tick_kick(&mut plat, 4),
        "a task waits in CPU 4's front queue"
    );
    assert!(!p.tick_kick(&mut plat, 5));
}

#[test]
fn a_task_pinned_to_a_cpu_shortens_that_cpus_slices_as_one_per_cpu_of_its_llc() {
    let p = policy();
    let mut plat = Queues::default();
    let mut pinned = TaskState::new();
    p.task_queued(&mut pinned, Queue::Pinned(2));
    assert_eq!(
        p.slice(&mut plat, 2),
        SLICE / 2,
        "one task waiting for CPU 2 alone weighs as 8 waiting for LLC 0's 8 CPUs"
    );
    assert_eq!(p.slice(&mut plat, 3), SLICE, "nothing is pinned to CPU 3");
    p.task_dequeued(&mut pinned);
    assert_eq!(p.slice(&mut plat, 2), SLICE);
}

#[test]
fn virtual_time_keeps_its_lag_when_a_task_changes_llc() {
    let p = policy();
    let mut plat = Queues::default();
    let mut a = TaskState::new();
    let mut b = TaskState::new();
    p.task_woken(&mut plat, &mut a, Queue::Llc(0), NICE_0, 0);
    for i in 0..50 {
        run(&p, &mut a, 0, NICE_0, i * SLICE, SLICE);
    }
    p.task_woken(&mut plat, &mut b, Queue::Llc(1), NICE_0, 0);
    run(&p, &mut b, 4, NICE_0, 0, SLICE);
    // a (LLC 0's clock is 50 slices on) moves to LLC 1: it lands near
    // LLC 1's time, a slice ahead as it was in LLC 0, not 50 slices ahead.
    let moved = p.queue_vtime(&mut plat, &mut a, Queue::Llc(1), NICE_0);
    assert!(moved <= b.vtime() + 2 * SLICE, "{moved} vs {}", b.vtime());
}

/// Seen in the guest (stress-ng yield, race-sched and affinity): a task
/// run out of turn pushed LLC 0's time seconds ahead; tasks leaving LLC 0
/// arrived in LLC 1 seconds before everyone there, and the sched_yield()
/// loops among them, never sleeping, kept that credit while a task queued
/// behind them waited 31 s and the watchdog ejected the scheduler.
#[test]
fn a_task_changing_llc_brings_at_most_two_slices_of_credit() {
    let p = policy();
    let mut plat = Queues::default();
    let (mut a, mut b, mut low) = (TaskState::new(), TaskState::new(), TaskState::new());
    p.task_woken(&mut plat, &mut a, Queue::Llc(0), NICE_0, 0);
    run(&p, &mut a, 0, NICE_0, 0, SLICE);
    // A weight-1 task alone in LLC 0 runs 5 s of virtual time ahead.
    p.task_woken(&mut plat, &mut low, Queue::Llc(0), 1, 0);
    for i in 0..64 {
        run(&p, &mut low, 1, 1, i * SLICE, SLICE);
    }
    p.task_woken(&mut plat, &mut b, Queue::Llc(1), NICE_0, 0);
    run(&p, &mut b, 4, NICE_0, 0, SLICE);
    // a, still queued with its old virtual time, moves to LLC 1 (a CPU
    // there takes it, or its affinity changed).
    let moved = p.queue_vtime(&mut plat, &mut a, Queue::Llc(1), NICE_0);
    let llc1_time = b.vtime() - SLICE;
    let earliest = llc1_time.wrapping_sub(2 * SLICE);
    assert!(
        !before(moved, earliest),
        "a lands {} ms before LLC 1's time",
        llc1_time.wrapping_sub(moved) as i64 / MS as i64
    );
    // The same when a CPU of LLC 1 runs it at once.
    let mut c = TaskState::new();
    p.task_woken(&mut plat, &mut c, Queue::Llc(0), NICE_0, 0);
    p.sched_running(&mut plat, &mut c, 5, NICE_0, 0);
    assert!(!before(c.vtime(), earliest));
}

#[test]
fn a_woken_tasks_debt_is_bounded_too() {
    let p = policy();
    let mut plat = Queues::default();
    let (mut hog, mut nice10) = (TaskState::new(), TaskState::new());
    p.task_woken(&mut plat, &mut hog, Queue::Llc(0), NICE_0, 0);
    p.task_woken(&mut plat, &mut nice10, Queue::Llc(0), NICE_10, 0);
    // nice 10 ran 100 slices alone: 3.6 s of virtual time.
    for i in 0..100 {
        run(&p, &mut nice10, 1, NICE_10, i * SLICE, SLICE);
    }
    // It sleeps and wakes up while the hog waits at its old time.
    plat.set_len(&p, 0, 1);
    plat.set_head(&p, Queue::Llc(0), hog.vtime());
    p.task_woken(&mut plat, &mut nice10, Queue::Llc(0), NICE_10, 0);
    let bound = 2 * SLICE * 100 / NICE_10 as u64;
    assert_eq!(nice10.vtime(), hog.vtime() + bound);
}

#[test]
fn a_task_run_out_of_turn_does_not_drag_its_llcs_time_ahead() {
    let p = policy();
    let mut plat = Queues::default();
    let (mut waiting, mut late, mut new) = (TaskState::new(), TaskState::new(), TaskState::new());
    p.task_woken(&mut plat, &mut waiting, Queue::Llc(0), NICE_0, 0);
    p.task_woken(&mut plat, &mut late, Queue::Llc(0), 1, 0);
    run(&p, &mut late, 1, 1, 0, 50 * SLICE);
    // `late`, far ahead, runs again (an idle CPU) while `waiting` waits.
    plat.set_len(&p, 0, 1);
    plat.set_head(&p, Queue::Llc(0), waiting.vtime());
    p.sched_running(&mut plat, &mut late, 2, 1, 50 * SLICE);
    // The queue empties; a new task starts at the LLC's time: not after
    // the task that waited.
    plat.clear(&p);
    p.task_woken(&mut plat, &mut new, Queue::Llc(0), NICE_0, 0);
    assert!(!before(waiting.vtime(), new.vtime()));
}

#[test]
fn a_cpu_taken_by_another_class_is_busy_for_its_smt_sibling() {
    // CPUs 3 and 11 share a core. A fair task on CPU 3 (partial mode) makes
    // the task on CPU 11 share its core, until CPU 3 goes idle.
    let p = policy();
    assert!(!p.tick_unpair(11) && !p.tick_unpair(11), "CPU 3 is idle");
    p.cpu_busy(3, MS);
    assert!(!p.tick_unpair(11));
    assert!(p.tick_unpair(11), "two ticks beside a busy sibling");
    p.cpu_idle(3, 2 * MS);
    assert!(!p.tick_unpair(11) && !p.tick_unpair(11));
}

#[test]
fn a_task_runs_with_its_share_of_its_cgroups_weight() {
    // Root cgroup: the task's own weight.
    assert_eq!(task_weight(NICE_0, 0, 0), NICE_0);
    // One task alone in a cgroup of cpu.weight 400 and one in 100: 4:1.
    assert_eq!(task_weight(NICE_0, 400, 100), 400);
    assert_eq!(task_weight(NICE_0, 100, 100), 100);
    // Four equal tasks share their cgroup's weight.
    assert_eq!(task_weight(NICE_0, 400, 4 * 100), 100);
    // Nice still counts inside the cgroup: 100 / (100 + 11) and 11 / 111.
    assert_eq!(task_weight(NICE_0, 100, 111), 90);
    assert_eq!(task_weight(NICE_10, 100, 111), 9);
    // Bounded to sched_ext's weight range.
    assert_eq!(task_weight(1, 1, 10_000), 1);
    assert_eq!(task_weight(10_000, 10_000, 1), 10_000);
}

#[test]
fn a_lowest_weight_task_is_charged_as_weight_five() {
    // Weight 1 (SCHED_IDLE, nice 19) running 40 ms would lead by 4 s of
    // virtual time, and could wait longer than sched_ext's 30 s watchdog.
    let p = policy();
    let mut plat = Queues::default();
    let mut idle_task = TaskState::new();
    p.task_woken(&mut plat, &mut idle_task, Queue::Llc(0), 1, 0);
    let start = idle_task.vtime();
    run(&p, &mut idle_task, 0, 1, 0, 10 * SLICE);
    assert_eq!(idle_task.vtime() - start, 10 * SLICE * 100 / 5);
    // A nice 10 task is charged by its own weight.
    let mut nice10 = TaskState::new();
    p.task_woken(&mut plat, &mut nice10, Queue::Llc(1), NICE_10, 0);
    let start = nice10.vtime();
    run(&p, &mut nice10, 4, NICE_10, 0, SLICE);
    assert_eq!(nice10.vtime() - start, SLICE * 100 / 11);
}

#[test]
fn a_task_queued_for_over_a_second_runs_next_whatever_its_virtual_time() {
    let p = policy();
    const SEC: u64 = 1000 * MS;
    let now = 100 * SEC;
    assert!(!p.starving(0, now), "not queued");
    assert!(!p.starving(now - SEC / 2, now));
    assert!(!p.starving(now - SEC, now), "exactly the limit");
    assert!(p.starving(now - SEC - 1, now));
    assert!(
        !p.starving(now + 1, now),
        "queued by a CPU whose clock is ahead"
    );
}

#[test]
fn a_queue_is_swept_for_starving_tasks_once_per_100ms_and_again_after_a_rescue() {
    let p = policy();
    let mut sweep_at = 0;
    let now = 5000 * MS;
    assert!(p.starve_sweep_due(&mut sweep_at, now), "never swept");
    assert_eq!(sweep_at, now + 100 * MS);
    assert!(!p.starve_sweep_due(&mut sweep_at, now), "one caller");
    assert!(!p.starve_sweep_due(&mut sweep_at, now + 99 * MS));
    assert!(p.starve_sweep_due(&mut sweep_at, now + 100 * MS));
    assert_eq!(sweep_at, now + 200 * MS);
    p.starve_rescued(&mut sweep_at, now + 101 * MS);
    assert!(
        p.starve_sweep_due(&mut sweep_at, now + 101 * MS),
        "a sweep that found a starving task is followed by another at once"
    );
    assert_eq!(sweep_at, now + 201 * MS);
}

#[test]
fn the_policy_looks_only_into_queues_it_counts_tasks_in() {
    // The host's queues hold tasks the policy was not told of: it does
    // not look (a look is a lookup by id in sched_ext), and sizes slices
    // by its own counts.
    let p = policy();
    let mut plat = Queues::default();
    for queue in [Queue::Llc(0), Queue::Pinned(2), Queue::Front(2)] {
        plat.heads.insert(queue, 0);
    }
    plat.queued.insert(0, 8);
    assert_eq!(p.queue_to_consume(&mut plat, 2), None);
    assert_eq!(p.slice(&mut plat, 0), SLICE);
    // Each task counted in as the host queues it, and out as it runs.
    let mut tasks = [TaskState::new(), TaskState::new(), TaskState::new()];
    p.task_queued(&mut tasks[0], Queue::Llc(0));
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Llc(0)));
    p.task_queued(&mut tasks[1], Queue::Front(2));
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Front(2)));
    p.task_queued(&mut tasks[2], Queue::Pinned(2));
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Pinned(2)));
    p.sched_running(&mut plat, &mut tasks[2], 2, NICE_0, 0);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Front(2)));
    // Moved to another queue: counted there only; out of the scheduler:
    // counted nowhere.
    p.task_queued(&mut tasks[1], Queue::Llc(1));
    plat.heads.insert(Queue::Llc(1), 0);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Llc(0)));
    p.task_dequeued(&mut tasks[0]);
    assert_eq!(p.queue_to_consume(&mut plat, 2), Some(Queue::Llc(1)));
    p.task_dequeued(&mut tasks[1]);
    assert_eq!(p.queue_to_consume(&mut plat, 2), None);
    // The tick asks the host, whatever the counts.
    assert!(
        p.tick_kick(&mut plat, 1),
        "the host's LLC 0 queue holds tasks"
    );
}
