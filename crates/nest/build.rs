//! Records the git revision for `nest --version`.

#[path = "../nest-policy/build/git_revision.rs"]
mod git_revision;

fn main() {
    git_revision::emit();
}
