//! Durations as users write them for the tunables: `8ms`, `500us`, `2ticks`.

use crate::TICK_NS;

/// Longer suffixes first: "ticks" must not be read as "tick" + "s".
const UNITS: [(&str, u64); 6] = [
    ("ticks", TICK_NS),
    ("tick", TICK_NS),
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

/// Parse `<number><unit>`, unit one of ns, us, ms, s, tick(s) (a tick is
/// 4 ms, the published 250 Hz). The number may have a fraction (`0.5ms`).
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, scale) = UNITS
        .iter()
        .find_map(|&(unit, scale)| {
            text.strip_suffix(unit)
                .filter(|n| !n.is_empty())
                .map(|n| (n.trim(), scale))
        })
        .ok_or_else(|| {
            format!(
                "'{text}' is not a duration: write a number and a unit, e.g. 8ms, 500us, 2ticks"
            )
        })?;
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{number}' in '{text}' is not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("'{text}' must be a non-negative duration"));
    }
    let ns = value * scale as f64;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(format!("'{text}' is too long"));
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_the_number() {
        assert_eq!(parse_duration_ns("8ms"), Ok(8_000_000));
        assert_eq!(parse_duration_ns("2ticks"), Ok(8_000_000));
        assert_eq!(parse_duration_ns("1tick"), Ok(4_000_000));
        assert_eq!(parse_duration_ns("50us"), Ok(50_000));
        assert_eq!(parse_duration_ns("0.5ms"), Ok(500_000));
        assert_eq!(parse_duration_ns("3s"), Ok(3_000_000_000));
        assert_eq!(parse_duration_ns("0ns"), Ok(0));
    }

    #[test]
    fn bad_durations_say_what_is_wrong() {
        assert!(parse_duration_ns("8").unwrap_err().contains("unit"));
        assert!(parse_duration_ns("ms").is_err());
        assert!(
            parse_duration_ns("-1ms")
                .unwrap_err()
                .contains("non-negative")
        );
        assert!(
            parse_duration_ns("fastms")
                .unwrap_err()
                .contains("not a number")
        );
    }
}
