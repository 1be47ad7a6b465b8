//! Records the git revision for `nest --version`.

#[path = "../nest-policy/build/git_revision.rs"]
mod git_revision;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=../nest-policy/build/git_revision.rs");
    git_revision::emit(std::path::Path::new(&manifest_dir));
}
