//! nest-trace: the project's single event model for schedules, real or
//! simulated, and the readers, metrics, pictures and exports that work on it.
//!
//! - [`model`]: the event model (a contract shared with the simulator).
//! - [`format`](mod@format): the trace file (JSON Lines), save and load.
//! - [`input`]: open any trace file (nest, trace.dat, perf.data, text) by content.
//! - [`readers`]: `perf script`, `trace-cmd report` and tracefs text.
//! - [`record`]: record a real schedule through a private tracefs instance.
//! - [`freq`]: where a recording's frequencies come from (CPU counters,
//!   the cpu_frequency tracepoint, or polling).
//! - [`timeline`]: the per-CPU, per-task state replayed from events.
//! - [`metrics`]: placement, concurrency, work conservation, latency, frequency.
//! - [`table`]: the table type every metric returns, with CSV output.
//! - [`svg`], [`report`]: pictures and HTML reports.
//! - [`perfetto`]: export to Perfetto's protobuf trace format.
//! - [`cli`]: the `nest trace` command.

pub mod cli;
pub mod error;
pub mod format;
pub mod freq;
pub mod input;
pub mod metrics;
pub mod model;
pub mod perfetto;
pub mod readers;
pub mod record;
pub mod report;
pub mod svg;
pub mod table;
pub mod timeline;

pub use cli::{TraceArgs, run};
pub use error::ParseError;
pub use model::*;
