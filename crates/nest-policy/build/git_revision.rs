//! The git revision a binary is built from, for its `--version`: shared by
//! the build scripts of scx_nest and nest (each includes this file with
//! `#[path]`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Sets NEST_VERSION, the package's version with the git revision it is
/// built from (`0.1.0 (git 155a4ed0c1d2)`; "unknown" outside a repository,
/// e.g. a source tarball), for the crate whose build script calls it, and
/// reruns that build script when HEAD moves.
pub fn emit() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let manifest_dir = manifest_dir.as_path();
    println!("cargo:rerun-if-changed=../nest-policy/build/git_revision.rs");
    let revision = git(manifest_dir, &["rev-parse", "--short=12", "HEAD"]);
    println!(
        "cargo:rustc-env=NEST_VERSION={} (git {})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        revision.as_deref().unwrap_or("unknown")
    );
    // HEAD changes on a checkout, its log on every commit (also in a
    // worktree, whose git directory holds both).
    if let Some(git_dir) =
        git(manifest_dir, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from)
    {
        for watched in [git_dir.join("HEAD"), git_dir.join("logs/HEAD")] {
            if watched.exists() {
                println!("cargo:rerun-if-changed={}", watched.display());
            }
        }
    }
}

/// The trimmed output of a git command run in `dir`; None without git or
/// outside a repository.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
