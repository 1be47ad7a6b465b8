//! Compiles the shared C policy natively (csrc/native.c includes
//! ../../policy/nest_policy.c, smove_policy.c and
//! nest_perf.c behind the native platform interface).

fn main() {
    let policy = std::path::Path::new("../../policy");
    println!("cargo:rerun-if-changed=csrc/native.c");
    println!("cargo:rerun-if-changed={}", policy.display());
    for file in [
        "nest_policy.c",
        "nest_policy.h",
        "smove_policy.c",
        "nest_perf.c",
    ] {
        println!("cargo:rerun-if-changed={}", policy.join(file).display());
    }
    cc::Build::new()
        .file("csrc/native.c")
        .include(policy)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(2)
        .compile("nest_policy_native");
}
