//! Nest's tunables as command-line options, the same in `scx_nest` and
//! `nest sim` (flattened into both with `#[command(flatten)]`).

use clap::Args;

use crate::{Mechanism, Params, PerfMode, duration_ns_within, parse_duration_ns};

/// The published defaults: P_remove and S_max 8 ms (2 ticks of the
/// paper's 250 Hz kernel), R_max 5, R_impatient 2.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Nest tunables")]
pub struct ParamsArgs {
    /// Idle time after which a primary-nest CPU is demoted (P_remove; the
    /// paper's 2 ticks of a 250 Hz kernel).
    #[arg(long, default_value = "8ms", value_name = "DURATION", value_parser = parse_duration_ns)]
    pub p_remove: u64,

    /// Longest warm spin of an idle primary-nest CPU (S_max; the paper's
    /// 2 ticks of a 250 Hz kernel).
    #[arg(long, default_value = "8ms", value_name = "DURATION", value_parser = parse_duration_ns)]
    pub s_max: u64,

    /// Capacity of the reserve nest, in CPUs (R_max).
    #[arg(long, default_value_t = 5)]
    pub r_max: u32,

    /// Times a task may find its previous CPU busy before it becomes
    /// impatient (R_impatient, at least 1; to switch impatience off:
    /// --disable impatience).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub r_impatient: u32,

    /// Switch mechanisms off for ablation studies, comma-separated: attach,
    /// reserve, impatience, compaction, exit-demotion, wide-fallback,
    /// warm-spin, whole-cores (off: the published, SMT-blind placement),
    /// fork-reuse (off: forks ignore the CPU the last exiting task left),
    /// warm-prev (off: a woken task whose idle previous CPU left the
    /// primary nest looks for another, as published), keep-attached (off:
    /// the CPU of a sleeping attached task goes to the next task that
    /// finds it, as published).
    #[arg(long, value_delimiter = ',', value_name = "MECHANISMS", value_parser = Mechanism::parse)]
    pub disable: Vec<Mechanism>,

    /// Frequency requests (scx_bpf_cpuperf_set, read by the schedutil
    /// governor): util (each CPU asks for its utilisation, tracked as the
    /// fair scheduler's PELT does; schedutil adds its 25% headroom, so
    /// frequencies follow schedutil's usual rule); nest (util, but CPUs of
    /// the primary nest ask for the maximum, so the cores Nest keeps warm
    /// also run fast); max (no requests: the kernel's default, every CPU
    /// at full speed under schedutil). Default: util; scx_nest makes none
    /// when no CPU's cpufreq governor is schedutil, the one that reads
    /// them, unless this option asks for them.
    #[arg(long, value_name = "MODE", value_parser = PerfMode::parse)]
    pub perf: Option<PerfMode>,

    /// S_move: how long a task may wait on the waker's CPU before it moves
    /// to the default CPU (D; 1us to 100ms).
    #[arg(long, default_value = "50us", value_name = "DURATION",
          value_parser = duration_ns_within(1_000..=100_000_000))]
    pub smove_delay: u64,
}

impl ParamsArgs {
    /// The policy's parameters; the rest keep their defaults.
    pub fn params(&self) -> Params {
        Params {
            p_remove_ns: self.p_remove,
            s_max_ns: self.s_max,
            r_max: self.r_max,
            r_impatient: self.r_impatient,
            disabled: self.disable.clone(),
            smove_delay_ns: self.smove_delay,
            perf: self.perf.unwrap_or_default(),
            ..Params::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        params: ParamsArgs,
    }

    fn params(args: &[&str]) -> Result<Params, clap::Error> {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Ok(Cli::try_parse_from(argv)?.params.params())
    }

    #[test]
    fn the_defaults_are_the_published_ones() {
        assert_eq!(params(&[]).unwrap(), Params::default());
    }

    #[test]
    fn every_tunable_is_taken() {
        let p = params(&[
            "--p-remove=8ms",
            "--s-max=4ms",
            "--r-max=3",
            "--r-impatient=4",
            "--disable=reserve,warm-spin",
            "--perf=nest",
            "--smove-delay=200us",
        ])
        .unwrap();
        assert_eq!((p.p_remove_ns, p.s_max_ns), (8_000_000, 4_000_000));
        assert_eq!((p.r_max, p.r_impatient), (3, 4));
        assert_eq!(p.disabled, vec![Mechanism::Reserve, Mechanism::WarmSpin]);
        assert_eq!(p.perf, PerfMode::Nest);
        assert_eq!(p.smove_delay_ns, 200_000);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for (args, says) in [
            (&["--r-impatient", "0"][..], "--r-impatient"),
            (&["--smove-delay", "1s"], "between 1us and 100ms"),
            (&["--p-remove", "8"], "no unit"),
            (&["--disable", "spin"], "valid: attach,"),
        ] {
            let err = params(args).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(says), "{args:?}: {err}");
        }
    }
}
