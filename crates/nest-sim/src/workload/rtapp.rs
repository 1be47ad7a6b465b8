//! rt-app JSON workloads (<https://github.com/scheduler-tools/rt-app>,
//! doc/tutorial.txt), with a few extensions for what rt-app lacks.
//!
//! Supported: `global.duration` (s); per task `instance`, `loop`, `phases`
//! (each with its own `loop`) or events directly in the task; events (matched
//! by prefix, so `run0`, `run1` work as in rt-app): `run` (us of work at
//! nominal frequency), `runtime` (us of time), `sleep` (us), `timer`
//! (`{"ref", "period"}`), `barrier`, `lock`, `unlock`, `fork` (task name;
//! templates have `"instance": 0`), `suspend`/`resume` (counting channels).
//! Per task: `cpus` (the CPUs it may run on) and `delay` (us before its
//! initial instances start; not for templates, which only `fork` starts).
//! Extensions: per task `start_cpu` (the CPU its initial instances start
//! on; by default the policy places them as forks from CPU 0; not for
//! templates) or `prev_cpu` (they start as tasks woken with this previous
//! CPU, placed by the policy as a wakeup; not for templates),
//! `kernel_thread` (`true`: its tasks are kernel threads), `first_vcpu_wakeup`
//! (us: on a guest's model, its tasks' first start on an idle vCPU waits
//! this long, a replay's recorded delay, instead of a drawn one),
//! `global.nests`
//! (`{"primary": [CPUs], "reserve": [CPUs], "idle_us": {"CPU": us}}`:
//! Nest's nests at time 0 and how long their CPUs had been idle, as a
//! replay of a recording of `scx_nest --trace-nests` had them), and events
//! `wait_children` (`true`: wait for every forked child), `vcpu_wakeup`
//! (us: the same for the task's next start on an idle vCPU), `send`
//! and `recv` (`resume`/`suspend` with pipe semantics: a `send` wakes its
//! receiver synchronously, `WF_SYNC`), and `[min, max]` for any
//! duration (drawn uniformly per use from the task's seeded PRNG).
//!
//! Object key order matters (events run in file order), so the file is read
//! into an order-preserving tree; errors name the file and a JSON path (or
//! line and column for syntax errors).

use std::collections::BTreeMap;
use std::fmt;

use anyhow::{Result, anyhow, bail};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{Amount, Nests, Op, Program, Workload};

/// A JSON value whose objects keep their key order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Num(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Num(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Num(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Str(v.to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element()? {
            v.push(x);
        }
        Ok(Json::Arr(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(kv) = a.next_entry()? {
            v.push(kv);
        }
        Ok(Json::Obj(v))
    }
}

/// Parses an rt-app file; `origin` (usually the path) names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Workload> {
    let root: Json = serde_json::from_str(text).map_err(|e| {
        anyhow!(
            "{origin}:{}:{}: {e} (expected an rt-app JSON document)",
            e.line(),
            e.column()
        )
    })?;
    Builder::default()
        .build(&root, origin)
        .map_err(|e| anyhow!("{origin}: {e}"))
}

/// Keys of a task or phase that rt-app accepts and the simulator ignores.
const IGNORED_KEYS: &[&str] = &[
    "priority",
    "policy",
    "nodes_membind",
    "taskgroup",
    "nice",
    "util_min",
    "util_max",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
];

/// Keys of a task that are not events.
const TASK_KEYS: &[&str] = &[
    "instance",
    "loop",
    "phases",
    "cpus",
    "delay",
    "start_cpu",
    "prev_cpu",
    "kernel_thread",
    "first_vcpu_wakeup",
];

/// Keys of a phase that are not events.
const PHASE_KEYS: &[&str] = &["loop"];

#[derive(Default)]
struct Builder {
    names: BTreeMap<String, usize>,
    barriers: BTreeMap<String, usize>,
    locks: BTreeMap<String, usize>,
    channels: BTreeMap<String, usize>,
    timers: BTreeMap<String, usize>,
}

fn obj<'a>(v: &'a Json, path: &str) -> Result<&'a [(String, Json)]> {
    match v {
        Json::Obj(o) => Ok(o),
        _ => bail!("{path}: expected an object"),
    }
}

fn get<'a>(o: &'a [(String, Json)], key: &str) -> Option<&'a Json> {
    o.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn count(v: &Json, path: &str) -> Result<i64> {
    match v {
        Json::Num(n) if n.fract() == 0.0 => Ok(*n as i64),
        _ => bail!("{path}: expected an integer"),
    }
}

fn name(v: &Json, path: &str) -> Result<String> {
    match v {
        Json::Str(s) => Ok(s.clone()),
        _ => bail!("{path}: expected a name (string)"),
    }
}

/// A duration in microseconds, returned in ns: a number or `[min, max]`.
fn micros(v: &Json, path: &str) -> Result<Amount> {
    let us = |v: &Json| match v {
        Json::Num(n) if *n >= 0.0 => Some((n * 1000.0).round() as u64),
        _ => None,
    };
    match v {
        Json::Arr(a) if a.len() == 2 => match (us(&a[0]), us(&a[1])) {
            (Some(lo), Some(hi)) if lo <= hi => Ok(Amount::Uniform(lo, hi)),
            _ => bail!("{path}: expected [min, max] microseconds with 0 <= min <= max"),
        },
        _ => us(v)
            .map(Amount::Fixed)
            .ok_or_else(|| anyhow!("{path}: expected microseconds (a number >= 0 or [min, max])")),
    }
}

/// rt-app `cpus`: a non-empty list of CPU numbers, returned ascending.
/// Whether the machine has them is checked when it is known (`Sim::new`).
fn cpus(v: &Json, path: &str) -> Result<Vec<u32>> {
    let cpus = cpu_list(v, path)?;
    if cpus.is_empty() {
        bail!("{path}: expected a non-empty list of CPU numbers, e.g. [0, 2]");
    }
    Ok(cpus)
}

/// A list of distinct CPU numbers, possibly empty, returned ascending.
fn cpu_list(v: &Json, path: &str) -> Result<Vec<u32>> {
    let expected = || anyhow!("{path}: expected a list of CPU numbers, e.g. [0, 2]");
    let Json::Arr(a) = v else {
        return Err(expected());
    };
    let mut cpus = a
        .iter()
        .map(|c| match c {
            Json::Num(n) if n.fract() == 0.0 && *n >= 0.0 && *n <= f64::from(u32::MAX) => {
                Ok(*n as u32)
            }
            _ => Err(expected()),
        })
        .collect::<Result<Vec<u32>>>()?;
    cpus.sort_unstable();
    if let Some(w) = cpus.windows(2).find(|w| w[0] == w[1]) {
        bail!("{path}: CPU {} is listed twice", w[0]);
    }
    Ok(cpus)
}

/// rt-app `delay` of task `t`: fixed microseconds before it starts, in ns
/// (0 if absent). Only for tasks started at time 0.
fn delay(t: &[(String, Json)], path: &str, instances: i64) -> Result<u64> {
    let Some(v) = get(t, "delay") else {
        return Ok(0);
    };
    let path = format!("{path}.delay");
    let ns = fixed_micros(v, &path)?;
    if instances == 0 {
        bail!("{path}: only for tasks started at time 0 (\"instance\" >= 1), not templates");
    }
    Ok(ns)
}

/// `start_cpu` or `prev_cpu` (`key`) of task `t` (extensions): the CPU its
/// initial instances start on, or start woken from. Only for tasks started
/// at time 0.
fn initial_cpu(t: &[(String, Json)], path: &str, instances: i64, key: &str) -> Result<Option<u32>> {
    let Some(v) = get(t, key) else {
        return Ok(None);
    };
    let path = format!("{path}.{key}");
    let cpu = match v {
        Json::Num(n) if n.fract() == 0.0 && *n >= 0.0 && *n <= f64::from(u32::MAX) => *n as u32,
        _ => bail!("{path}: expected a CPU number, e.g. 3"),
    };
    if instances == 0 {
        bail!("{path}: only for tasks started at time 0 (\"instance\" >= 1), not templates");
    }
    Ok(Some(cpu))
}

/// `global.nests` (extension): `{"primary": [CPUs], "reserve": [CPUs],
/// "idle_us": {"CPU": us}}`, either list may be absent or empty, no CPU in
/// both; `idle_us`: how long a CPU of the nests had been idle (0 if left
/// out).
fn initial_nests(root: &[(String, Json)]) -> Result<Option<Nests>> {
    let Some(g) = get(root, "global") else {
        return Ok(None);
    };
    let Some(nests) = get(obj(g, "$.global")?, "nests") else {
        return Ok(None);
    };
    let path = "$.global.nests";
    let nests = obj(nests, path)?;
    if let Some((key, _)) = nests
        .iter()
        .find(|(k, _)| !["primary", "reserve", "idle_us"].contains(&k.as_str()))
    {
        bail!("{path}.{key}: expected only \"primary\", \"reserve\" and \"idle_us\"");
    }
    let list = |key: &str| match get(nests, key) {
        Some(v) => cpu_list(v, &format!("{path}.{key}")),
        None => Ok(Vec::new()),
    };
    let (primary, reserve) = (list("primary")?, list("reserve")?);
    if let Some(cpu) = primary.iter().find(|c| reserve.contains(c)) {
        bail!("{path}: CPU {cpu} is in both the primary nest and the reserve");
    }
    let mut idle_ns = BTreeMap::new();
    if let Some(idle) = get(nests, "idle_us") {
        for (key, v) in obj(idle, &format!("{path}.idle_us"))? {
            let at = format!("{path}.idle_us.{key}");
            let cpu: u32 = key
                .parse()
                .map_err(|_| anyhow!("{at}: expected a CPU number as the key"))?;
            if !primary.contains(&cpu) && !reserve.contains(&cpu) {
                bail!("{at}: CPU {cpu} is in neither nest");
            }
            idle_ns.insert(cpu, fixed_micros(v, &at)?);
        }
    }
    Ok(Some(Nests {
        primary,
        reserve,
        idle_ns,
    }))
}

/// `first_vcpu_wakeup` of task `t` (extension): how long its tasks' first start
/// on an idle vCPU waits, ns.
fn first_vcpu_wakeup(t: &[(String, Json)], path: &str) -> Result<Option<u64>> {
    get(t, "first_vcpu_wakeup")
        .map(|v| fixed_micros(v, &format!("{path}.first_vcpu_wakeup")))
        .transpose()
}

/// Fixed microseconds (no range), in ns.
fn fixed_micros(v: &Json, path: &str) -> Result<u64> {
    match micros(v, path)? {
        Amount::Fixed(ns) => Ok(ns),
        _ => bail!("{path}: expected fixed microseconds (a number >= 0)"),
    }
}

/// `kernel_thread` of task `t` (extension): are its tasks kernel threads?
fn kernel_thread(t: &[(String, Json)], path: &str) -> Result<bool> {
    match get(t, "kernel_thread") {
        None => Ok(false),
        Some(Json::Bool(b)) => Ok(*b),
        Some(_) => bail!("{path}.kernel_thread: expected true or false"),
    }
}

fn intern(map: &mut BTreeMap<String, usize>, key: String) -> usize {
    let n = map.len();
    *map.entry(key).or_insert(n)
}

impl Builder {
    fn build(mut self, root: &Json, origin: &str) -> Result<Workload> {
        let root = obj(root, "$")?;
        let tasks = get(root, "tasks").ok_or_else(|| anyhow!("$: expected a \"tasks\" object"))?;
        let tasks = obj(tasks, "$.tasks")?;
        if tasks.is_empty() {
            bail!("$.tasks: expected at least one task");
        }
        for (i, (n, _)) in tasks.iter().enumerate() {
            self.names.insert(n.clone(), i);
        }
        let duration_ns = self.duration(root)?;
        let mut programs = Vec::new();
        let mut initial = Vec::new();
        for (i, (n, t)) in tasks.iter().enumerate() {
            let path = format!("$.tasks.{n}");
            let t = obj(t, &path)?;
            let instances = match get(t, "instance") {
                Some(v) => count(v, &format!("{path}.instance"))?,
                None => 1,
            };
            if instances < 0 {
                bail!("{path}.instance: expected a count >= 0");
            }
            if instances > 0 {
                initial.push((i, instances as u32));
            }
            let delay_ns = delay(t, &path, instances)?;
            let cpus = get(t, "cpus")
                .map(|v| cpus(v, &format!("{path}.cpus")))
                .transpose()?;
            let start = initial_cpu(t, &path, instances, "start_cpu")?;
            let prev_cpu = initial_cpu(t, &path, instances, "prev_cpu")?;
            if start.is_some() && prev_cpu.is_some() {
                bail!("{path}: `start_cpu` and `prev_cpu` exclude each other");
            }
            for (key, cpu) in [("start_cpu", start), ("prev_cpu", prev_cpu)] {
                if let (Some(cpus), Some(cpu)) = (&cpus, cpu)
                    && !cpus.contains(&cpu)
                {
                    bail!("{path}.{key}: CPU {cpu} is not one of its cpus {cpus:?}");
                }
            }
            programs.push(Program {
                name: n.clone(),
                ops: self.task_ops(t, &path)?,
                cpus,
                delay_ns,
                start_cpu: start,
                prev_cpu,
                kernel_thread: kernel_thread(t, &path)?,
                first_vcpu_wakeup_ns: first_vcpu_wakeup(t, &path)?,
            });
        }
        let barriers = barrier_participants(&programs, &initial, self.barriers.len());
        Ok(Workload {
            name: origin.to_owned(),
            programs,
            initial,
            barriers,
            nr_locks: self.locks.len(),
            nr_channels: self.channels.len(),
            duration_ns,
            initial_nests: initial_nests(root)?,
        })
    }

    fn duration(&self, root: &[(String, Json)]) -> Result<Option<u64>> {
        let Some(g) = get(root, "global") else {
            return Ok(None);
        };
        let g = obj(g, "$.global")?;
        match get(g, "duration") {
            Some(Json::Num(s)) if *s > 0.0 => Ok(Some((s * 1e9) as u64)),
            Some(Json::Num(_)) => Ok(None), // rt-app: <= 0 means forever
            Some(_) => bail!("$.global.duration: expected seconds (a number)"),
            None => Ok(None),
        }
    }

    /// A task: its own loop around either phases or events.
    fn task_ops(&mut self, t: &[(String, Json)], path: &str) -> Result<Vec<Op>> {
        let mut body = Vec::new();
        if let Some(phases) = get(t, "phases") {
            for (pn, p) in obj(phases, &format!("{path}.phases"))? {
                let ppath = format!("{path}.phases.{pn}");
                let p = obj(p, &ppath)?;
                let ops = self.events(p, &ppath, PHASE_KEYS)?;
                let looped = self.looped(p, &ppath, ops)?;
                body.extend(shift_loops(looped, body.len()));
            }
        } else {
            body = self.events(t, path, TASK_KEYS)?;
        }
        self.looped(t, path, body)
    }

    /// Wraps `ops` in the object's `loop` (rt-app: -1 means forever).
    fn looped(&self, o: &[(String, Json)], path: &str, ops: Vec<Op>) -> Result<Vec<Op>> {
        let n = match get(o, "loop") {
            Some(v) => count(v, &format!("{path}.loop"))?,
            None => 1,
        };
        if n == 1 {
            return Ok(ops);
        }
        if n == 0 || n < -1 {
            bail!("{path}.loop: expected a count >= 1, or -1 for forever");
        }
        if n < 0 && !ops.iter().any(takes_time) {
            bail!(
                "{path}.loop: a loop forever needs an event that takes time (run, runtime, sleep, timer) or waits"
            );
        }
        let mut v = vec![Op::LoopStart {
            count: if n < 0 { 0 } else { n as u64 },
        }];
        v.extend(shift_loops(ops, 1));
        v.push(Op::LoopEnd { start: 0 });
        Ok(v)
    }

    /// The events of object `o`, skipping its structural `keys`.
    fn events(&mut self, o: &[(String, Json)], path: &str, keys: &[&str]) -> Result<Vec<Op>> {
        let mut ops = Vec::new();
        for (k, v) in o {
            let kpath = format!("{path}.{k}");
            if keys.contains(&k.as_str()) || IGNORED_KEYS.contains(&k.as_str()) {
                continue;
            }
            if let Some(op) = self.event(k, v, &kpath)? {
                ops.push(op);
            }
        }
        Ok(ops)
    }

    fn event(&mut self, k: &str, v: &Json, path: &str) -> Result<Option<Op>> {
        // Longest prefixes first: "runtime" before "run", "resume" before "r".
        let op = if k.starts_with("runtime") {
            Op::RunTime(micros(v, path)?)
        } else if k.starts_with("run") {
            Op::Run(micros(v, path)?)
        } else if k.starts_with("sleep") {
            Op::Sleep(micros(v, path)?)
        } else if k.starts_with("timer") {
            self.timer(v, path)?
        } else if k.starts_with("barrier") {
            Op::Barrier(intern(&mut self.barriers, name(v, path)?))
        } else if k.starts_with("unlock") {
            Op::Unlock(intern(&mut self.locks, name(v, path)?))
        } else if k.starts_with("lock") {
            Op::Lock(intern(&mut self.locks, name(v, path)?))
        } else if k.starts_with("fork") {
            let n = name(v, path)?;
            let program = *self
                .names
                .get(&n)
                .ok_or_else(|| anyhow!("{path}: expected the name of a task, found `{n}`"))?;
            Op::Fork { program }
        } else if k.starts_with("resume") || k.starts_with("send") {
            // rt-app's resume signals a condition variable (a futex: no
            // WF_SYNC); `send` stands for a pipe write (WF_SYNC).
            let sync = k.starts_with("send");
            let chan = intern(&mut self.channels, name(v, path)?);
            Op::Send { chan, sync }
        } else if k.starts_with("suspend") || k.starts_with("recv") {
            Op::Recv(intern(&mut self.channels, name(v, path)?))
        } else if k.starts_with("vcpu_wakeup") {
            Op::VcpuWakeup(fixed_micros(v, path)?)
        } else if k.starts_with("wait_children") {
            match v {
                Json::Bool(true) => Op::WaitChildren,
                Json::Bool(false) => return Ok(None),
                _ => bail!("{path}: expected true or false"),
            }
        } else {
            bail!(
                "{path}: unknown event `{k}`; expected one of run, runtime, sleep, timer, \
                 barrier, lock, unlock, fork, suspend, resume, send, recv, wait_children, \
                 vcpu_wakeup, instance, loop, phases"
            );
        };
        Ok(Some(op))
    }

    fn timer(&mut self, v: &Json, path: &str) -> Result<Op> {
        let t = obj(v, path)?;
        let r = get(t, "ref").ok_or_else(|| anyhow!("{path}: expected a \"ref\" name"))?;
        let id = intern(&mut self.timers, name(r, &format!("{path}.ref"))?);
        let p = get(t, "period").ok_or_else(|| anyhow!("{path}: expected a \"period\""))?;
        match micros(p, &format!("{path}.period"))? {
            Amount::Fixed(period_ns) if period_ns > 0 => Ok(Op::Timer { id, period_ns }),
            _ => bail!("{path}.period: expected a fixed period > 0 microseconds"),
        }
    }
}

/// Whether an operation consumes time or may wait (so a loop of it cannot
/// spin forever at one instant).
fn takes_time(op: &Op) -> bool {
    !matches!(
        op,
        Op::Fork { .. }
            | Op::Send { .. }
            | Op::Unlock(_)
            | Op::LoopStart { .. }
            | Op::LoopEnd { .. }
    )
}

/// Re-bases `LoopEnd` targets of `ops` after inserting `by` ops before them.
pub(crate) fn shift_loops(ops: Vec<Op>, by: usize) -> Vec<Op> {
    ops.into_iter()
        .map(|op| match op {
            Op::LoopEnd { start } => Op::LoopEnd { start: start + by },
            op => op,
        })
        .collect()
}

/// Barrier participants: every initial instance of a program using it.
pub(crate) fn barrier_participants(
    programs: &[Program],
    initial: &[(usize, u32)],
    nr: usize,
) -> Vec<u32> {
    let mut n = vec![0; nr];
    for &(p, inst) in initial {
        let mut used: Vec<usize> = programs[p]
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Barrier(b) => Some(*b),
                _ => None,
            })
            .collect();
        used.sort_unstable();
        used.dedup();
        for b in used {
            n[b] += inst;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{
        "global": { "duration": 2 },
        "tasks": {
            "shell": { "loop": 3, "run": 100, "fork": "child", "wait_children": true },
            "child": { "instance": 0, "phases": {
                "a": { "loop": 2, "run0": [10, 20], "sleep": 5 },
                "b": { "runtime": 50, "barrier": "x", "lock": "m", "unlock": "m" } } }
        }
    }"#;

    #[test]
    fn parses_events_in_file_order() {
        let w = parse(OK, "ok.json").unwrap();
        assert_eq!(w.duration_ns, Some(2_000_000_000));
        assert_eq!(w.initial, vec![(0, 1)]);
        assert_eq!(
            w.programs[0].ops,
            vec![
                Op::LoopStart { count: 3 },
                Op::Run(Amount::Fixed(100_000)),
                Op::Fork { program: 1 },
                Op::WaitChildren,
                Op::LoopEnd { start: 0 },
            ]
        );
        assert_eq!(
            w.programs[1].ops[..4],
            [
                Op::LoopStart { count: 2 },
                Op::Run(Amount::Uniform(10_000, 20_000)),
                Op::Sleep(Amount::Fixed(5_000)),
                Op::LoopEnd { start: 0 },
            ]
        );
        assert_eq!(w.programs[1].ops[4], Op::RunTime(Amount::Fixed(50_000)));
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(text, "w.json").unwrap_err())
    }

    #[test]
    fn vcpu_wakeups_are_fixed_microseconds_for_the_first_start_or_the_next() {
        let w = parse(
            r#"{"tasks": {"t": {"first_vcpu_wakeup": 40, "run": 1, "vcpu_wakeup1": 7.5, "sleep": 9}}}"#,
            "w.json",
        )
        .unwrap();
        assert_eq!(w.programs[0].first_vcpu_wakeup_ns, Some(40_000));
        assert_eq!(
            w.programs[0].ops,
            [
                Op::Run(Amount::Fixed(1_000)),
                Op::VcpuWakeup(7_500),
                Op::Sleep(Amount::Fixed(9_000)),
            ]
        );
        let e = err(r#"{"tasks": {"t": {"first_vcpu_wakeup": [1, 2], "run": 1}}}"#);
        assert_eq!(
            e,
            "w.json: $.tasks.t.first_vcpu_wakeup: expected fixed microseconds (a number >= 0)"
        );
        let e = err(r#"{"tasks": {"t": {"run": 1, "vcpu_wakeup2": -1}}}"#);
        assert!(e.starts_with("w.json: $.tasks.t.vcpu_wakeup2: "), "{e}");
    }

    #[test]
    fn kernel_thread_marks_a_tasks_kind_and_must_be_a_boolean() {
        let w = parse(
            r#"{"tasks": {"k": {"kernel_thread": true, "run": 1}, "u": {"run": 1}}}"#,
            "w.json",
        )
        .unwrap();
        let kinds: Vec<bool> = w.programs.iter().map(|p| p.kernel_thread).collect();
        assert_eq!(kinds, [true, false]);
        let e = err(r#"{"tasks": {"k": {"kernel_thread": 1, "run": 1}}}"#);
        assert_eq!(e, "w.json: $.tasks.k.kernel_thread: expected true or false");
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let e = err("{\n \"tasks\": {\n  \"a\": { \"run\": 1, }\n }\n}");
        assert!(e.starts_with("w.json:3:"), "{e}");
    }

    #[test]
    fn semantic_errors_name_file_json_path_and_expectation() {
        let e = err(r#"{"tasks": {"a": {"run": "fast"}}}"#);
        assert_eq!(
            e,
            "w.json: $.tasks.a.run: expected microseconds (a number >= 0 or [min, max])"
        );
        let e = err(r#"{"tasks": {"a": {"phases": {"p": {"jump": 1}}}}}"#);
        assert!(
            e.starts_with("w.json: $.tasks.a.phases.p.jump: unknown event `jump`; expected one of"),
            "{e}"
        );
        let e = err(r#"{"tasks": {"a": {"fork": "nobody"}}}"#);
        assert!(
            e.contains("$.tasks.a.fork: expected the name of a task"),
            "{e}"
        );
        let e = err(r#"{"tasks": {"a": {"loop": -1, "send": "c"}}}"#);
        assert!(e.contains("$.tasks.a.loop: a loop forever needs"), "{e}");
        let e = err(r#"{"task": {}}"#);
        assert!(e.contains("$: expected a \"tasks\" object"), "{e}");
    }
}
