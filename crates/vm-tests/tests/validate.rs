//! `nest validate` on a short set: the fork/wait chain recorded twice under
//! Debian's sched_ext kernel and Debian 11's 5.10, under their default
//! schedulers, replayed in the simulator's Linux models of the same
//! generations; and, in the same 7.x guest, under scx_nest, replayed in
//! the simulator's Nest. Fails when a default-scheduler figure leaves its
//! band (see docs/design/simulator.md, "Checked against real kernels"), or when the
//! scx_nest recording does not place the chain as scx_nest does.
//! Ignored by default: it boots QEMU guests; scripts/test.sh runs it.

use std::process::Command;

use vm_tests::bin_dir;

#[test]
#[ignore = "boots QEMU guests; run via scripts/test.sh"]
fn the_models_fork_placement_agrees_with_real_5_10_and_7_kernels() {
    let out = tempfile::Builder::new()
        .prefix("nest-vm-validate-")
        .tempdir()
        .expect("temporary directory");
    // Both schedulers (the default): scx_nest under linux-7 only, in the
    // same boot as its default scheduler; linux-5.10 is skipped for it.
    let output = Command::new(bin_dir().join("nest"))
        .args(["validate", "--workloads", "chain", "--runs", "2", "--out"])
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
    let (kernel, scheduler, model, figure) = (
        column("kernel"),
        column("scheduler"),
        column("model"),
        column("figure"),
    );
    let (real, verdict) = (column("real"), column("verdict"));
    let (real_min, real_max) = (column("real_min"), column("real_max"));
    let rows: Vec<Vec<&str>> = lines.collect();
    // Two runs of the chain in each boot, compared by their median.
    for trace in [
        "linux-7-chain-run2",
        "linux-7-scx_nest-chain-run2",
        "linux-5.10-chain-run2",
    ] {
        let path = out.path().join(format!("{trace}.nest.jsonl"));
        assert!(path.is_file(), "no second run: {}", path.display());
    }
    for r in rows.iter().filter(|r| r[real] != "-") {
        let [median, low, high] = [r[real], r[real_min], r[real_max]].map(|v| v.parse::<f64>());
        let (median, low, high) = (median.unwrap(), low.unwrap(), high.unwrap());
        assert!(low <= median && median <= high, "{r:?}");
    }
    // Six figures for each of linux-7 default and linux-5.10 default, and
    // seven (the primary nest's size too) for linux-7 scx_nest, all under
    // the host's clock (the default).
    assert_eq!(rows.len(), 19, "{csv}");
    let clock = column("guest_clock");
    assert!(rows.iter().all(|r| r[clock] == "host"), "{csv}");
    let page = std::fs::read_to_string(out.path().join("validate.html")).expect("validate.html");
    // The guest's other tasks are replayed for scx_nest only (the default).
    for (title, replay) in [
        ("linux-7 default vs Linux model", "tree"),
        ("linux-7 scx_nest vs Nest model", "tree+others"),
        ("linux-5.10 default vs Linux model", "tree"),
    ] {
        let heading = format!("<h2>{title}: chain (guest clock host, replay {replay})</h2>");
        assert!(page.contains(&heading), "no {heading}");
    }
    assert_eq!(
        page.matches("<svg").count(),
        6,
        "a real and a simulated figure per recording"
    );
    // 0: every figure in its band, 3: some outside; anything else failed.
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "nest validate: {:?}",
        output.status
    );
    let row = |k: &str, s: &str, f: &str| {
        rows.iter()
            .find(|r| r[kernel] == k && r[scheduler] == s && r[figure] == f)
            .unwrap_or_else(|| panic!("no {k} {s} {f} row in {csv}"))
    };
    // The decisions the fork model makes must agree. Distinct CPUs per
    // 100 ms is printed, not asserted: the guest's other tasks move idle
    // CPUs' idle stamps, so its chain used 1.9-3.2 CPUs per 100 ms (five
    // runs) under 7.x, where the model's uses 1.9 (docs/design/simulator.md).
    for k in ["linux-7", "linux-5.10"] {
        for f in [
            "sockets / 100 ms",
            "forks to another socket",
            "forks to the parent's LLC",
            "wakeups on the previous CPU",
            "migrations / s",
        ] {
            let r = row(k, "default", f);
            assert_eq!(r[verdict], "agrees", "{k} {f}: {r:?}");
        }
    }
    // The two generations really differ on this workload: 7.x sends the
    // chain's children to the other socket, 5.10 keeps them on the
    // parent's LLC; a model (or a guest) that ignored the generation
    // would agree with only one of them.
    let real_of = |k: &str, s: &str, f: &str| -> f64 { row(k, s, f)[real].parse().unwrap() };
    let llc = "forks to the parent's LLC";
    assert!(real_of("linux-7", "default", "forks to another socket") >= 0.75);
    assert!(real_of("linux-5.10", "default", llc) >= 0.75);
    // scx_nest was attached while its chain was recorded: it keeps the
    // children far more in the parent's LLC than 7.x's own scheduler
    // (0.65-1.00 against 0.00 in six boots). Its figures
    // against the model are printed, not asserted: the guest's other
    // tasks share its nests, which the replay has not (docs/design/simulator.md).
    assert_eq!(row("linux-7", "scx_nest", llc)[model], "nest-nospin");
    let (nest, default) = (
        real_of("linux-7", "scx_nest", llc),
        real_of("linux-7", "default", llc),
    );
    assert!(
        nest >= default + 0.25,
        "scx_nest kept {nest} of the chain's forks in the parent's LLC, the default \
         scheduler {default}: was scx_nest attached?"
    );
    // scx_nest reported its nests to the recording (--trace-nests, read
    // from bpf_trace_printk): while the chain ran, its primary nest held at
    // least the CPU running it, and never more than the guest's 16.
    let primary = row("linux-7", "scx_nest", "primary nest CPUs")[real];
    let primary: f64 = primary.parse().unwrap_or_else(|_| {
        panic!("no real primary nest size ({primary}): were the nests traced?")
    });
    assert!((1.0..=16.0).contains(&primary), "primary nest {primary}");
}
