//! Stand-alone front end for `nest_sim::cli` until the `nest` binary wires
//! it as `nest sim`: `cargo run --release -p nest-sim --example sim -- --help`.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    nest_sim::cli::run(nest_sim::cli::SimArgs::parse())
}
