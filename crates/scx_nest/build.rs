//! Builds the BPF scheduler (src/bpf/main.bpf.c, which includes the shared
//! policy from policy/), its Rust skeleton and interface bindings, the
//! `Event` enum from the SCX_NEST_EVENTS list of src/bpf/intf.h, and
//! records the git revision for `scx_nest --version`.

#[path = "../nest-policy/build/git_revision.rs"]
mod git_revision;
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

    git_revision::emit();
}
