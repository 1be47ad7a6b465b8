//! Stand-alone `nest trace` until the `nest` binary embeds it:
//! `cargo run -p nest-trace --example nest-trace -- report t.trace --html r.html`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "nest-trace")]
struct Cli {
    #[command(flatten)]
    trace: nest_trace::TraceArgs,
}

fn main() -> anyhow::Result<()> {
    nest_trace::run(Cli::parse().trace)
}
