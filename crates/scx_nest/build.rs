//! Builds the BPF scheduler (src/bpf/main.bpf.c, which includes the shared
//! policy from policy/) and its Rust skeleton and interface bindings, and
//! records the git revision for `scx_nest --version`.

use std::path::{Path, PathBuf};
use std::process::Command;

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
