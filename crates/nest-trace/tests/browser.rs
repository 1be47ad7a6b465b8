//! The HTML report in a real browser: Debian's headless Chromium loads the
//! page written by `nest trace report -o` without console errors and
//! renders it to a PNG. Ignored by default; scripts/test.sh runs it (with
//! the other ignored nest-trace tests). Fails when Chromium is missing
//! (`apt-get install chromium`, in scripts/setup.sh); `NEST_CHROMIUM` names
//! another binary.
//!
//! How console errors are caught: the test loads a copy of the report with
//! a probe script inserted first in `<head>`. The probe records uncaught
//! exceptions and failed resource loads (a capturing `error` listener),
//! unhandled promise rejections and `console.error` calls, and on `load`
//! writes them as JSON into a `<pre id="nest-console-errors">`; Chromium's
//! `--dump-dom` prints the DOM after load, and the test reads the list back.
//! A control page with a deliberate error checks that the probe works. As a
//! second net, Chromium's own log (`--enable-logging=stderr --v=0`) must
//! have no `Uncaught` or `ERROR:CONSOLE` line. The screenshot is taken of
//! the unmodified report.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use nest_trace::{TraceArgs, run};

#[derive(Parser)]
struct Nest {
    #[command(flatten)]
    trace: TraceArgs,
}

fn nest(args: &[&str]) {
    let mut argv = vec!["nest-trace"];
    argv.extend_from_slice(args);
    run(Nest::try_parse_from(argv).unwrap().trace).unwrap();
}

const PROBE: &str = r#"<script>
window.__nestErrors = [];
addEventListener("error", function (e) {
  __nestErrors.push("error: " + (e.message || (e.target && (e.target.src || e.target.href)) || e.type));
}, true);
addEventListener("unhandledrejection", function (e) {
  __nestErrors.push("unhandled rejection: " + e.reason);
});
(function () {
  var original = console.error;
  console.error = function () {
    __nestErrors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
addEventListener("load", function () {
  var pre = document.createElement("pre");
  pre.id = "nest-console-errors";
  pre.textContent = JSON.stringify(__nestErrors);
  document.body.appendChild(pre);
});
</script>"#;

/// Runs Chromium headless on `page` with `extra` flags; returns stdout and
/// stderr. Panics (the test fails) when Chromium is missing or hangs.
fn chromium(page: &Path, profile: &Path, extra: &[String]) -> (String, String) {
    let bin = std::env::var("NEST_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let mut cmd = Command::new(&bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", page.display()))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("cannot run `{bin}` ({e}): install Chromium (apt-get install -y chromium)")
    });
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{bin} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{bin} failed: {}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// The errors the probe recorded in `page` (its JSON list), and the
/// console lines of Chromium's log that report errors.
fn console_errors(page: &Path, profile: &Path) -> (String, Vec<String>) {
    let (dom, log) = chromium(page, profile, &["--dump-dom".to_string()]);
    let open = "<pre id=\"nest-console-errors\">";
    let start = dom
        .find(open)
        .unwrap_or_else(|| panic!("the probe did not run (no load event?):\n{dom}"))
        + open.len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let logged = log
        .lines()
        .filter(|l| l.contains("Uncaught") || l.contains("ERROR:CONSOLE"))
        .map(str::to_owned)
        .collect();
    (dom[start..end].to_string(), logged)
}

fn with_probe(html: &str) -> String {
    let at = html.find("<head>").expect("the report has a <head>") + "<head>".len();
    format!("{}{PROBE}{}", &html[..at], &html[at..])
}

#[test]
#[ignore = "needs chromium; run by scripts/test.sh"]
fn html_report_loads_in_headless_chromium_without_console_errors() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("nest-trace-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).display().to_string();
    let fixture = format!(
        "{}/tests/fixtures/real/tracefs.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    nest(&["import", &fixture, "--out", &p("real.nest.jsonl")]);
    nest(&["report", &p("real.nest.jsonl"), "--out", &p("report.html")]);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();

    // Control: the probe sees a deliberate error.
    let control = with_probe(&html).replace("</body>", "<script>nosuchfn()</script></body>");
    std::fs::write(dir.join("control.html"), control).unwrap();
    let (errors, logged) = console_errors(&dir.join("control.html"), &dir.join("profile"));
    assert!(
        errors.contains("nosuchfn"),
        "probe missed the error: {errors}"
    );
    assert!(!logged.is_empty(), "Chromium's log missed the error");

    std::fs::write(dir.join("probed.html"), with_probe(&html)).unwrap();
    let (errors, logged) = console_errors(&dir.join("probed.html"), &dir.join("profile"));
    assert_eq!(errors, "[]", "console errors in the report");
    assert!(
        logged.is_empty(),
        "console errors in Chromium's log: {logged:#?}"
    );

    let png = dir.join("report.png");
    chromium(
        &dir.join("report.html"),
        &dir.join("profile"),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,2000".to_string(),
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // IHDR: width and height, big endian, at bytes 16..24.
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    assert_eq!((be(&bytes[16..20]), be(&bytes[20..24])), (1280, 2000));
    assert!(bytes.len() > 10_000, "{} bytes: blank page?", bytes.len());
    println!("screenshot: {} bytes", bytes.len());
    std::fs::remove_dir_all(&dir).ok();
}
