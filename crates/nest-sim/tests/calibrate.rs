//! The calibration suite (`nest sim calibrate`): the built-in models
//! reproduce the published behaviour of their hardware and of the default
//! scheduler on it, within each case's tolerance, at their central values
//! and at both ends of every assumption's range; and a model moved off a
//! measurement fails the case that measurement backs.

use nest_sim::Machine;
use nest_sim::calibrate::{self, Case};

fn case(id: &str) -> Case {
    calibrate::cases()
        .into_iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no case {id}"))
}

#[test]
fn every_calibration_case_passes_on_the_built_in_models() {
    let results = calibrate::run_all().unwrap();
    assert!(results.len() >= 10);
    assert!(
        results.iter().all(|(_, o)| o.pass),
        "{}",
        calibrate::table(&results)
    );
}

#[test]
fn a_model_moved_off_its_measurement_fails_the_case_it_backs() {
    // The E7's rise at half its measured length.
    let e7 = Machine::builtin("xeon-e7-8870-v4-4s").unwrap();
    let fast = e7.with_parameter("dynamics.ramp_up_us", 15000.0).unwrap();
    assert!(case("e7-busy-loop-rise").run(&e7).unwrap().pass);
    assert!(!case("e7-busy-loop-rise").run(&fast).unwrap().pass);
    // A Gold 5218 whose cores ran exactly at schedutil's request in the
    // turbo range: the default scheduler gains from performance, which
    // the paper did not see.
    let gold = Machine::builtin("xeon-gold-5218-2s").unwrap();
    let mut exact = gold.clone();
    exact.dynamics.turbo_request_grant = 0.0;
    let outcome = case("gold-5218-configure").run(&exact).unwrap();
    assert!(!outcome.pass, "{outcome:?}");
}

/// Runs `machine`'s calibration cases at both ends of every assumption
/// range that moves time (the power model's move only energy, which no
/// case measures).
fn ranges_keep_the_calibration(name: &str) {
    let machine = Machine::builtin(name).unwrap();
    let cases: Vec<Case> = calibrate::cases()
        .into_iter()
        .filter(|c| c.machine == name)
        .collect();
    assert!(!cases.is_empty());
    for (path, a) in &machine.assumptions {
        if path.starts_with("power.") && !path.ends_with("exit_latency_us") {
            continue;
        }
        for value in [a.low, a.high] {
            let variant = machine.with_parameter(path, value).unwrap();
            for case in &cases {
                let outcome = case.run(&variant).unwrap();
                assert!(
                    outcome.pass,
                    "{name} with {path} = {value}: {} gives {}",
                    case.id, outcome.simulated
                );
            }
        }
    }
}

#[test]
fn the_gold_5218_ranges_keep_its_calibration() {
    ranges_keep_the_calibration("xeon-gold-5218-2s");
}

#[test]
fn the_gold_6130_ranges_keep_its_calibration() {
    ranges_keep_the_calibration("xeon-gold-6130-2s");
}

#[test]
fn the_e7_8870_v4_ranges_keep_its_calibration() {
    ranges_keep_the_calibration("xeon-e7-8870-v4-4s");
}
