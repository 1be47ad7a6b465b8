//! Readers for the kernel's scheduler trace text: raw tracefs `trace` /
//! `trace_pipe`, `perf script` (after `perf sched record`) and
//! `trace-cmd report` (with or without its sched_switch/sched_wakeup plugin
//! formats).
//!
//! All three print one event per line as `<task-pid> [CPU] <flags>
//! <seconds.micros>: <event>: <fields>`; they differ in how the task is
//! written (`comm-pid` or `comm pid`), in the optional flags column, in the
//! event prefix (`sched:sched_switch`) and in how fields are printed. The
//! readers turn the events of interest into the [`model`](crate::model)
//! and count the others in the `ignored_events` meta entry. `sched_waking`
//! is read as a wakeup when the input has no `sched_wakeup` (`perf sched
//! record` records `sched_waking` instead on current kernels); its target
//! CPU is the task's previous CPU, and a `sched_migrate_task` follows when
//! the task is placed elsewhere. Either way a wakeup gets its
//! [`Waker`]: the task on whose behalf `sched_waking` fired, when the line's
//! flags column says it fired in task context (so not from a timer or an
//! interrupt; traces without that column get no wakers), with the wake
//! flags' `WF_SYNC` when the trace has `nest trace record`'s probe on
//! `try_to_wake_up()` ([`WAKE_FLAGS_EVENT`]) just before it on the same
//! CPU. `bpf_trace_printk` lines of `scx_nest --trace-nests` (`nest cpu=C
//! in=N`) become `NestChange` events when they change the CPU's nest, those
//! of `scx_nest --trace-placements` (`place pid=P cpu=C how=H`) `Placement`
//! events. Times are rebased
//! so the earliest event is at 0; the original origin goes to the
//! `time_origin_ns` meta entry.

use std::collections::HashMap;

use nest_policy::Stat;

use crate::error::ParseError;
use crate::model::{
    Cpu, Event, EventKind, NESTS_COMPLETE_META, Nest, Pid, PrevState, Topology, Trace, Waker,
};

/// The event `nest trace record` names its probe on `try_to_wake_up()`'s
/// entry, which prints the caller's wake flags in decimal, `wake_flags=16`.
pub const WAKE_FLAGS_EVENT: &str = "nest_wake_flags";

/// `WF_SYNC` in the wake flags (kernel/sched/sched.h, 0x10 since v5.8,
/// "Waker goes to sleep after wakeup").
const WF_SYNC: u64 = 0x10;

/// Which tool printed the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// `/sys/kernel/tracing/trace` or `trace_pipe`.
    Tracefs,
    /// `perf script` output of `perf sched record` (or `perf record -e`).
    PerfScript,
    /// `trace-cmd report`.
    TraceCmd,
}

impl TextFormat {
    /// The tool's name, as in the `source` meta entry.
    pub fn name(self) -> &'static str {
        match self {
            TextFormat::Tracefs => "tracefs",
            TextFormat::PerfScript => "perf script",
            TextFormat::TraceCmd => "trace-cmd report",
        }
    }
}

/// Read tracefs `trace` / `trace_pipe` text.
pub fn read_tracefs(text: &str) -> Result<Trace, ParseError> {
    read_text(text, TextFormat::Tracefs)
}

/// Read `perf script` text.
pub fn read_perf_script(text: &str) -> Result<Trace, ParseError> {
    read_text(text, TextFormat::PerfScript)
}

/// Read `trace-cmd report` text.
pub fn read_trace_cmd(text: &str) -> Result<Trace, ParseError> {
    read_text(text, TextFormat::TraceCmd)
}

/// Which tool printed `text`, told by its content: `trace-cmd report`
/// begins with `cpus=N` or `version = N`, `perf script` names events with
/// their subsystem (`sched:sched_switch:`), anything else is read as
/// tracefs text. Only the `source` meta entry depends on it: one parser
/// reads all three.
pub fn detect_text_format(text: &str) -> TextFormat {
    for line in text.lines().map(str::trim) {
        if line.starts_with("cpus=") || line.starts_with("version =") {
            return TextFormat::TraceCmd;
        }
        if is_header(line) || lost_events(line).is_some() {
            continue;
        }
        let subsystem_event = |word: &str| {
            word.strip_suffix(':')
                .is_some_and(|w| w.split_once(':').is_some_and(|(sub, _)| !sub.is_empty()))
        };
        return if line.split_whitespace().any(subsystem_event) {
            TextFormat::PerfScript
        } else {
            TextFormat::Tracefs
        };
    }
    TextFormat::Tracefs
}

/// Read scheduler events from `text` printed by `format`'s tool. The
/// topology is [`Topology::flat`] over the highest CPU number seen; replace
/// it when the real one is known. Errors name the 1-based line.
pub fn read_text(text: &str, format: TextFormat) -> Result<Trace, ParseError> {
    let mut reader = Reader::default();
    for (i, line) in text.lines().enumerate() {
        reader
            .line(line)
            .map_err(|msg| ParseError::line(i + 1, msg))?;
    }
    Ok(reader.finish(format))
}

/// One event line, split.
struct Line<'a> {
    /// The task column: `comm-pid` or `comm pid`, maybe with `(tgid)`.
    task: &'a str,
    /// The flags column (`d..2.`), when the format has one.
    flags: Option<&'a str>,
    cpu: Cpu,
    ts_ns: u64,
    event: &'a str,
    body: &'a str,
}

#[derive(Default)]
struct Reader {
    events: Vec<Event>,
    names: HashMap<Pid, String>,
    max_cpu: Cpu,
    ignored: u64,
    lost: u64,
    /// Whether the input has `sched_wakeup` events.
    saw_wakeup: bool,
    /// Indices of the Wakeup events made from `sched_waking`.
    from_waking: Vec<usize>,
    /// Per CPU, the wake flags of the last `try_to_wake_up()` entered there
    /// and not yet matched with its `sched_waking`.
    wake_flags: HashMap<Cpu, u64>,
    /// Per CPU, its nest as last reported by `scx_nest --trace-nests`.
    nests: HashMap<Cpu, Nest>,
    /// When it first reported every CPU's nest ("nest sync").
    nests_synced_ns: Option<u64>,
    /// Per task, the waker its last `sched_waking` named, until the
    /// `sched_wakeup` that completes it.
    wakers: HashMap<Pid, Option<Waker>>,
}

impl Reader {
    fn line(&mut self, line: &str) -> Result<(), String> {
        let trimmed = line.trim();
        if is_header(trimmed) {
            return Ok(());
        }
        if let Some(lost) = lost_events(trimmed) {
            self.lost += lost;
            return Ok(());
        }
        let line = split_line(trimmed)?;
        self.event(&line)
            .map_err(|e| format!("{}: {e} in \"{}\"", line.event, line.body))
    }

    fn event(&mut self, l: &Line) -> Result<(), String> {
        self.max_cpu = self.max_cpu.max(l.cpu);
        match l.event {
            "sched_switch" => self.switch(l),
            "sched_wakeup" | "sched_wakeup_new" => {
                self.saw_wakeup |= l.event == "sched_wakeup";
                self.wakeup(l, false)
            }
            "sched_waking" => {
                self.wakeup(l, true)?;
                self.from_waking.push(self.events.len() - 1);
                Ok(())
            }
            WAKE_FLAGS_EVENT => {
                let flags = Fields::parse(l.body).num("wake_flags")?;
                self.wake_flags.insert(l.cpu, flags);
                Ok(())
            }
            "sched_migrate_task" => self.migrate(l),
            "sched_process_fork" => self.fork(l),
            "sched_process_exec" => self.exec(l),
            "sched_process_exit" => self.exit(l),
            "cpu_frequency" => self.power(l, true),
            "cpu_idle" => self.power(l, false),
            "bpf_trace_printk" => self.bpf_print(l),
            _ => {
                self.ignored += 1;
                Ok(())
            }
        }
    }

    fn push(&mut self, l: &Line, cpu: Cpu, kind: EventKind) {
        self.max_cpu = self.max_cpu.max(cpu);
        self.events.push(Event {
            ts_ns: l.ts_ns,
            cpu,
            kind,
        });
    }

    /// Note that `pid` is called `comm`, emitting a TaskName on change.
    fn name(&mut self, l: &Line, pid: Pid, comm: &str) {
        if pid == 0 || self.names.get(&pid).is_some_and(|c| c == comm) {
            return;
        }
        self.names.insert(pid, comm.to_string());
        let kind = EventKind::TaskName {
            pid,
            comm: comm.to_string(),
        };
        self.push(l, l.cpu, kind);
    }

    fn switch(&mut self, l: &Line) -> Result<(), String> {
        let s = if l.body.contains("prev_pid=") {
            parse_switch_fields(l.body)?
        } else {
            parse_switch_plugin(l.body)?
        };
        self.name(l, s.prev, &s.prev_comm);
        self.name(l, s.next, &s.next_comm);
        let kind = EventKind::Switch {
            prev: s.prev,
            prev_state: s.prev_state,
            next: s.next,
        };
        self.push(l, l.cpu, kind);
        Ok(())
    }

    /// A `sched_wakeup(_new)`, or a `sched_waking` (`waking`), which names
    /// the waker of the `sched_wakeup` that follows it.
    fn wakeup(&mut self, l: &Line, waking: bool) -> Result<(), String> {
        let (comm, pid, target_cpu) = if l.body.contains("pid=") {
            let f = Fields::parse(l.body);
            (f.text("comm")?, f.num("pid")?, f.num("target_cpu")?)
        } else {
            parse_wakeup_plugin(l.body)?
        };
        self.name(l, pid, &comm);
        let waker = if waking {
            let sync = self.wake_flags.remove(&l.cpu).map(|f| f & WF_SYNC != 0);
            let waker = task_context_pid(l).map(|pid| Waker { pid, sync });
            self.wakers.insert(pid, waker);
            waker
        } else if l.event == "sched_wakeup" {
            self.wakers.remove(&pid).flatten()
        } else {
            None
        };
        let kind = EventKind::Wakeup {
            pid,
            target_cpu,
            waker,
        };
        self.push(l, l.cpu, kind);
        Ok(())
    }

    fn migrate(&mut self, l: &Line) -> Result<(), String> {
        let f = Fields::parse(l.body);
        let pid = f.num("pid")?;
        self.name(l, pid, &f.text("comm")?);
        let kind = EventKind::Migrate {
            pid,
            from: f.num("orig_cpu")?,
            to: f.num("dest_cpu")?,
        };
        self.push(l, l.cpu, kind);
        Ok(())
    }

    fn fork(&mut self, l: &Line) -> Result<(), String> {
        let f = Fields::parse(l.body);
        let parent = f.num("pid")?;
        self.name(l, parent, &f.text("comm")?);
        let child = f.num("child_pid")?;
        let comm = f.text("child_comm")?;
        self.names.insert(child, comm.clone());
        let kind = EventKind::NewTask {
            parent,
            child,
            comm,
        };
        self.push(l, l.cpu, kind);
        Ok(())
    }

    fn exec(&mut self, l: &Line) -> Result<(), String> {
        let f = Fields::parse(l.body);
        let pid = f.num("pid")?;
        let comm = exec_comm(&f.text("filename")?);
        self.names.insert(pid, comm.clone());
        self.push(l, l.cpu, EventKind::Exec { pid, comm });
        Ok(())
    }

    fn exit(&mut self, l: &Line) -> Result<(), String> {
        let f = Fields::parse(l.body);
        let pid = f.num("pid")?;
        self.name(l, pid, &f.text("comm")?);
        self.push(l, l.cpu, EventKind::Exit { pid });
        Ok(())
    }

    fn power(&mut self, l: &Line, frequency: bool) -> Result<(), String> {
        let f = Fields::parse(l.body);
        let state: u64 = f.num("state")?;
        let cpu: Cpu = f.num("cpu_id")?;
        let kind = match (frequency, state >= u64::from(u32::MAX)) {
            (true, _) => EventKind::Frequency {
                khz: u32::try_from(state).map_err(|_| "frequency above u32 kHz".to_string())?,
            },
            (false, true) => EventKind::IdleExit,
            (false, false) => EventKind::IdleEnter,
        };
        self.push(l, cpu, kind);
        Ok(())
    }

    /// A BPF program's `bpf_printk()`: `scx_nest --trace-nests` reports a
    /// CPU's nest when it changes, and every 10 ms the whole nests, one
    /// line per word of their masks (older recordings: "nest sync" and
    /// then every member); only changes become events. `scx_nest
    /// --trace-placements` reports each placement.
    fn bpf_print(&mut self, l: &Line) -> Result<(), String> {
        let body = l.body.trim_end();
        if body == "nest sync" {
            self.nests_synced_ns.get_or_insert(l.ts_ns);
            return Ok(());
        }
        if let Some(word) = parse_nest_sync(body)? {
            self.nests_synced_ns.get_or_insert(l.ts_ns);
            for bit in 0..64 {
                let nest = match (word.primary >> bit & 1, word.reserve >> bit & 1) {
                    (1, _) => Nest::Primary,
                    (_, 1) => Nest::Reserve,
                    _ => Nest::None,
                };
                self.set_nest(l, word.index * 64 + bit, nest);
            }
            return Ok(());
        }
        if let Some(placement) = parse_placement(body)? {
            self.push(l, l.cpu, placement);
            return Ok(());
        }
        let Some((cpu, nest)) = parse_nest_report(body)? else {
            self.ignored += 1;
            return Ok(());
        };
        self.set_nest(l, cpu, nest);
        Ok(())
    }

    /// `cpu` is in `nest` as of line `l`: a `NestChange` if that changes
    /// what the trace knew.
    fn set_nest(&mut self, l: &Line, cpu: Cpu, nest: Nest) {
        let last = self.nests.get(&cpu).copied().unwrap_or(Nest::None);
        if last != nest {
            self.nests.insert(cpu, nest);
            self.push(l, cpu, EventKind::NestChange { nest });
        }
    }

    /// `sched_waking` stands in for `sched_wakeup` only when the input has
    /// no `sched_wakeup` (`perf sched record` records only `sched_waking`
    /// on kernels that have it).
    fn drop_duplicate_wakings(&mut self) {
        if !self.saw_wakeup {
            return;
        }
        self.ignored += self.from_waking.len() as u64;
        let mut drop = std::mem::take(&mut self.from_waking).into_iter().peekable();
        let mut i = 0;
        self.events.retain(|_| {
            let keep = drop.next_if_eq(&i).is_none();
            i += 1;
            keep
        });
    }

    fn finish(mut self, format: TextFormat) -> Trace {
        self.drop_duplicate_wakings();
        self.events.sort_by_key(|e| e.ts_ns);
        let origin = self.events.first().map_or(0, |e| e.ts_ns);
        for e in &mut self.events {
            e.ts_ns -= origin;
        }
        let nr_cpus = if self.events.is_empty() {
            0
        } else {
            self.max_cpu + 1
        };
        let mut trace = Trace {
            topology: Topology::flat(nr_cpus),
            meta: Vec::new(),
            events: self.events,
        };
        trace.meta_set("source", format.name());
        trace.meta_set("time_origin_ns", origin.to_string());
        trace.meta_set("ignored_events", self.ignored.to_string());
        trace.meta_set("lost_events", self.lost.to_string());
        if let Some(synced) = self.nests_synced_ns {
            trace.meta_set(
                NESTS_COMPLETE_META,
                synced.saturating_sub(origin).to_string(),
            );
        }
        trace
    }
}

/// Lines that carry no event: blank, comments and tool headers.
fn is_header(line: &str) -> bool {
    line.is_empty()
        || line.starts_with('#')
        || line.starts_with("cpus=")
        || line.starts_with("version")
        || (line.starts_with("CPU") && line.ends_with("is empty"))
}

/// `CPU:2 [LOST 8 EVENTS]` (tracefs) or `CPU 2 LOST 8 EVENTS`-style lines.
fn lost_events(line: &str) -> Option<u64> {
    if !line.starts_with("CPU") || !line.contains("LOST") {
        return None;
    }
    line.split(|c: char| c.is_whitespace() || c == '[' || c == ']')
        .skip_while(|w| *w != "LOST")
        .nth(1)
        .and_then(|n| n.parse().ok())
}

/// The pid of the task an event fired for, when the flags column says it
/// fired in task context (its third character, hardirq/softirq/NMI, is
/// `.`); `None` for the idle task, in interrupts, or without flags.
fn task_context_pid(l: &Line) -> Option<Pid> {
    let context = l.flags?.chars().nth(2)?;
    if context != '.' {
        return None;
    }
    let last = l.task.split_whitespace().rfind(|t| !t.starts_with('('))?;
    let pid = last.rsplit_once('-').map_or(last, |(_, pid)| pid);
    pid.parse().ok().filter(|&pid| pid != 0)
}

/// Split an event line into CPU, time, event name and body.
fn split_line(line: &str) -> Result<Line<'_>, String> {
    let (task, cpu, rest) = find_cpu(line).ok_or("expected a [CPU] column")?;
    let mut rest = rest.trim_start();
    let mut ts = None;
    let mut flags = None;
    while ts.is_none() {
        let (token, after) = next_token(rest).ok_or("expected a timestamp")?;
        rest = after;
        if let Some(t) = token.strip_suffix(':') {
            ts = Some(parse_ts(t).ok_or_else(|| format!("expected a timestamp, found \"{t}\""))?);
        } else if token.starts_with(|c: char| c.is_ascii_digit()) && token.contains('.') {
            return Err(format!("expected \"{token}:\" (timestamp and colon)"));
        } else {
            flags = Some(token);
        }
    }
    let (event, body) = next_token(rest).ok_or("expected an event name")?;
    let event = event
        .strip_suffix(':')
        .ok_or_else(|| format!("expected \"event:\", found \"{event}\""))?;
    let event = event.rsplit(':').next().unwrap_or(event);
    Ok(Line {
        task: task.trim(),
        flags,
        cpu,
        ts_ns: ts.unwrap_or(0),
        event,
        body: body.trim(),
    })
}

/// The first `[digits]` group: the CPU column, with the text before it
/// (the task) and after it.
fn find_cpu(line: &str) -> Option<(&str, Cpu, &str)> {
    let mut from = 0;
    while let Some(open) = line[from..].find('[').map(|i| i + from) {
        let close = line[open..].find(']').map(|i| i + open)?;
        let inner = &line[open + 1..close];
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            return Some((&line[..open], inner.parse().ok()?, &line[close + 1..]));
        }
        from = open + 1;
    }
    None
}

fn next_token(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if s.is_empty() {
        return None;
    }
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    Some((&s[..end], &s[end..]))
}

/// `seconds.fraction` to nanoseconds (fraction of up to 9 digits); a plain
/// integer is taken as nanoseconds already.
fn parse_ts(t: &str) -> Option<u64> {
    let Some((secs, frac)) = t.split_once('.') else {
        return t.parse().ok();
    };
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let frac: u64 = format!("{frac:0<9}").parse().ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

/// Field names the kernel prints, so that values with spaces (task names)
/// can be told apart from the next field.
const KEYS: &[&str] = &[
    "prev_comm",
    "prev_pid",
    "prev_prio",
    "prev_state",
    "next_comm",
    "next_pid",
    "next_prio",
    "comm",
    "pid",
    "prio",
    "success",
    "target_cpu",
    "orig_cpu",
    "dest_cpu",
    "running",
    "child_comm",
    "child_pid",
    "filename",
    "old_pid",
    "group_dead",
    "tgid",
    "state",
    "cpu_id",
    "wake_flags",
];

/// `key=value` fields of a TP_printk body.
struct Fields<'a> {
    fields: Vec<(&'a str, String)>,
}

impl<'a> Fields<'a> {
    fn parse(body: &'a str) -> Self {
        let mut fields: Vec<(&str, String)> = Vec::new();
        for token in body.split(' ').filter(|t| !t.is_empty()) {
            let key = token.split_once('=').map(|(k, _)| k);
            match (key, fields.last_mut()) {
                (Some(k), _) if KEYS.contains(&k) => {
                    fields.push((k, token[k.len() + 1..].to_string()));
                }
                (_, _) if token == "==>" => {}
                (_, Some((_, value))) => {
                    value.push(' ');
                    value.push_str(token);
                }
                (_, None) => {}
            }
        }
        Self { fields }
    }

    fn text(&self, key: &str) -> Result<String, String> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("expected field {key}="))
    }

    fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        let v = self.text(key)?;
        v.parse()
            .map_err(|_| format!("expected a number for {key}=, found \"{v}\""))
    }
}

struct Switch {
    prev: Pid,
    prev_comm: String,
    prev_state: PrevState,
    next: Pid,
    next_comm: String,
}

fn parse_switch_fields(body: &str) -> Result<Switch, String> {
    let f = Fields::parse(body);
    Ok(Switch {
        prev: f.num("prev_pid")?,
        prev_comm: f.text("prev_comm")?,
        prev_state: parse_prev_state(&f.text("prev_state")?)?,
        next: f.num("next_pid")?,
        next_comm: f.text("next_comm")?,
    })
}

/// trace-cmd's plugin form: `bash:1234 [120] S ==> swapper/2:0 [120]`.
fn parse_switch_plugin(body: &str) -> Result<Switch, String> {
    let (left, right) = body
        .split_once(" ==> ")
        .ok_or("expected prev_pid=... or \"comm:pid [prio] state ==> comm:pid [prio]\"")?;
    let (prev_comm, prev, state) = comm_pid_prio(left)?;
    let (next_comm, next, _) = comm_pid_prio(right)?;
    Ok(Switch {
        prev,
        prev_comm,
        prev_state: parse_prev_state(&state)?,
        next,
        next_comm,
    })
}

/// `comm:pid [prio] rest` -> (comm, pid, rest).
fn comm_pid_prio(s: &str) -> Result<(String, Pid, String), String> {
    let open = s.rfind(" [").ok_or("expected \"comm:pid [prio]\"")?;
    let (comm, pid) = s[..open]
        .trim()
        .rsplit_once(':')
        .ok_or("expected \"comm:pid\"")?;
    let pid = pid
        .parse()
        .map_err(|_| format!("expected a pid, found \"{pid}\""))?;
    let rest = s[open..].split_once(']').map_or("", |(_, r)| r.trim());
    Ok((comm.to_string(), pid, rest.to_string()))
}

/// trace-cmd's plugin form: `bash:1234 [120] success=1 CPU:002`.
fn parse_wakeup_plugin(body: &str) -> Result<(String, Pid, Cpu), String> {
    let (comm, pid, rest) = comm_pid_prio(body)?;
    let cpu = rest
        .split_whitespace()
        .find_map(|t| t.strip_prefix("CPU:"))
        .ok_or("expected target CPU:NNN")?;
    let cpu = cpu
        .parse()
        .map_err(|_| format!("expected a CPU number, found \"{cpu}\""))?;
    Ok((comm, pid, cpu))
}

/// `R`, `R+` (preempted) are runnable; `X`, `Z`, `x` (exiting) dead;
/// anything else (`S`, `D`, `D|K`, `I`, `T`, ...) blocked. Numeric states
/// (some tools print the raw mask) follow the kernel's report bits.
fn parse_prev_state(s: &str) -> Result<PrevState, String> {
    let s = s.trim();
    if let Ok(mask) = s
        .strip_prefix("0x")
        .map_or_else(|| s.parse::<u64>(), |h| u64::from_str_radix(h, 16))
    {
        return Ok(match mask {
            0 => PrevState::Runnable,
            m if m & 0x30 != 0 => PrevState::Dead,
            _ => PrevState::Blocked,
        });
    }
    match s.chars().next() {
        None => Err("expected a prev_state".into()),
        Some('R') => Ok(PrevState::Runnable),
        Some(_) if s.contains(['X', 'Z', 'x']) => Ok(PrevState::Dead),
        Some(_) => Ok(PrevState::Blocked),
    }
}

/// The values of `fields`, which must be exactly `name=value` for each of
/// `names`, in that order, as scx_nest prints them; `None` otherwise.
fn named_values<'a, const N: usize>(fields: &'a str, names: [&str; N]) -> Option<[&'a str; N]> {
    let mut words = fields.split_whitespace();
    let mut values = [""; N];
    for (value, name) in values.iter_mut().zip(names) {
        *value = words.next()?.strip_prefix(name)?.strip_prefix('=')?;
    }
    words.next().is_none().then_some(values)
}

/// `nest cpu=C in=N` (N: 0 no nest, 1 reserve, 2 primary), as
/// `scx_nest --trace-nests` prints it; `None` for other programs' prints.
fn parse_nest_report(body: &str) -> Result<Option<(Cpu, Nest)>, String> {
    let Some(fields) = body.strip_prefix("nest ") else {
        return Ok(None);
    };
    let bad = || format!("expected \"nest cpu=C in=0|1|2\", found \"{body}\"");
    let [cpu, nest] = named_values(fields, ["cpu", "in"]).ok_or_else(bad)?;
    let cpu = cpu.parse().map_err(|_| bad())?;
    let nest = match nest {
        "0" => Nest::None,
        "1" => Nest::Reserve,
        "2" => Nest::Primary,
        _ => return Err(bad()),
    };
    Ok(Some((cpu, nest)))
}

/// One word of `scx_nest --trace-nests`' whole nests: the CPUs
/// `index * 64 + bit` of its masks.
struct NestSyncWord {
    index: u32,
    primary: u64,
    reserve: u64,
}

/// `nest sync word=W primary=HEX reserve=HEX`, as `scx_nest --trace-nests`
/// prints its whole nests; `None` for other prints.
fn parse_nest_sync(body: &str) -> Result<Option<NestSyncWord>, String> {
    let Some(fields) = body.strip_prefix("nest sync ") else {
        return Ok(None);
    };
    let bad = || format!("expected \"nest sync word=W primary=HEX reserve=HEX\", found \"{body}\"");
    let [index, primary, reserve] =
        named_values(fields, ["word", "primary", "reserve"]).ok_or_else(bad)?;
    let index: u32 = index.parse().map_err(|_| bad())?;
    let hex = |v| u64::from_str_radix(v, 16).map_err(|_| bad());
    let (primary, reserve) = (hex(primary)?, hex(reserve)?);
    if index >= u32::MAX / 64 {
        return Err(bad());
    }
    Ok(Some(NestSyncWord {
        index,
        primary,
        reserve,
    }))
}

/// `place pid=P cpu=C how=H`, as `scx_nest --trace-placements` prints it
/// (H: the policy's `enum nest_stat` value); `None` for other prints.
fn parse_placement(body: &str) -> Result<Option<EventKind>, String> {
    let Some(fields) = body.strip_prefix("place ") else {
        return Ok(None);
    };
    let bad = || format!("expected \"place pid=P cpu=C how=H\", found \"{body}\"");
    let values = named_values(fields, ["pid", "cpu", "how"]).ok_or_else(bad)?;
    let [pid, target_cpu, how] = values.map(|v| v.parse::<u32>().map_err(|_| bad()));
    let (pid, target_cpu) = (pid?, target_cpu?);
    let how = Stat::ALL
        .get(how? as usize)
        .filter(|s| s.group() == "place")
        .ok_or_else(|| format!("{}: not a placement step of scx_nest's policy", bad()))?;
    Ok(Some(EventKind::Placement {
        pid,
        target_cpu,
        how: how.name().to_string(),
    }))
}

/// The task name after exec: the file's base name, cut to the kernel's 15
/// bytes.
fn exec_comm(filename: &str) -> String {
    let base = filename.rsplit('/').next().unwrap_or(filename);
    let mut end = base.len().min(15);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_convert_exactly() {
        assert_eq!(parse_ts("5000.000100"), Some(5_000_000_100_000));
        assert_eq!(parse_ts("1.000000001"), Some(1_000_000_001));
        assert_eq!(parse_ts("42"), Some(42));
        assert_eq!(parse_ts("1.x"), None);
    }

    #[test]
    fn prev_states_cover_kernel_variants() {
        for (s, want) in [
            ("R", PrevState::Runnable),
            ("R+", PrevState::Runnable),
            ("S", PrevState::Blocked),
            ("D|K", PrevState::Blocked),
            ("I", PrevState::Blocked),
            ("X", PrevState::Dead),
            ("Z", PrevState::Dead),
            ("0", PrevState::Runnable),
            ("0x10", PrevState::Dead),
            ("1", PrevState::Blocked),
        ] {
            assert_eq!(parse_prev_state(s).unwrap(), want, "{s}");
        }
    }

    #[test]
    fn task_names_may_hold_spaces() {
        let f = Fields::parse("comm=Web Content pid=77 prio=120 target_cpu=003");
        assert_eq!(f.text("comm").unwrap(), "Web Content");
        assert_eq!(f.num::<u32>("target_cpu").unwrap(), 3);
    }

    #[test]
    fn exec_comm_is_cut_to_15_bytes() {
        assert_eq!(exec_comm("/usr/bin/true"), "true");
        assert_eq!(exec_comm("/x/a-very-long-program-name"), "a-very-long-pro");
    }

    #[test]
    fn errors_name_the_line() {
        let text = "# tracer: nop\n  sh-1 [000] d..2. 1.000000: sched_switch: prev_comm=sh prev_pid=1 prev_prio=120\n";
        let err = read_tracefs(text).unwrap_err();
        assert_eq!(err.at, crate::error::Position::Line(2));
        assert!(err.msg.contains("expected field prev_state="), "{err}");
        let err = read_tracefs("garbage without cpu\n").unwrap_err();
        assert_eq!(err.to_string(), "line 1: expected a [CPU] column");
        let err = read_tracefs("sh-1 [000] 1.5 sched_switch: x\n").unwrap_err();
        assert!(err.to_string().contains("expected \"1.5:\""), "{err}");
    }

    /// The nest changes of `trace`: (time, CPU, nest).
    fn nest_changes(trace: &Trace) -> Vec<(u64, Cpu, Nest)> {
        trace
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::NestChange { nest } => Some((e.ts_ns, e.cpu, nest)),
                _ => None,
            })
            .collect()
    }

    /// Each of the `bad` BPF prints is an error saying `expected`.
    fn assert_prints_rejected(bad: &[&str], expected: &str) {
        for bad in bad {
            let line = format!("  w-6 [000] d..2. 1.0: bpf_trace_printk: {bad}\n");
            let err = read_tracefs(&line).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn scx_nest_nest_reports_become_nest_changes_when_they_change_something() {
        let text = "\
  worker-6 [000] d..2. 1.000001: bpf_trace_printk: nest cpu=3 in=2
  worker-6 [000] d..2. 1.000002: bpf_trace_printk: nest cpu=5 in=0
  worker-6 [001] d..2. 1.000003: bpf_trace_printk: nest sync
  worker-6 [001] d..2. 1.000003: bpf_trace_printk: nest cpu=3 in=2
  worker-6 [001] d..2. 1.000004: bpf_trace_printk: hello from another program
  worker-6 [001] d..2. 1.000005: bpf_trace_printk: nest cpu=3 in=1
";
        let trace = read_tracefs(text).unwrap();
        let changes = nest_changes(&trace);
        // Times are rebased to the first event; CPU 5 was in no nest
        // already, and the repeat of CPU 3's primary changes nothing.
        assert_eq!(changes, [(0, 3, Nest::Primary), (4000, 3, Nest::Reserve)]);
        assert_eq!(trace.meta_get("ignored_events"), Some("1"));
        assert_eq!(trace.meta_get(NESTS_COMPLETE_META), Some("2000"));
        let bad = [
            "nest cpu=x in=2",
            "nest cpu=1 in=3",
            "nest cpu=1",
            "nest cpu=1 in=2 more",
        ];
        assert_prints_rejected(&bad, "expected \"nest cpu=C in=0|1|2\"");
    }

    #[test]
    fn a_nest_sync_sets_every_cpus_nest_from_the_masks() {
        // CPU 3 joined the primary nest, but the line of its departure
        // was lost: the sync (primary: CPUs 0 and 5; reserve: CPU 2) puts
        // it right, and CPU 5's membership is news.
        let text = "\
  w-6 [000] d..2. 1.000001: bpf_trace_printk: nest cpu=3 in=2
  w-6 [000] d..2. 1.000001: bpf_trace_printk: nest cpu=0 in=2
  w-6 [001] d..2. 1.000004: bpf_trace_printk: nest sync word=0 primary=21 reserve=4
";
        let trace = read_tracefs(text).unwrap();
        let changes = nest_changes(&trace);
        assert_eq!(
            changes,
            [
                (0, 3, Nest::Primary),
                (0, 0, Nest::Primary),
                (3000, 2, Nest::Reserve),
                (3000, 3, Nest::None),
                (3000, 5, Nest::Primary)
            ]
        );
        assert_eq!(trace.meta_get(NESTS_COMPLETE_META), Some("3000"));
        let bad = [
            "nest sync word=0 primary=xyz reserve=0",
            "nest sync word=0 primary=1",
            "nest sync primary=1 reserve=0",
        ];
        assert_prints_rejected(&bad, "expected \"nest sync word=W");
    }

    #[test]
    fn scx_nest_placement_reports_become_placements_named_by_the_policy_step() {
        let how = |stat: Stat| stat as u32;
        let text = format!(
            "\
  make-6 [002] d..2. 1.000001: bpf_trace_printk: place pid=40 cpu=3 how={}
  make-6 [002] d..2. 1.000002: bpf_trace_printk: place pid=41 cpu=2 how={}
",
            how(Stat::Prev),
            how(Stat::NoIdle)
        );
        let trace = read_tracefs(&text).unwrap();
        let placements: Vec<(Cpu, &EventKind)> =
            trace.events.iter().map(|e| (e.cpu, &e.kind)).collect();
        let placed = |pid, target_cpu, how: &str| EventKind::Placement {
            pid,
            target_cpu,
            how: how.to_string(),
        };
        assert_eq!(
            placements,
            [(2, &placed(40, 3, "prev")), (2, &placed(41, 2, "no_idle"))]
        );
        let not_a_step = format!("place pid=1 cpu=1 how={}", how(Stat::Compacted));
        let bad = [
            "place pid=1 cpu=x how=1",
            "place pid=1 how=1",
            "place pid=1 cpu=1 how=1 more",
            "place pid=1 cpu=1 how=999",
            &not_a_step,
        ];
        assert_prints_rejected(&bad, "expected \"place pid=P cpu=C how=H\"");
    }

    /// The wakeups of `text`: (pid, waker).
    fn wakers(text: &str) -> Vec<(Pid, Option<Waker>)> {
        let trace = read_tracefs(text).unwrap();
        trace
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Wakeup { pid, waker, .. } => Some((pid, waker)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_wakeup_names_its_waker_and_sync_flag_from_waking_and_the_probe() {
        let text = "\
  writer-7 [001] d..2. 1.000000: nest_wake_flags: (try_to_wake_up+0x0/0x600) wake_flags=16
  writer-7 [001] d..2. 1.000001: sched_waking: comm=reader pid=8 prio=120 target_cpu=003
  <idle>-0 [003] dNs2. 1.000002: sched_wakeup: comm=reader pid=8 prio=120 target_cpu=003
  <idle>-0 [002] d.h2. 1.000003: sched_waking: comm=sleeper pid=9 prio=120 target_cpu=002
  <idle>-0 [002] d.h2. 1.000004: sched_wakeup: comm=sleeper pid=9 prio=120 target_cpu=002
  shell-5 (5) [000] d..2. 1.000005: sched_waking: comm=child pid=10 prio=120 target_cpu=000
  shell-5 (5) [000] d..2. 1.000006: sched_wakeup: comm=child pid=10 prio=120 target_cpu=000
  worker-6 [000] d.s2. 1.000007: sched_waking: comm=timer pid=11 prio=120 target_cpu=000
  worker-6 [000] d.s2. 1.000008: sched_wakeup: comm=timer pid=11 prio=120 target_cpu=000
";
        let sync = |pid, sync| Some(Waker { pid, sync });
        assert_eq!(
            wakers(text),
            [
                // Queued to the reader's CPU: sched_wakeup fires there, in
                // the IPI, but the waker is the writer's, with WF_SYNC.
                (8, sync(7, Some(true))),
                // A timer's wakeup: no waker.
                (9, None),
                // Task context, no probe: waker without flags.
                (10, sync(5, None)),
                // In a softirq on top of a task: not the task's doing.
                (11, None),
            ]
        );
    }

    #[test]
    fn a_probe_without_waking_does_not_flag_a_later_wakeup_of_another_cpu() {
        let text = "\
  a-7 [001] d..2. 1.000000: nest_wake_flags: (try_to_wake_up+0x0/0x600) wake_flags=16
  b-6 [002] d..2. 1.000001: sched_waking: comm=c pid=8 prio=120 target_cpu=002
  b-6 [002] d..2. 1.000002: sched_wakeup: comm=c pid=8 prio=120 target_cpu=002
  a-7 [001] d..2. 1.000003: nest_wake_flags: (try_to_wake_up+0x0/0x600) wake_flags=0
  a-7 [001] d..2. 1.000004: sched_waking: comm=c pid=8 prio=120 target_cpu=002
  a-7 [001] d..2. 1.000005: sched_wakeup: comm=c pid=8 prio=120 target_cpu=002
";
        let waker = |pid, sync| Some(Waker { pid, sync });
        assert_eq!(
            wakers(text),
            [(8, waker(6, None)), (8, waker(7, Some(false)))]
        );
    }

    #[test]
    fn traces_without_a_flags_column_name_no_wakers() {
        let text = "\
  a-7 [001] 1.000001: sched_waking: comm=c pid=8 prio=120 target_cpu=002
  a-7 [001] 1.000002: sched_wakeup: comm=c pid=8 prio=120 target_cpu=002
";
        assert_eq!(wakers(text), [(8, None)]);
    }
}
