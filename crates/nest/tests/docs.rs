//! The documentation stays reference: the README short, no dated
//! narrative or issue numbers outside `results/`, every relative link
//! pointing at a file of the repository.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every Markdown file under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut found);
    found
}

/// `text` without the paths of results/ folders, whose names are dated.
fn without_results_paths(text: &str) -> String {
    text.split_whitespace()
        .filter(|word| !word.contains("results/"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Does `text` hold a date (YYYY-MM-DD), "issue N" or "Nth stop"?
fn dated(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    for i in 0..bytes.len() {
        let date = (0..4).all(|k| digit(i + k))
            && bytes.get(i + 4) == Some(&b'-')
            && digit(i + 5)
            && digit(i + 6)
            && bytes.get(i + 7) == Some(&b'-')
            && digit(i + 8)
            && digit(i + 9)
            && &text[i..i + 2] == "20";
        if date {
            return Some(text[i..i + 10].to_string());
        }
    }
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    for pair in words.windows(2) {
        let number = |w: &str| {
            w.trim_end_matches([',', '.', ')', ':'])
                .parse::<u32>()
                .is_ok()
        };
        if pair[0] == "issue" && number(pair[1]) {
            return Some(pair.join(" "));
        }
        let ordinal = ["st", "nd", "rd", "th"].iter().any(|s| {
            pair[0]
                .strip_suffix(s)
                .is_some_and(|n| n.parse::<u32>().is_ok())
        });
        if ordinal && pair[1].starts_with("stop") {
            return Some(pair.join(" "));
        }
    }
    None
}

#[test]
fn the_detector_finds_dates_issues_and_stops_but_not_results_paths() {
    // Split so that this file does not hold what it looks for.
    let date = concat!("2026", "-11-27");
    assert_eq!(dated(&format!("measured {date} in")), Some(date.into()));
    assert_eq!(
        dated(concat!("as issue", " 10 asks")),
        Some(concat!("issue", " 10").into())
    );
    assert_eq!(dated("the twelfth stop"), None);
    assert_eq!(
        dated(concat!("the 12th", " stop")),
        Some(concat!("12th", " stop").into())
    );
    assert_eq!(dated("0.5 s, 4 ms, v5.10, 1-2 CPUs"), None);
    assert_eq!(
        dated(&without_results_paths("see results/2026-12-06-x/ for it")),
        None
    );
}

#[test]
fn reference_pages_carry_no_dated_narrative() {
    let mut found = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = dated(&without_results_paths(line)) {
                found.push(format!("{}:{}: {what}", page.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "dated measurements belong in results/, the story in git history:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_readme_fits_about_two_screens() {
    let lines = std::fs::read_to_string(repo().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(lines <= 160, "README.md has {lines} lines");
}

#[test]
fn relative_links_point_at_files_of_the_repository() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
        {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.contains(' ') {
                continue;
            }
            if !page.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
