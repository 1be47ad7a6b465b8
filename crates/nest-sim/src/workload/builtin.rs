//! Built-in parametrised workload families, named `family` or
//! `family:key=value,key=value` on the command line:
//!
//! - `configure` (`steps`, `shell_us`, `cmd_us`, `cc_us`): a serial
//!   fork/exec/wait chain like an autoconf configure script. A shell does a
//!   little work, forks a test command and waits for it; the command works,
//!   forks a compiler and waits; the compiler works and exits.
//! - `sleepers` (`threads`, `run_us`, `sleep_us`, `loops`): a few threads that
//!   compute briefly and sleep briefly, over and over.
//! - `barrier` (`threads`, `phases`, `run_us`): one thread per core (by
//!   default) running parallel phases separated by a barrier.
//! - `hackbench` (`groups`, `fds`, `loops`, `msg_us`): message-passing
//!   overload; in each group `fds` senders send `loops` messages to each of
//!   `fds` receivers.
//!
//! Work amounts `*_us` are microseconds at nominal frequency; each draw is
//! uniform in [x/2, 3x/2] from the task's seeded PRNG.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};

use super::rtapp::barrier_participants;
use super::{Amount, Op, Program, Workload};

/// Names of the built-in families.
pub const FAMILIES: [&str; 4] = ["configure", "sleepers", "barrier", "hackbench"];

/// Parameters given as `key=value` pairs, with defaults.
struct Params {
    family: String,
    given: BTreeMap<String, u64>,
}

impl Params {
    fn parse(spec: &str) -> Result<Self> {
        let (family, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let mut given = BTreeMap::new();
        for kv in rest.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| anyhow!("workload `{spec}`: expected key=value, found `{kv}`"))?;
            let v: u64 = v
                .parse()
                .with_context(|| format!("workload `{spec}`: {k}: expected an integer"))?;
            given.insert(k.to_owned(), v);
        }
        Ok(Self {
            family: family.to_owned(),
            given,
        })
    }

    fn get(&mut self, key: &str, default: u64) -> u64 {
        self.given.remove(key).unwrap_or(default)
    }

    fn finish(self) -> Result<()> {
        if let Some(k) = self.given.keys().next() {
            bail!("workload `{}`: unknown parameter `{k}`", self.family);
        }
        Ok(())
    }
}

/// Whether `spec` names a built-in family.
pub fn is_builtin(spec: &str) -> bool {
    let family = spec.split(':').next().unwrap_or("");
    FAMILIES.contains(&family)
}

/// Builds a built-in workload for a machine with `nr_cores` physical cores.
pub fn build(spec: &str, nr_cores: usize) -> Result<Workload> {
    let mut p = Params::parse(spec)?;
    let w = match p.family.as_str() {
        "configure" => configure(&mut p),
        "sleepers" => sleepers(&mut p),
        "barrier" => barrier(&mut p, nr_cores as u64),
        "hackbench" => hackbench(&mut p),
        f => bail!(
            "unknown workload `{f}`: expected a file or one of {}",
            FAMILIES.join(", ")
        ),
    };
    p.finish()?;
    let mut w = w;
    w.name = spec.to_owned();
    Ok(w)
}

/// Work of about `us` microseconds, jittered to [us/2, 3us/2].
fn work(us: u64) -> Amount {
    Amount::Uniform(us * 500, us * 1500)
}

/// `ops` repeated `n` times (n = 0: forever).
fn repeat(n: u64, ops: Vec<Op>) -> Vec<Op> {
    let mut v = vec![Op::LoopStart { count: n }];
    v.extend(super::rtapp::shift_loops(ops, 1));
    v.push(Op::LoopEnd { start: 0 });
    v
}

fn workload(programs: Vec<Program>, initial: Vec<(usize, u32)>) -> Workload {
    let nr_barriers = programs
        .iter()
        .flat_map(|p| &p.ops)
        .filter_map(|op| match op {
            Op::Barrier(b) => Some(b + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let nr_channels = programs
        .iter()
        .flat_map(|p| &p.ops)
        .filter_map(|op| match op {
            Op::Send { chan: c, .. } | Op::Recv(c) => Some(c + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let barriers = barrier_participants(&programs, &initial, nr_barriers);
    Workload {
        name: String::new(),
        programs,
        initial,
        barriers,
        nr_locks: 0,
        nr_channels,
        duration_ns: None,
        initial_nests: None,
    }
}

fn configure(p: &mut Params) -> Workload {
    let steps = p.get("steps", 300);
    let shell = p.get("shell_us", 150);
    let cmd = p.get("cmd_us", 400);
    let cc = p.get("cc_us", 1500);
    let sh_ops = vec![
        Op::Run(work(shell)),
        Op::Fork { program: 1 },
        Op::WaitChildren,
    ];
    let cmd_ops = vec![
        Op::Run(work(cmd)),
        Op::Fork { program: 2 },
        Op::WaitChildren,
        Op::Run(work(cmd / 4 + 1)),
    ];
    workload(
        vec![
            Program::new("sh", repeat(steps, sh_ops)),
            Program::new("cmd", cmd_ops),
            Program::new("cc", vec![Op::Run(work(cc))]),
        ],
        vec![(0, 1)],
    )
}

fn sleepers(p: &mut Params) -> Workload {
    let threads = p.get("threads", 4) as u32;
    let run = p.get("run_us", 200);
    let sleep = p.get("sleep_us", 100);
    let loops = p.get("loops", 2000);
    let ops = vec![
        Op::Run(work(run)),
        Op::Sleep(Amount::Uniform(sleep * 500, sleep * 1500)),
    ];
    workload(
        vec![Program::new("sleeper", repeat(loops, ops))],
        vec![(0, threads)],
    )
}

fn barrier(p: &mut Params, nr_cores: u64) -> Workload {
    let threads = p.get("threads", nr_cores) as u32;
    let phases = p.get("phases", 200);
    let run = p.get("run_us", 2000);
    let ops = vec![Op::Run(work(run)), Op::Barrier(0)];
    workload(
        vec![Program::new("worker", repeat(phases, ops))],
        vec![(0, threads)],
    )
}

fn hackbench(p: &mut Params) -> Workload {
    let groups = p.get("groups", 4);
    let fds = p.get("fds", 10);
    let loops = p.get("loops", 500);
    let msg = p.get("msg_us", 5);
    let mut programs = Vec::new();
    let mut initial = Vec::new();
    for g in 0..groups {
        let first = (g * fds) as usize;
        let mut send = Vec::new();
        for r in 0..fds as usize {
            // hackbench writes to pipes (or sockets): synchronous wakeups.
            let chan = first + r;
            send.extend([Op::Run(work(msg)), Op::Send { chan, sync: true }]);
        }
        programs.push(Program::new("sender", repeat(loops, send)));
        initial.push((programs.len() - 1, fds as u32));
        for r in 0..fds as usize {
            let recv = vec![Op::Recv(first + r), Op::Run(work(msg))];
            programs.push(Program::new("receiver", repeat(loops * fds, recv)));
            initial.push((programs.len() - 1, 1));
        }
    }
    workload(programs, initial)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_build_with_defaults_and_params() {
        for f in FAMILIES {
            let w = build(f, 32).unwrap();
            assert!(w.nr_initial_tasks() > 0, "{f}");
        }
        let w = build("barrier", 32).unwrap();
        assert_eq!(w.barriers, vec![32]);
        let w = build("hackbench:groups=2,fds=3", 32).unwrap();
        assert_eq!(w.nr_initial_tasks(), 12);
        assert_eq!(w.nr_channels, 6);
        assert!(build("configure:steps=x", 4).is_err());
        assert!(build("configure:nope=1", 4).is_err());
        assert!(build("nothing", 4).is_err());
    }
}
