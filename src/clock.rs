//! Time as klog stamps it: milliseconds since the Unix epoch, the unit of
//! record timestamps and of the time index.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
