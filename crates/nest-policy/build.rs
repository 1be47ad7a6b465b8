//! Compiles the shared C policy natively (csrc/native.c includes
//! ../../policy/nest_policy.c, nest_sched.c, smove_policy.c and nest_perf.c
//! behind the native platform interface) and generates its Rust bindings
//! from csrc/native.h with bindgen: the policy's structures, constants and
//! entry points, and the `Stat` enum from the NEST_STATS list.

#[path = "build/stat_list.rs"]
mod stat_list;

use std::path::{Path, PathBuf};

fn main() {
    let policy = Path::new("../../policy");
    println!("cargo:rerun-if-changed=csrc");
    println!("cargo:rerun-if-changed=build/stat_list.rs");
    println!("cargo:rerun-if-changed={}", policy.display());
    cc::Build::new()
        .file("csrc/native.c")
        .include(policy)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(2)
        .compile("nest_policy_native");

    let stat_lists = stat_list::StatLists::new(&["NEST_STATS"]);
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindgen::Builder::default()
        .header("csrc/native.h")
        .clang_arg(format!("-I{}", policy.display()))
        .allowlist_file(".*/nest_policy\\.h")
        .allowlist_function("nest_native_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .parse_callbacks(Box::new(stat_lists.clone()))
        .generate()
        .expect("bindgen cannot read csrc/native.h: is libclang installed (scripts/setup.sh)?")
        .write_to_file(out_dir.join("policy_bindings.rs"))
        .expect("cannot write the policy bindings");
    std::fs::write(
        out_dir.join("stat.rs"),
        stat_list::rust_enum(
            "Stat",
            "crate::ffi",
            "NEST_STAT_",
            &stat_lists.take("NEST_STATS"),
        ),
    )
    .expect("cannot write the Stat enum");
}
