//! `nest validate` on a short set: the fork/wait chain recorded under
//! Debian's sched_ext kernel and Debian 11's 5.10, replayed in the
//! simulator's Linux models of the same generations. Fails when a figure
//! leaves its band (see docs/sim.md, "Checked against real kernels").
//! Ignored by default: it boots QEMU guests; scripts/test.sh runs it.

use std::process::Command;

use vm_tests::bin_dir;

#[test]
#[ignore = "boots QEMU guests; run via scripts/test.sh"]
fn the_linux_models_fork_placement_agrees_with_real_5_10_and_7_kernels() {
    let out = tempfile::Builder::new()
        .prefix("nest-vm-validate-")
        .tempdir()
        .expect("temporary directory");
    let output = Command::new(bin_dir().join("nest"))
        .args([
            "validate",
            "--schedulers",
            "default",
            "--workloads",
            "chain",
        ])
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run nest validate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let csv = std::fs::read_to_string(out.path().join("figures.csv")).expect("figures.csv");
    let mut lines = csv.lines().map(|l| l.split(',').collect::<Vec<&str>>());
    let header = lines.next().expect("figures.csv has a header");
    let column = |name: &str| {
        header
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name} column in figures.csv"))
    };
    let (kernel, figure, real, verdict) = (
        column("kernel"),
        column("figure"),
        column("real"),
        column("verdict"),
    );
    let rows: Vec<Vec<&str>> = lines.collect();
    // Five figures for each of the two kernels.
    assert_eq!(rows.len(), 10, "{csv}");
    let page = std::fs::read_to_string(out.path().join("validate.html")).expect("validate.html");
    for kernel in ["linux-7", "linux-5.10"] {
        let heading = format!("<h2>{kernel} default vs Linux model: chain</h2>");
        assert!(page.contains(&heading), "no {heading}");
    }
    assert_eq!(
        page.matches("<svg").count(),
        4,
        "a real and a simulated figure per kernel"
    );
    // 0: every figure in its band, 1: some outside; anything else failed.
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "nest validate: {:?}",
        output.status
    );
    let row = |k: &str, f: &str| {
        rows.iter()
            .find(|r| r[kernel] == k && r[figure] == f)
            .unwrap_or_else(|| panic!("no {k} {f} row in {csv}"))
    };
    // The decisions the fork model makes must agree. Distinct CPUs per
    // 100 ms is printed, not asserted: the guest's other tasks move idle
    // CPUs' idle stamps, so its chain used 1.9-3.2 CPUs per 100 ms (five
    // runs) where the model's uses 1.9 (docs/sim.md).
    for k in ["linux-7", "linux-5.10"] {
        for f in [
            "sockets / 100 ms",
            "forks to another socket",
            "forks to the parent's LLC",
            "wakeups on the previous CPU",
        ] {
            let r = row(k, f);
            assert_eq!(r[verdict], "agrees", "{k} {f}: {r:?}");
        }
    }
    // The two generations really differ on this workload: 7.x sends the
    // chain's children to the other socket, 5.10 keeps them on the
    // parent's LLC; a model (or a guest) that ignored the generation
    // would agree with only one of them.
    let real = |k: &str, f: &str| -> f64 { row(k, f)[real].parse().unwrap() };
    assert!(real("linux-7", "forks to another socket") >= 0.75);
    assert!(real("linux-5.10", "forks to the parent's LLC") >= 0.75);
}
