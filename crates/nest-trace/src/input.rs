//! Open any trace file, recognised by its content, never by its name:
//!
//! - a nest trace (JSON Lines, [`format`]): the first line is a JSON
//!   object, the header with `"format":"nest-trace"`;
//! - a trace-cmd `trace.dat`: starts with the bytes `\x17\x08\x44tracing`,
//!   read through `trace-cmd report -i FILE`;
//! - a `perf.data`: starts with `PERFILE2`, read through
//!   `perf script -i FILE`;
//! - anything else is text printed by tracefs, `perf script` or
//!   `trace-cmd report` ([`readers`]).
//!
//! Every `nest trace` command that takes a trace reads it with [`load`].

use std::io::Read;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::format;
use crate::model::Trace;
use crate::readers::{self, TextFormat};

/// The first bytes of a trace-cmd `trace.dat` file.
pub const TRACE_CMD_MAGIC: &[u8] = b"\x17\x08\x44tracing";
/// The first bytes of a `perf.data` file.
pub const PERF_DATA_MAGIC: &[u8] = b"PERFILE2";

/// What a trace file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A nest trace (JSON Lines).
    Nest,
    /// trace-cmd's binary `trace.dat`.
    TraceCmdData,
    /// perf's binary `perf.data`.
    PerfData,
    /// Text of tracefs, `perf script` or `trace-cmd report`.
    Text,
}

impl FileKind {
    /// The kind of a file that starts with `head` (its first bytes; 16 are
    /// enough).
    pub fn of(head: &[u8]) -> FileKind {
        if head.starts_with(TRACE_CMD_MAGIC) {
            FileKind::TraceCmdData
        } else if head.starts_with(PERF_DATA_MAGIC) {
            FileKind::PerfData
        } else if head.trim_ascii_start().starts_with(b"{") {
            FileKind::Nest
        } else {
            FileKind::Text
        }
    }
}

/// The tool that turns a binary trace into text, and the Debian package
/// that has it.
struct Tool {
    program: &'static str,
    args: &'static [&'static str],
    package: &'static str,
    text: TextFormat,
    what: &'static str,
}

const TRACE_CMD: Tool = Tool {
    program: "trace-cmd",
    args: &["report", "-i"],
    package: "trace-cmd",
    text: TextFormat::TraceCmd,
    what: "a trace-cmd trace.dat file",
};

const PERF: Tool = Tool {
    program: "perf",
    args: &["script", "-i"],
    package: "linux-perf",
    text: TextFormat::PerfScript,
    what: "a perf.data file",
};

/// Read the trace in the file at `path`, whatever its kind ([`FileKind`]).
/// Errors name the file, and the line and what was wrong for text and
/// nest traces.
pub fn load(path: &Path) -> anyhow::Result<Trace> {
    let mut head = Vec::with_capacity(16);
    std::fs::File::open(path)
        .and_then(|f| f.take(16).read_to_end(&mut head))
        .with_context(|| format!("cannot open {}", path.display()))?;
    if head.is_empty() {
        bail!("{}: empty file, not a trace", path.display());
    }
    match FileKind::of(&head) {
        FileKind::Nest => format::load(path),
        FileKind::TraceCmdData => load_binary(path, &TRACE_CMD),
        FileKind::PerfData => load_binary(path, &PERF),
        FileKind::Text => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let text = String::from_utf8_lossy(&bytes);
            let text_format = readers::detect_text_format(&text);
            readers::read_text(&text, text_format).with_context(|| {
                format!(
                    "{}: read as {} text (it is not a nest trace, trace.dat or perf.data)",
                    path.display(),
                    text_format.name()
                )
            })
        }
    }
}

/// Run `tool` on the binary trace at `path` and read the text it prints.
fn load_binary(path: &Path, tool: &Tool) -> anyhow::Result<Trace> {
    let command = format!(
        "{} {} {}",
        tool.program,
        tool.args.join(" "),
        path.display()
    );
    let output = match Command::new(tool.program)
        .args(tool.args)
        .arg(path)
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} is {}; reading it needs `{}`, which is not installed \
             (Debian: apt-get install {})",
            path.display(),
            tool.what,
            tool.program,
            tool.package
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot run {command}")),
    };
    // trace-cmd exits with status 0 and prints nothing for a truncated
    // trace.dat; a readable one always prints at least its `cpus=` line.
    if !output.status.success() || output.stdout.is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        bail!(
            "{} is {}, but `{command}` failed ({}, {} bytes of output; damaged file?): {}",
            path.display(),
            tool.what,
            output.status,
            output.stdout.len(),
            stderr.trim()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    readers::read_text(&text, tool.text)
        .with_context(|| format!("{}: cannot read the output of `{command}`", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_by_their_first_bytes() {
        assert_eq!(
            FileKind::of(b"\x17\x08\x44tracing7\0\0"),
            FileKind::TraceCmdData
        );
        assert_eq!(FileKind::of(b"PERFILE2h\0\0\0"), FileKind::PerfData);
        assert_eq!(FileKind::of(b"{\"format\":\"nest-trace\""), FileKind::Nest);
        assert_eq!(FileKind::of(b"# tracer: nop\n"), FileKind::Text);
        assert_eq!(FileKind::of(b"\x17\x08\x44trac"), FileKind::Text);
        assert_eq!(FileKind::of(b""), FileKind::Text);
    }
}
