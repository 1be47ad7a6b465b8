//! The error every reader returns: where in the input, and what was wrong.

use std::fmt;

/// A malformed input: the 1-based line (or, for binary input, the byte
/// offset) and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where: `line N` or `byte N`.
    pub at: Position,
    /// What was expected or found.
    pub msg: String,
}

/// A place in an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    Line(usize),
    Byte(u64),
}

impl ParseError {
    /// An error at 1-based line `line`.
    pub fn line(line: usize, msg: impl Into<String>) -> Self {
        Self {
            at: Position::Line(line),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Position::Line(n) => write!(f, "line {n}: {}", self.msg),
            Position::Byte(n) => write!(f, "byte {n}: {}", self.msg),
        }
    }
}

impl std::error::Error for ParseError {}
