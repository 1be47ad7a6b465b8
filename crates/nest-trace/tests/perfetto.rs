//! The Perfetto export, decoded two ways: a small wire-format decoder here,
//! and `protoc --decode` with tests/fixtures/perfetto_min.proto (field
//! numbers copied from perfetto's protos).

mod common;

use nest_trace::perfetto::to_perfetto;
use nest_trace::readers::read_tracefs;
use nest_trace::{EventKind, Trace};

#[derive(Debug, Clone)]
enum Val {
    Int(u64),
    Bytes(Vec<u8>),
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// Decode one message's fields (varint and length-delimited only).
fn fields(buf: &[u8]) -> Vec<(u32, Val)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos);
        let val = match key & 7 {
            0 => Val::Int(varint(buf, &mut pos)),
            2 => {
                let len = varint(buf, &mut pos) as usize;
                pos += len;
                Val::Bytes(buf[pos - len..pos].to_vec())
            }
            w => panic!("unexpected wire type {w}"),
        };
        out.push(((key >> 3) as u32, val));
    }
    assert_eq!(pos, buf.len(), "message ends exactly");
    out
}

fn sub(fs: &[(u32, Val)], field: u32) -> Vec<Vec<u8>> {
    fs.iter()
        .filter(|(f, _)| *f == field)
        .filter_map(|(_, v)| match v {
            Val::Bytes(b) => Some(b.clone()),
            Val::Int(_) => None,
        })
        .collect()
}

fn int(fs: &[(u32, Val)], field: u32) -> Option<u64> {
    fs.iter().find_map(|(f, v)| match v {
        Val::Int(i) if *f == field => Some(*i),
        _ => None,
    })
}

fn text(fs: &[(u32, Val)], field: u32) -> String {
    String::from_utf8(sub(fs, field).remove(0)).unwrap()
}

/// All FtraceEvents as (bundle cpu, event fields).
fn ftrace_events(out: &[u8]) -> Vec<(u64, Vec<(u32, Val)>)> {
    let mut events = Vec::new();
    for packet in sub(&fields(out), 1) {
        for bundle in sub(&fields(&packet), 1) {
            let bf = fields(&bundle);
            let cpu = int(&bf, 1).unwrap();
            events.extend(sub(&bf, 2).iter().map(|e| (cpu, fields(e))));
        }
    }
    events
}

fn fixture_trace() -> Trace {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tracefs.txt");
    read_tracefs(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn process_tree_names_every_task() {
    let out = to_perfetto(&fixture_trace());
    let first = fields(&sub(&fields(&out), 1)[0]);
    let tree = fields(&sub(&first, 2)[0]);
    let threads: Vec<(u64, String)> = sub(&tree, 2)
        .iter()
        .map(|t| {
            let f = fields(t);
            (int(&f, 1).unwrap(), text(&f, 2))
        })
        .collect();
    let want = [
        (88, "kworker/1:2"),
        (1200, "sh"),
        (1201, "true"),
        (4242, "Web Content"),
    ];
    let want: Vec<(u64, String)> = want.iter().map(|(p, n)| (*p, n.to_string())).collect();
    assert_eq!(threads, want);
    let parent = fields(&sub(&tree, 1)[2]);
    assert_eq!((int(&parent, 1), int(&parent, 2)), (Some(1201), Some(1200)));
}

#[test]
fn every_switch_becomes_a_sched_switch_on_its_cpu() {
    let trace = fixture_trace();
    let events = ftrace_events(&to_perfetto(&trace));
    let switches: Vec<_> = events
        .iter()
        .filter(|(_, f)| !sub(f, 4).is_empty())
        .collect();
    let want = trace
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Switch { .. }));
    assert_eq!(switches.len(), want.count());
    // The fixture's t=220us switch: true (1201, dead) -> idle on cpu 1.
    let (cpu, ev) = switches
        .iter()
        .find(|(_, f)| int(f, 1) == Some(220_000))
        .unwrap();
    assert_eq!(*cpu, 1);
    assert_eq!(int(ev, 2), Some(1201), "ftrace pid is the task on the CPU");
    let s = fields(&sub(ev, 4)[0]);
    assert_eq!(text(&s, 1), "true");
    assert_eq!(
        (int(&s, 2), int(&s, 4), int(&s, 6)),
        (Some(1201), Some(0x10), Some(0))
    );
    assert_eq!(text(&s, 5), "swapper/1");
}

#[test]
fn wakeups_forks_exits_and_frequency_are_exported() {
    let events = ftrace_events(&to_perfetto(&fixture_trace()));
    let count = |field| {
        events
            .iter()
            .filter(|(_, f)| !sub(f, field).is_empty())
            .count()
    };
    assert_eq!(count(20), 3, "sched_waking");
    assert_eq!(count(235), 1, "task_newtask");
    assert_eq!(count(236), 1, "task_rename (exec)");
    assert_eq!(count(240), 1, "sched_process_free");
    assert_eq!(count(11), 1, "cpu_frequency");
    assert_eq!(count(13), 3, "cpu_idle");
    let (_, freq) = events.iter().find(|(_, f)| !sub(f, 11).is_empty()).unwrap();
    let fq = fields(&sub(freq, 11)[0]);
    assert_eq!((int(&fq, 1), int(&fq, 2)), (Some(2_100_000), Some(1)));
}

#[test]
fn large_trace_splits_into_bundles_in_time_order() {
    let trace = common::synthetic(8, 16, 5_000);
    let events = ftrace_events(&to_perfetto(&trace));
    for cpu in 0..8 {
        let ts: Vec<u64> = events
            .iter()
            .filter(|(c, _)| *c == cpu)
            .map(|(_, f)| int(f, 1).unwrap())
            .collect();
        assert!(
            ts.windows(2).all(|w| w[0] <= w[1]),
            "cpu {cpu} in time order"
        );
    }
}

#[test]
#[ignore = "needs protoc (apt-get install protobuf-compiler); run by scripts/test.sh"]
fn protoc_decodes_the_export_with_perfettos_field_numbers() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let out = to_perfetto(&fixture_trace());
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut child = Command::new("protoc")
        .args([
            "--decode=perfetto.protos.Trace",
            "-I",
            dir,
            "perfetto_min.proto",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc is installed");
    child.stdin.take().unwrap().write_all(&out).unwrap();
    let done = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(text.contains("prev_comm: \"true\""), "{text}");
    assert!(text.contains("next_comm: \"Web Content\""));
    assert!(text.contains("newcomm: \"true\""));
    assert!(text.contains("state: 2100000"));
    assert!(text.contains("name: \"kworker/1:2\""));
    assert!(
        !text.contains("\n1: "),
        "no field unknown to the schema:\n{text}"
    );
}

#[test]
fn a_wakeup_with_a_known_waker_is_the_wakers_event() {
    // The reader names the writer as the waker of the reader's wakeup,
    // traced on the reader's idle CPU; Perfetto's "woken by" reads the
    // sched_waking event's pid, so it must be the writer's, not idle's.
    let text = "\
  writer-7 [001] d..2. 1.000001: sched_waking: comm=reader pid=8 prio=120 target_cpu=003
  <idle>-0 [003] dNs2. 1.000002: sched_wakeup: comm=reader pid=8 prio=120 target_cpu=003
";
    let events = ftrace_events(&to_perfetto(&read_tracefs(text).unwrap()));
    let wakings: Vec<_> = events
        .iter()
        .filter(|(_, f)| !sub(f, 20).is_empty())
        .collect();
    assert_eq!(wakings.len(), 1);
    let (cpu, ev) = wakings[0];
    assert_eq!((*cpu, int(ev, 2)), (3, Some(7)));
}
