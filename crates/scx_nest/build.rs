//! Builds the BPF scheduler (src/bpf/main.bpf.c, which includes the shared
//! policy from policy/), its Rust skeleton and interface bindings, the
//! `Event` enum from the SCX_NEST_EVENTS list of src/bpf/intf.h, and
//! records the git revision for `scx_nest --version`.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../nest-policy/build/stat_list.rs"]
mod stat_list;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let policy_dir = format!("{manifest_dir}/../../policy");
    scx_cargo::BpfBuilder::new()
        .expect("BPF build setup failed: is clang >= 18 installed (scripts/setup.sh)?")
        .add_include_path(&policy_dir)
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .expect("BPF build failed");

    // The bindings themselves come from scx_cargo above; this pass only
    // reads the events list.
    println!("cargo:rerun-if-changed=../nest-policy/build/stat_list.rs");
    let stat_lists = stat_list::StatLists::new(&["SCX_NEST_EVENTS"]);
    bindgen::Builder::default()
        .header("src/bpf/intf.h")
        .clang_arg(format!("-I{policy_dir}"))
        .parse_callbacks(Box::new(stat_lists.clone()))
        .generate()
        .expect("bindgen cannot read src/bpf/intf.h");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(
        format!("{out_dir}/event.rs"),
        stat_list::rust_enum(
            "Event",
            "crate::bpf_intf",
            "scx_nest_event_NEST_EV_",
            &stat_lists.take("SCX_NEST_EVENTS"),
        ),
    )
    .expect("cannot write the Event enum");

    let dir = Path::new(&manifest_dir);
    let revision = git(dir, &["rev-parse", "--short=12", "HEAD"]);
    println!(
        "cargo:rustc-env=NEST_GIT_REVISION={}",
        revision.as_deref().unwrap_or("unknown")
    );
    // HEAD changes on a checkout, its log on every commit (also in a
    // worktree, whose git directory holds both).
    if let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
        for watched in [git_dir.join("HEAD"), git_dir.join("logs/HEAD")] {
            if watched.exists() {
                println!("cargo:rerun-if-changed={}", watched.display());
            }
        }
    }
}

/// The trimmed output of a git command run in `dir`; None without git or
/// outside a repository (e.g. a source tarball).
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
