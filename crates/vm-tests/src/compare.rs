//! Running tests/vm/compare.sh: one 2 sockets x 4 cores x 2 threads NUMA
//! guest records a workload under the default scheduler and under each
//! scx_nest configuration asked for, into one trace per run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nest_trace::Trace;
use nest_vm::{VmOutcome, VmSpec, shell_quote};
use tempfile::TempDir;

use crate::{Report, bin_dir, repo_root, run_ok};

/// Where the traces of one compare.sh run go: `$NEST_VM_OUT` if set (kept
/// after the test), else a temporary directory removed with this value.
pub struct Comparison {
    pub out: PathBuf,
    _temp: TempDir,
}

impl Comparison {
    /// An output directory; the temporary one is named after `prefix`.
    pub fn new(prefix: &str) -> Self {
        let temp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .expect("temporary directory");
        let out = std::env::var_os("NEST_VM_OUT")
            .map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
        let out = nest_vm::output_dir(&out).unwrap_or_else(|e| panic!("{e:#}"));
        Self { out, _temp: temp }
    }

    /// Boot the guest and run compare.sh: `runs` are the scx_nest runs
    /// (name, options) after the default scheduler's, `workload` the shell
    /// command line recorded (see [`guest_bin`]). Fails the test unless
    /// the script exits 0.
    pub fn run(
        &self,
        name: &str,
        timeout: Duration,
        runs: &[(&str, String)],
        workload: &str,
    ) -> (VmOutcome, Report) {
        let spec = VmSpec {
            numa: true,
            memory_mb: 2048,
            timeout,
            workdir: Some(repo_root()),
            output_dir: Some(self.out.clone()),
            ..VmSpec::with_topology(2, 4, 2)
        };
        let mut command = format!("NEST_BIN={} tests/vm/compare.sh", guest_bin());
        for (run, options) in runs {
            let scx = shell_quote(&format!("{run}={options}"));
            command.push_str(&format!(" --scx {scx}"));
        }
        let out = shell_quote(&self.out.to_string_lossy());
        command.push_str(&format!(" {out} {workload}"));
        let outcome = run_ok(&spec, name, &command);
        let report = Report::parse(&outcome.stdout);
        (outcome, report)
    }

    /// The trace of run `name` (`default` or one of the scx_nest runs).
    pub fn trace(&self, name: &str) -> Trace {
        load_trace(&self.out.join(format!("{name}.nest.jsonl")))
    }
}

/// The directory of the guest binaries, quoted for a guest command line.
pub fn guest_bin() -> String {
    shell_quote(&bin_dir().to_string_lossy())
}

/// Load the trace at `path`, failing the test if it cannot be read.
pub fn load_trace(path: &Path) -> Trace {
    nest_trace::format::load(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e:#}", path.display()))
}
