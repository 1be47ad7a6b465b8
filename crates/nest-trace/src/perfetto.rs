//! Export to Perfetto's native trace format: a `Trace` protobuf message,
//! i.e. a stream of `TracePacket`s (field 1, length-delimited), written by
//! hand with the field numbers of perfetto's protos
//! (protos/perfetto/trace/trace_packet.proto, ftrace/ftrace_event.proto,
//! ftrace/sched.proto, ftrace/task.proto, ftrace/power.proto,
//! ps/process_tree.proto).
//!
//! The first packet is a `ProcessTree` naming every task (each task is shown
//! as its own process: the model has no thread groups). Then come
//! `FtraceEventBundle`s, one CPU each, with `sched_switch`, `sched_waking`
//! (from wakeups), `task_newtask`, `task_rename` (exec and renames),
//! `sched_process_free` (exits), `cpu_frequency`, `cpu_idle`, and `print`
//! counters `C|0|nest cpuN|v` for Nest membership (0 none, 1 reserve, 2
//! primary): ui.perfetto.dev shows CPU tracks, thread states and frequency
//! counters from these. Migrations and warm spins are not exported.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;

use crate::model::{Cpu, Event, EventKind, Nest, Pid, PrevState, Trace};

/// A protobuf message under construction.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint_raw(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint_raw(u64::from(field) << 3 | u64::from(wire));
    }

    fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.key(field, 0);
        self.varint_raw(v);
        self
    }

    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint_raw(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

// TracePacket fields.
const PACKET: u32 = 1;
const PKT_FTRACE_EVENTS: u32 = 1;
const PKT_PROCESS_TREE: u32 = 2;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQUENCE_ID: u32 = 10;
// FtraceEventBundle / FtraceEvent fields.
const BUNDLE_CPU: u32 = 1;
const BUNDLE_EVENT: u32 = 2;
const EV_TIMESTAMP: u32 = 1;
const EV_PID: u32 = 2;
const EV_PRINT: u32 = 3;
const EV_SCHED_SWITCH: u32 = 4;
const EV_CPU_FREQUENCY: u32 = 11;
const EV_CPU_IDLE: u32 = 13;
const EV_SCHED_WAKING: u32 = 20;
const EV_TASK_NEWTASK: u32 = 235;
const EV_TASK_RENAME: u32 = 236;
const EV_SCHED_PROCESS_FREE: u32 = 240;

/// Events per bundle before a new packet is started.
const BUNDLE_LEN: usize = 1024;
const PRIO: u64 = 120;

/// The trace as a Perfetto protobuf trace.
pub fn to_perfetto(trace: &Trace) -> Vec<u8> {
    let mut ex = Exporter::default();
    ex.collect_names(trace);
    let mut out = Msg::default();
    out.msg(PACKET, &ex.process_tree());
    let mut bundles: HashMap<Cpu, Vec<Msg>> = HashMap::new();
    for e in &trace.events {
        let Some((cpu, event)) = ex.event(e) else {
            continue;
        };
        let pending = bundles.entry(cpu).or_default();
        pending.push(event);
        if pending.len() >= BUNDLE_LEN {
            out.msg(PACKET, &bundle_packet(cpu, pending));
            pending.clear();
        }
    }
    let mut rest: Vec<_> = bundles.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    rest.sort_by_key(|(cpu, _)| *cpu);
    for (cpu, events) in rest {
        out.msg(PACKET, &bundle_packet(cpu, &events));
    }
    out.0
}

/// Write the Perfetto trace of `trace` to `path` (open it in
/// ui.perfetto.dev).
pub fn write_perfetto(trace: &Trace, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, to_perfetto(trace))
        .with_context(|| format!("cannot write {}", path.display()))
}

fn bundle_packet(cpu: Cpu, events: &[Msg]) -> Msg {
    let mut bundle = Msg::default();
    bundle.uint(BUNDLE_CPU, cpu.into());
    for e in events {
        bundle.msg(BUNDLE_EVENT, e);
    }
    let mut packet = Msg::default();
    packet
        .msg(PKT_FTRACE_EVENTS, &bundle)
        .uint(PKT_SEQUENCE_ID, 1);
    packet
}

#[derive(Default)]
struct Exporter {
    /// Final name and parent of every task, for the process tree.
    tasks: std::collections::BTreeMap<Pid, (String, Pid)>,
    /// Names as the events go.
    names: HashMap<Pid, String>,
    /// Task running on each CPU as the events go (the ftrace event's pid).
    current: HashMap<Cpu, Pid>,
}

impl Exporter {
    fn collect_names(&mut self, trace: &Trace) {
        for e in &trace.events {
            let (pid, name, parent) = match &e.kind {
                EventKind::NewTask {
                    parent,
                    child,
                    comm,
                } => (*child, Some(comm), Some(*parent)),
                EventKind::Exec { pid, comm } | EventKind::TaskName { pid, comm } => {
                    (*pid, Some(comm), None)
                }
                EventKind::Switch { prev, next, .. } => {
                    self.tasks.entry(*prev).or_default();
                    (*next, None, None)
                }
                EventKind::Wakeup { pid, .. } | EventKind::Exit { pid } => (*pid, None, None),
                _ => continue,
            };
            let entry = self.tasks.entry(pid).or_default();
            if let Some(name) = name {
                entry.0 = name.clone();
            }
            if let Some(parent) = parent {
                entry.1 = parent;
            }
        }
        self.tasks.remove(&0);
    }

    fn process_tree(&self) -> Msg {
        let mut tree = Msg::default();
        for (&pid, (name, parent)) in &self.tasks {
            let mut process = Msg::default();
            process
                .uint(1, pid.into())
                .uint(2, (*parent).into())
                .string(3, name);
            tree.msg(1, &process);
        }
        for (&pid, (name, _)) in &self.tasks {
            let mut thread = Msg::default();
            thread
                .uint(1, pid.into())
                .string(2, name)
                .uint(3, pid.into());
            tree.msg(2, &thread);
        }
        let mut packet = Msg::default();
        packet
            .uint(PKT_TIMESTAMP, 0)
            .msg(PKT_PROCESS_TREE, &tree)
            .uint(PKT_SEQUENCE_ID, 1);
        packet
    }

    fn comm(&self, pid: Pid, cpu: Cpu) -> String {
        match pid {
            0 => format!("swapper/{cpu}"),
            _ => self.names.get(&pid).cloned().unwrap_or_default(),
        }
    }

    /// The FtraceEvent for `e`, and the CPU whose bundle it goes in.
    fn event(&mut self, e: &Event) -> Option<(Cpu, Msg)> {
        let cpu = e.cpu;
        let mut current = self.current.get(&cpu).copied().unwrap_or(0);
        let (field, body) = match &e.kind {
            EventKind::Switch {
                prev,
                prev_state,
                next,
            } => {
                self.current.insert(cpu, *next);
                (EV_SCHED_SWITCH, self.switch(cpu, *prev, *prev_state, *next))
            }
            EventKind::Wakeup {
                pid,
                target_cpu,
                waker,
            } => {
                // The event's pid is the waker's, as in the kernel's
                // sched_waking: Perfetto draws "woken by" from it.
                if let Some(w) = waker {
                    current = w.pid;
                }
                let mut m = Msg::default();
                m.string(1, &self.comm(*pid, cpu))
                    .uint(2, (*pid).into())
                    .uint(3, PRIO);
                m.uint(4, 1).uint(5, (*target_cpu).into());
                (EV_SCHED_WAKING, m)
            }
            EventKind::NewTask { child, comm, .. } => {
                self.names.insert(*child, comm.clone());
                let mut m = Msg::default();
                m.uint(1, (*child).into()).string(2, comm).uint(3, 0);
                (EV_TASK_NEWTASK, m)
            }
            EventKind::Exec { pid, comm } | EventKind::TaskName { pid, comm } => {
                let old = self.names.insert(*pid, comm.clone()).unwrap_or_default();
                if old.is_empty() || old == *comm {
                    return None;
                }
                let mut m = Msg::default();
                m.uint(1, (*pid).into()).string(2, &old).string(3, comm);
                (EV_TASK_RENAME, m)
            }
            EventKind::Exit { pid } => {
                let mut m = Msg::default();
                m.string(1, &self.comm(*pid, cpu))
                    .uint(2, (*pid).into())
                    .uint(3, PRIO);
                (EV_SCHED_PROCESS_FREE, m)
            }
            EventKind::Frequency { khz } => (EV_CPU_FREQUENCY, state_cpu((*khz).into(), cpu)),
            EventKind::IdleEnter => (EV_CPU_IDLE, state_cpu(0, cpu)),
            EventKind::IdleExit => (EV_CPU_IDLE, state_cpu(u32::MAX.into(), cpu)),
            EventKind::NestChange { nest } => {
                let v = match nest {
                    Nest::None => 0,
                    Nest::Reserve => 1,
                    Nest::Primary => 2,
                };
                let mut m = Msg::default();
                m.uint(1, 0).string(2, &format!("C|0|nest cpu{cpu}|{v}\n"));
                (EV_PRINT, m)
            }
            EventKind::Migrate { .. }
            | EventKind::WarmSpin { .. }
            | EventKind::Placement { .. } => {
                return None;
            }
        };
        let mut ev = Msg::default();
        ev.uint(EV_TIMESTAMP, e.ts_ns)
            .uint(EV_PID, current.into())
            .msg(field, &body);
        Some((cpu, ev))
    }

    fn switch(&self, cpu: Cpu, prev: Pid, state: PrevState, next: Pid) -> Msg {
        // The kernel's reported task state bits: R = 0, S = 1, X = 0x10.
        let state = match state {
            PrevState::Runnable => 0,
            PrevState::Blocked => 1,
            PrevState::Dead => 0x10,
        };
        let mut m = Msg::default();
        m.string(1, &self.comm(prev, cpu))
            .uint(2, prev.into())
            .uint(3, PRIO)
            .uint(4, state);
        m.string(5, &self.comm(next, cpu))
            .uint(6, next.into())
            .uint(7, PRIO);
        m
    }
}

fn state_cpu(state: u64, cpu: Cpu) -> Msg {
    let mut m = Msg::default();
    m.uint(1, state).uint(2, cpu.into());
    m
}
