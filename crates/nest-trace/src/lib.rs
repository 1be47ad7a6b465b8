//! nest-trace: the project's single event model for schedules, real or
//! simulated, and (as it grows) the readers, metrics, pictures and exports
//! that work on it.

pub mod model;

pub use model::*;
