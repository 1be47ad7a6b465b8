//! Builds the BPF scheduler (src/bpf/main.bpf.c, which includes the shared
//! policy from policy/) and its Rust skeleton and interface bindings.

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
}
