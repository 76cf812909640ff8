//! Diagnostics on stderr that never panic: a `%` line, a problem or an
//! error written to a closed stderr (`klog-produce ... 2>&1 | head`) is
//! lost, and the tool goes on to its exit code. (`eprintln!` panics on a
//! failed write.)

use std::fmt;
use std::io::Write;

/// Writes `args` and a newline to stderr, ignoring a failure.
pub fn line(args: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// Writes `text` to stderr as it is, ignoring a failure.
pub fn text(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
