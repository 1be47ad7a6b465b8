//! Build-time reader of the statistics lists of the C headers, shared by the
//! build scripts of nest-policy and scx_nest (which includes this file with
//! `#[path]`).
//!
//! A list is a function-like X-macro, `#define NEST_STATS(X) X(NAME, group,
//! "description") ...`, from which the C header generates its enum. bindgen
//! hands the macro's tokens to [`StatLists::func_macro`] while it reads the
//! header, and [`rust_enum`] turns a list into a Rust enum with the same
//! values, names, groups and descriptions: the C list is the only
//! definition.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One entry of a list: `X(NAME, group, "description")`.
#[derive(Debug)]
pub struct StatEntry {
    /// NAME, as written in C (upper case).
    pub c_name: String,
    pub group: String,
    /// The C string literal, quotes included (also a valid Rust literal).
    pub description_literal: String,
}

/// A list's entries, or why they could not be read.
type ListResult = Result<Vec<StatEntry>, String>;

/// A bindgen callback that records the lists named in `wanted`.
#[derive(Debug, Clone)]
pub struct StatLists {
    wanted: &'static [&'static str],
    /// Each list seen, or why it could not be read (a panic in a bindgen
    /// callback would abort without its message).
    found: Arc<Mutex<BTreeMap<String, ListResult>>>,
}

impl StatLists {
    pub fn new(wanted: &'static [&'static str]) -> Self {
        Self {
            wanted,
            found: Arc::default(),
        }
    }

    /// The entries of list `name`; panics if bindgen did not see it.
    pub fn take(&self, name: &str) -> Vec<StatEntry> {
        self.found
            .lock()
            .expect("no panic while holding the lock")
            .remove(name)
            .unwrap_or_else(|| Err(format!("the C headers define no statistics list {name}")))
            .unwrap_or_else(|err| panic!("{err}"))
    }
}

impl bindgen::callbacks::ParseCallbacks for StatLists {
    fn func_macro(&self, name_and_params: &str, body: &[&[u8]]) {
        let Some((name, params)) = name_and_params.split_once('(') else {
            return;
        };
        if !self.wanted.contains(&name) {
            return;
        }
        let param = params.trim_end_matches(')');
        let tokens: Vec<&str> = body
            .iter()
            .filter_map(|t| std::str::from_utf8(t).ok())
            .filter(|t| !t.starts_with("/*") && !t.starts_with("//"))
            .collect();
        let entries = tokens
            .chunks(8)
            .map(|entry| match entry {
                [x, "(", c_name, ",", group, ",", description, ")"]
                    if *x == param && description.starts_with('"') =>
                {
                    Ok(StatEntry {
                        c_name: c_name.to_string(),
                        group: group.to_string(),
                        description_literal: description.to_string(),
                    })
                }
                _ => Err(format!(
                    "{name}: expected entries {param}(NAME, group, \"description\"), found {entry:?}"
                )),
            })
            .collect();
        self.found
            .lock()
            .expect("no panic while holding the lock")
            .insert(name.to_string(), entries);
    }
}

/// `FALLBACK_WIDE` -> `FallbackWide`.
fn camel_case(c_name: &str) -> String {
    c_name
        .split('_')
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// Rust source of `enum {rust_name}`, one variant per entry in list order,
/// each with the value of the C enumerator `{c_prefix}NAME` (found at
/// `{c_path}::{c_prefix}NAME`), and `ALL`, `name()` (NAME lower-cased),
/// `group()` and `description()`.
pub fn rust_enum(rust_name: &str, c_path: &str, c_prefix: &str, entries: &[StatEntry]) -> String {
    let variants: Vec<String> = entries.iter().map(|e| camel_case(&e.c_name)).collect();
    let mut out = format!(
        "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\n#[repr(u32)]\npub enum {rust_name} {{\n"
    );
    for (entry, variant) in entries.iter().zip(&variants) {
        out += &format!(
            "    #[doc = {}]\n    {variant} = {c_path}::{c_prefix}{},\n",
            entry.description_literal, entry.c_name
        );
    }
    out += &format!(
        "}}\n\nimpl {rust_name} {{\n    /// Every value, in the order of the C enum.\n    pub const ALL: [{rust_name}; {}] = [{}];\n",
        entries.len(),
        variants
            .iter()
            .map(|v| format!("{rust_name}::{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let method = |doc: &str, fn_name: &str, value: &dyn Fn(&StatEntry) -> String| {
        let mut arms = String::new();
        for (entry, variant) in entries.iter().zip(&variants) {
            arms += &format!("            {rust_name}::{variant} => {},\n", value(entry));
        }
        format!(
            "\n    /// {doc}\n    pub fn {fn_name}(self) -> &'static str {{\n        match self {{\n{arms}        }}\n    }}\n"
        )
    };
    out += &method(
        "The name users see (`--stats`, `--help-stats`).",
        "name",
        &|e| format!("{:?}", e.c_name.to_ascii_lowercase()),
    );
    out += &method("The monitor line it is printed on.", "group", &|e| {
        format!("{:?}", e.group)
    });
    out += &method("What it counts.", "description", &|e| {
        e.description_literal.clone()
    });
    out + "}\n"
}
