//! The trace file: JSON Lines.
//!
//! Line 1 is a header object: `{"format":"nest-trace","version":1,
//! "topology":{...},"meta":[[k,v],...],"events":N}`. Then exactly `N` lines,
//! one [`Event`] each, in the serde JSON form of the model (externally tagged
//! enums, e.g. `{"ts_ns":5,"cpu":1,"kind":{"Exit":{"pid":7}}}`). The event
//! count in the header makes a truncated file an error instead of a shorter
//! trace. Integers are written exactly, so a save/load round trip is exact.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::model::{Event, Topology, Trace};

/// The `format` value of the header line.
pub const FORMAT_NAME: &str = "nest-trace";
/// The only version this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The extension of nest trace files in defaults and docs
/// (`run.nest.jsonl`). Files of any name are read: [`crate::input`] tells
/// them by their first line.
pub const FILE_EXTENSION: &str = "nest.jsonl";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    topology: Topology,
    meta: Vec<(String, String)>,
    events: usize,
}

/// Write `trace` to `out` in the trace file format.
pub fn write_trace(trace: &Trace, out: impl Write) -> std::io::Result<()> {
    let mut out = BufWriter::new(out);
    let header = Header {
        format: FORMAT_NAME.to_string(),
        version: FORMAT_VERSION,
        topology: trace.topology.clone(),
        meta: trace.meta.clone(),
        events: trace.events.len(),
    };
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    for event in &trace.events {
        serde_json::to_writer(&mut out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Read a trace in the trace file format. Errors name the line and what was
/// expected there (a header, an event, or more events when truncated).
pub fn read_trace(input: impl BufRead) -> Result<Trace, ParseError> {
    let mut lines = input.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, first) = lines
        .next()
        .ok_or_else(|| ParseError::line(1, "empty file: expected a nest-trace header"))?;
    let header = parse_header(&io_line(1, first)?)?;
    let mut trace = Trace {
        topology: header.topology,
        meta: header.meta,
        events: Vec::with_capacity(header.events.min(1 << 24)),
    };
    for (n, line) in lines {
        let line = io_line(n, line)?;
        if line.trim().is_empty() {
            continue;
        }
        if trace.events.len() == header.events {
            return Err(ParseError::line(
                n,
                format!("header announced {} events, found more", header.events),
            ));
        }
        let event: Event = serde_json::from_str(&line)
            .map_err(|e| ParseError::line(n, format!("expected an event object: {e}")))?;
        trace.events.push(event);
    }
    if trace.events.len() < header.events {
        return Err(ParseError::line(
            trace.events.len() + 2,
            format!(
                "file ends after {} of {} events (truncated?)",
                trace.events.len(),
                header.events
            ),
        ));
    }
    Ok(trace)
}

fn io_line(n: usize, line: std::io::Result<String>) -> Result<String, ParseError> {
    line.map_err(|e| ParseError::line(n, format!("cannot read: {e}")))
}

fn parse_header(line: &str) -> Result<Header, ParseError> {
    let header: Header = serde_json::from_str(line)
        .map_err(|e| ParseError::line(1, format!("expected a nest-trace header object: {e}")))?;
    if header.format != FORMAT_NAME {
        return Err(ParseError::line(
            1,
            format!(
                "expected format \"{FORMAT_NAME}\", found \"{}\"",
                header.format
            ),
        ));
    }
    if header.version != FORMAT_VERSION {
        return Err(ParseError::line(
            1,
            format!(
                "expected version {FORMAT_VERSION}, found {} (newer tool?)",
                header.version
            ),
        ));
    }
    Ok(header)
}

/// Save `trace` to the file at `path`.
pub fn save(trace: &Trace, path: &Path) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    write_trace(trace, file).with_context(|| format!("cannot write {}", path.display()))
}

/// Load a trace from the file at `path`.
pub fn load(path: &Path) -> anyhow::Result<Trace> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_trace(BufReader::new(file))
        .with_context(|| format!("{}: not a valid trace", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, PrevState};

    fn sample() -> Trace {
        let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
        Trace {
            topology: Topology::regular(1, 2, 1),
            meta: vec![("scheduler".into(), "eevdf \"quoted\"\n".into())],
            events: vec![
                ev(
                    0,
                    0,
                    EventKind::Switch {
                        prev: 0,
                        prev_state: PrevState::Runnable,
                        next: 7,
                    },
                ),
                ev(
                    5,
                    0,
                    EventKind::NewTask {
                        parent: 7,
                        child: 8,
                        comm: "sh ü".into(),
                    },
                ),
                ev(
                    6,
                    0,
                    EventKind::Wakeup {
                        pid: 8,
                        target_cpu: 1,
                        waker: None,
                    },
                ),
                ev(u64::MAX, 1, EventKind::Frequency { khz: 3_000_000 }),
            ],
        }
    }

    fn encode(trace: &Trace) -> String {
        let mut buf = Vec::new();
        write_trace(trace, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn round_trip_is_exact() {
        let trace = sample();
        let text = encode(&trace);
        assert_eq!(text.lines().count(), 5);
        assert_eq!(read_trace(text.as_bytes()).unwrap(), trace);
    }

    #[test]
    fn truncated_file_names_the_missing_line() {
        let text = encode(&sample());
        let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        let err = read_trace(cut.as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 4: file ends after 2 of 4 events (truncated?)"
        );
    }

    #[test]
    fn malformed_event_names_its_line() {
        let text = encode(&sample()).replace("\"Wakeup\"", "\"Wakeupp\"");
        let err = read_trace(text.as_bytes()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 4: expected an event object"),
            "{err}"
        );
        let half = &encode(&sample())[..40];
        let err = read_trace(half.as_bytes()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 1: expected a nest-trace header"),
            "{err}"
        );
    }

    #[test]
    fn wrong_format_or_version_is_refused() {
        let text = encode(&sample()).replacen("\"version\":1", "\"version\":9", 1);
        let err = read_trace(text.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("expected version 1, found 9"),
            "{err}"
        );
        assert!(
            read_trace("".as_bytes())
                .unwrap_err()
                .to_string()
                .contains("empty file")
        );
    }
}
