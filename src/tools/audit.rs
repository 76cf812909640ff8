//! The paper's audit: "correctness is audited rather than assumed". A
//! producer run with `--audit-topic AUDIT` stamps every record it sends
//! with its origin and a sequence number, counts its records per window of
//! their timestamps (the generation time), and publishes the counts to
//! AUDIT; `klog-consume --audit AUDIT` reconciles them against what the
//! data topics hold ([`crate::tools::reconcile`]).
//!
//! Each record gets three headers (kept by a mirror, which copies
//! headers):
//!
//! | header | value |
//! |---|---|
//! | `klog.host` | the producer's host name |
//! | `klog.producer` | the producer run's id: 16 hex digits, random |
//! | `klog.seq` | the record's number in the run, from 0, in decimal |
//!
//! A count is one JSON record of AUDIT (keyed by the producer's id):
//!
//! ```text
//! {"producer":"5f0c2a9e41d3b877","host":"dc1-web7","topic":"events","window":1764979200000,"window_ms":60000,"count":1200}
//! ```
//!
//! `window` is the start of the window (ms since the epoch, a multiple of
//! `window_ms`: windows are aligned to the wall clock), `count` the
//! records of that window the producer accepted so far, cumulative: a
//! window is published again when it grows (a clock stepped back into
//! it), and the reconciler takes the largest count of each window, so that
//! a count published twice (a mirror of AUDIT sends at least once) or late
//! changes nothing. A record counted is one the producer accepted from its
//! input and handed to its batches: one lost after that (a producer killed
//! with records in its buffer, `--acks 0`) shows as lost.

/// The header naming the producer's host.
pub const HOST_HEADER: &str = "klog.host";
/// The header naming the producer run.
pub const PRODUCER_HEADER: &str = "klog.producer";
/// The header numbering the record in its producer run.
pub const SEQ_HEADER: &str = "klog.seq";

/// The default window: a minute.
pub const WINDOW_MS_DEFAULT: u64 = 60_000;

/// Windows are 100 ms to a day long.
pub const WINDOW_MS_MIN: u64 = 100;
/// The longest window.
pub const WINDOW_MS_MAX: u64 = 86_400_000;

/// One published count (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Count {
    /// The producer run's id.
    pub producer: String,
    /// Its host.
    pub host: String,
    /// The data topic.
    pub topic: String,
    /// The window's start, ms since the epoch.
    pub window: i64,
    /// The window's length.
    pub window_ms: u64,
    /// Records of the window accepted so far.
    pub count: u64,
}

/// The start of the window of `window_ms` that holds `ts` (ms since the
/// epoch; before the epoch too).
pub fn window_of(ts: i64, window_ms: u64) -> i64 {
    let w = i64::try_from(window_ms.max(1)).unwrap_or(i64::MAX);
    ts.div_euclid(w).saturating_mul(w)
}

/// This host's name (`/proc/sys/kernel/hostname`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_to_the_clock_before_the_epoch_too() {
        assert_eq!(window_of(119_999, 60_000), 60_000);
        assert_eq!(window_of(120_000, 60_000), 120_000);
        assert_eq!(window_of(-1, 60_000), -60_000);
        assert_eq!(window_of(5, 0), 5, "a window of 0 is 1 ms");
    }

    #[test]
    fn a_count_reads_back_as_written() {
        let c = Count {
            producer: "ab".into(),
            host: "h".into(),
            topic: "t".into(),
            window: 60_000,
            window_ms: 60_000,
            count: 3,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(
            text,
            r#"{"producer":"ab","host":"h","topic":"t","window":60000,"window_ms":60000,"count":3}"#
        );
        assert_eq!(serde_json::from_str::<Count>(&text).unwrap(), c);
    }
}
