//! Throughput figures on a generated trace (about 1M events). Ignored by
//! default: `cargo test --release -p nest-trace --test speed -- --ignored
//! --nocapture`. Set NEST_TRACE_PICS=<dir> to also write its pictures.

mod common;

use std::time::Instant;

use nest_trace::report::{self, ReportOptions};
use nest_trace::{format, perfetto, readers, timeline::Timeline};

fn rate(what: &str, events: usize, start: Instant) {
    let s = start.elapsed().as_secs_f64();
    println!(
        "{what:<28} {events} events in {s:.3} s = {:.2} M events/s",
        events as f64 / s / 1e6
    );
}

#[test]
#[ignore = "measurement"]
fn throughput() {
    let trace = common::synthetic(32, 200, 400_000);
    let text = common::to_tracefs_text(&trace);
    println!("tracefs text: {} MB", text.len() / 1_000_000);
    let t = Instant::now();
    let parsed = readers::read_tracefs(&text).unwrap();
    rate("read_tracefs", parsed.events.len(), t);

    let mut buf = Vec::new();
    let t = Instant::now();
    format::write_trace(&trace, &mut buf).unwrap();
    rate("write trace file", trace.events.len(), t);
    println!("trace file: {} MB", buf.len() / 1_000_000);
    let t = Instant::now();
    let back = format::read_trace(buf.as_slice()).unwrap();
    rate("read trace file", back.events.len(), t);
    assert_eq!(back, trace);

    let t = Instant::now();
    let tl = Timeline::build(&trace);
    rate("Timeline::build", trace.events.len(), t);
    assert!(!tl.runs.is_empty());
    let t = Instant::now();
    let a = report::analyse(&trace, "synthetic", &ReportOptions::default());
    rate("all metrics + pictures", trace.events.len(), t);
    let t = Instant::now();
    let pb = perfetto::to_perfetto(&trace);
    rate("perfetto export", trace.events.len(), t);
    println!("perfetto file: {} MB", pb.len() / 1_000_000);
    if let Ok(dir) = std::env::var("NEST_TRACE_PICS") {
        report::write_pictures(&a, std::path::Path::new(&dir), true).unwrap();
        std::fs::write(format!("{dir}/report.html"), report::html_report(&a)).unwrap();
    }
}
