//! The process-wide stop flag: a signal handler sets it, and every long
//! loop (a broker, a follow, a benchmark) checks it and winds down cleanly.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by a signal handler to ask long loops to stop.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Whether a stop was asked for.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}
