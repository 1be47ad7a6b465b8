//! Pictures are well-formed SVG, render to PNG at their size, and the HTML
//! reports hold them.

mod common;

use nest_trace::metrics;
use nest_trace::report::{self, ReportOptions};
use nest_trace::svg;
use nest_trace::timeline::Timeline;

fn parse_svg(text: &str) -> (f64, f64) {
    let doc = roxmltree::Document::parse(text).expect("SVG is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let num = |a: &str| root.attribute(a).unwrap().parse::<f64>().unwrap();
    (num("width"), num("height"))
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

fn all_pictures() -> Vec<String> {
    let trace = common::synthetic(8, 12, 2_000);
    let tl = Timeline::build(&trace);
    let stats = metrics::interval_stats(&tl, 2_000_000);
    let bands = metrics::FreqBands::for_trace(&trace);
    vec![
        svg::run_queue_heatmap(&tl),
        svg::frequency_heatmap(&tl).expect("trace has frequency events"),
        svg::cpus_vs_concurrency(&stats, "CPUs & concurrency"),
        svg::residency_bars(&metrics::frequency_residency(&tl, &bands), "residency"),
    ]
}

#[test]
fn every_picture_is_well_formed_svg() {
    for text in all_pictures() {
        let (w, h) = parse_svg(&text);
        assert!(w > 100.0 && h > 50.0);
    }
}

#[test]
fn png_has_the_svg_size() {
    for text in all_pictures() {
        let (w, h) = parse_svg(&text);
        let png = svg::render_png(&text).unwrap();
        assert_eq!(png_size(&png), (w as u32, h as u32));
    }
}

#[test]
fn no_frequency_heatmap_without_frequency_events() {
    let mut trace = common::scenario();
    trace
        .events
        .retain(|e| !matches!(e.kind, nest_trace::EventKind::Frequency { .. }));
    assert!(svg::frequency_heatmap(&Timeline::build(&trace)).is_none());
}

#[test]
fn heatmap_colours_follow_run_queue_length() {
    // Scenario: cpu0 has two tasks (one queued) from 10 to 40 of 90 ns.
    let text = svg::run_queue_heatmap(&Timeline::build(&common::scenario()));
    assert!(text.contains("#d1495b"), "red for more than one task");
    assert!(text.contains("#4c9f70"), "green for one task");
    assert!(text.contains("socket 1"));
}

#[test]
fn html_report_and_comparison_are_self_contained() {
    let opts = ReportOptions {
        interval_ns: 1_000_000,
        ..Default::default()
    };
    let a = report::analyse(&common::synthetic(8, 12, 1_000), "default", &opts);
    let b = report::analyse(&common::synthetic(8, 4, 1_000), "nest", &opts);
    let html = report::html_report(&a);
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(html.contains("mean_underload") && html.contains("workload"));
    assert!(!html.contains("src=\"http"), "no external resources");
    let cmp = report::html_compare(&a, &b);
    assert_eq!(cmp.matches("<svg").count(), 8);
    let t = report::compare_table(&a, &b);
    assert_eq!(t.columns, vec!["metric", "default", "nest", "diff"]);
    let dir = std::env::temp_dir().join(format!("nest-trace-pics-{}", std::process::id()));
    report::write_pictures(&a, &dir, true).unwrap();
    assert!(dir.join("run_queue_heatmap.png").is_file());
    assert!(dir.join("frequency_residency.svg").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}
