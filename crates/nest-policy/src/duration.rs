//! Durations as users write them on every command line of this project:
//! `8ms`, `500us`, `10s`. One parser, [`parse_duration_ns`], reads
//! them all; the others here wrap it for clap (`value_parser = ...`).

use std::ops::RangeInclusive;
use std::time::Duration;

/// Longer suffixes first: "ms" must not be read as "m" + "s".
const UNITS: [(&str, u64); 4] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

/// What a duration looks like, for error messages.
const VALID_FORMS: &str = "a number and a unit: ns, us, ms or s, e.g. 500us, 8ms, 10s";

/// Parse `<number><unit>`, unit one of ns, us, ms, s. The number may have
/// a fraction (`0.5ms`). Errors name the valid forms. There is no tick
/// unit: a kernel's tick is 1-10 ms depending on its HZ, and Nest's
/// published "2 ticks" are 8 ms, of a 250 Hz kernel.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let invalid = |why: &str| format!("'{text}' is not a duration ({why}); write {VALID_FORMS}");
    let trimmed = text.trim();
    if trimmed.ends_with("tick") || trimmed.ends_with("ticks") {
        return Err(invalid(
            "a tick's length depends on the kernel's HZ; the published 2 ticks are 8ms",
        ));
    }
    let (number, scale) = UNITS
        .iter()
        .find_map(|&(unit, scale)| {
            trimmed
                .strip_suffix(unit)
                .filter(|n| !n.is_empty())
                .map(|n| (n.trim(), scale))
        })
        .ok_or_else(|| invalid("no unit"))?;
    let value: f64 = number
        .parse()
        .map_err(|_| invalid(&format!("'{number}' is not a number")))?;
    if !value.is_finite() || value < 0.0 {
        return Err(invalid("negative"));
    }
    let ns = value * scale as f64;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(invalid("too long"));
    }
    Ok(ns.round() as u64)
}

/// [`parse_duration_ns`] as a [`Duration`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_ns(text).map(Duration::from_nanos)
}

/// A parser of durations (in ns) that refuses those outside `range`, for
/// clap: `value_parser = duration_ns_within(1_000..=100_000_000)`.
pub fn duration_ns_within(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| {
        let ns = parse_duration_ns(text)?;
        if range.contains(&ns) {
            Ok(ns)
        } else if *range.end() == u64::MAX {
            Err(format!(
                "must be at least {}, not {text}",
                format_duration_ns(*range.start())
            ))
        } else {
            Err(format!(
                "must be between {} and {}, not {text}",
                format_duration_ns(*range.start()),
                format_duration_ns(*range.end())
            ))
        }
    }
}

/// A parser of statistics intervals for clap, as scx's schedulers read
/// them: a bare number is seconds (`--stats 1`, `--monitor 0.5`), and any
/// duration with a unit is taken too (`--stats 500ms`); `range` in ns.
pub fn interval_within(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    let parse = duration_within(range);
    move |text| match text.trim().parse::<f64>() {
        Ok(_) => parse(&format!("{}s", text.trim())),
        Err(_) if parse_duration_ns(text).is_err() => Err(format!(
            "'{text}' is not an interval; write seconds (1, 0.5) or {VALID_FORMS}"
        )),
        Err(_) => parse(text),
    }
}

/// As [`duration_ns_within`], as a [`Duration`].
pub fn duration_within(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    let parse = duration_ns_within(range);
    move |text| parse(text).map(Duration::from_nanos)
}

/// `ns` in the largest of ns, us, ms, s that shows it exactly: `100us`.
pub fn format_duration_ns(ns: u64) -> String {
    let (unit, scale) = [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
        .into_iter()
        .find(|&(_, scale)| ns > 0 && ns.is_multiple_of(scale))
        .unwrap_or(("ns", 1));
    format!("{}{unit}", ns / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_the_number() {
        assert_eq!(parse_duration_ns("8ms"), Ok(8_000_000));
        assert_eq!(parse_duration_ns("50us"), Ok(50_000));
        assert_eq!(parse_duration_ns("0.5ms"), Ok(500_000));
        assert_eq!(parse_duration_ns("3s"), Ok(3_000_000_000));
        assert_eq!(parse_duration_ns("0ns"), Ok(0));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn bad_durations_say_what_is_wrong_and_name_the_valid_forms() {
        for (bad, why) in [
            ("8", "no unit"),
            ("ms", "'m' is not a number"),
            ("-1ms", "negative"),
            ("fastms", "'fast' is not a number"),
        ] {
            let err = parse_duration_ns(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains("ns, us, ms or s"), "{bad}: {err}");
        }
    }

    #[test]
    fn ranges_are_enforced_and_stated_in_units() {
        let slice = duration_ns_within(100_000..=1_000_000_000);
        assert_eq!(slice("4ms"), Ok(4_000_000));
        assert_eq!(
            slice("2s").unwrap_err(),
            "must be between 100us and 1s, not 2s"
        );
        let positive = duration_within(1..=u64::MAX);
        assert_eq!(positive("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(positive("0s").unwrap_err(), "must be at least 1ns, not 0s");
        assert!(positive("2").unwrap_err().contains("no unit"));
    }

    #[test]
    fn intervals_read_a_bare_number_as_seconds_as_scx_does() {
        let interval = interval_within(1_000_000..=u64::MAX);
        assert_eq!(interval("1"), Ok(Duration::from_secs(1)));
        assert_eq!(interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(
            interval("0.0001").unwrap_err(),
            "must be at least 1ms, not 0.0001s"
        );
        assert!(interval("-1").unwrap_err().contains("negative"));
        let err = interval("often").unwrap_err();
        assert!(
            err.contains("write seconds (1, 0.5) or a number and a unit"),
            "{err}"
        );
    }

    #[test]
    fn formatting_picks_the_largest_exact_unit() {
        assert_eq!(format_duration_ns(0), "0ns");
        assert_eq!(format_duration_ns(1_500), "1500ns");
        assert_eq!(format_duration_ns(50_000), "50us");
        assert_eq!(format_duration_ns(8_000_000), "8ms");
        assert_eq!(format_duration_ns(30_000_000_000), "30s");
    }
}
