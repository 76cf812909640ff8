//! Metrics for Prometheus (`--metrics-listen HOST:PORT`): `GET /metrics`
//! answers Prometheus' text format (0.0.4, as the `prometheus` crate
//! encodes it), read by Prometheus and checked by `promtool check
//! metrics`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `klog_requests_total` | counter | `listener` (klog, kafka), `api` |
//! | `klog_request_duration_seconds` | histogram | `listener`, `api` |
//! | `klog_partition_log_start_offset` | gauge | `topic`, `partition` |
//! | `klog_partition_log_end_offset` | gauge | `topic`, `partition` |
//! | `klog_partition_high_watermark` | gauge | `topic`, `partition` |
//! | `klog_partition_replicas` | gauge | `topic`, `partition` |
//! | `klog_partition_in_sync_replicas` | gauge | `topic`, `partition` (where this broker leads) |
//! | `klog_partition_under_replicated` | gauge | `topic`, `partition` (1: fewer in sync than replicas) |
//! | `klog_partition_producers` | gauge | `topic`, `partition` (idempotent producers it knows) |
//! | `klog_group_lag` | gauge | `group`, `topic`, `partition` (high watermark − committed offset, partitions led here) |
//! | `klog_connections` | gauge | |
//! | `klog_appended_batches_total` | counter | |
//! | `klog_fsyncs_total` | counter | |
//! | `klog_producers_expired_total` | counter | |
//! | `klog_flush_duration_seconds` | histogram | |
//! | `klog_preallocated_segments_total` | counter | (with `--preallocate`) |
//! | `klog_preallocate_misses_total` | counter | (with `--preallocate`: segments made with no spare ready) |
//!
//! Partition and group values are read at each scrape; the counters and
//! histograms are kept as requests are answered (an atomic add and a
//! histogram bucket each).
//!
//! The endpoint is [`super::scrape`].

use std::time::{Duration, Instant};

use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts,
};

/// 50 µs to about 27 s.
fn latency(name: &str, help: &str) -> HistogramOpts {
    let buckets = exponential_buckets(0.000_05, 2.0, 20).unwrap_or_default();
    HistogramOpts::new(name, help).buckets(buckets)
}

/// What the broker counts as it works.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    pub(super) requests: IntCounterVec,
    pub(super) request_seconds: HistogramVec,
    pub(super) flush_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let labels = ["listener", "api"];
        // Constant, valid names and labels: these cannot fail.
        let requests = IntCounterVec::new(
            Opts::new("klog_requests_total", "Requests answered"),
            &labels,
        );
        let seconds = latency("klog_request_duration_seconds", "How long requests took");
        let flush = latency(
            "klog_flush_duration_seconds",
            "How long the flusher's fsyncs took",
        );
        Metrics {
            requests: requests.expect("valid metric"),
            request_seconds: HistogramVec::new(seconds, &labels).expect("valid metric"),
            flush_seconds: Histogram::with_opts(flush).expect("valid metric"),
        }
    }
}

impl Metrics {
    /// Times a request of `api` on `listener` ("klog" or "kafka"): it is
    /// counted when the timer is dropped.
    pub(crate) fn request(&self, listener: &'static str, api: &'static str) -> Timer<'_> {
        Timer {
            metrics: self,
            labels: [listener, api],
            began: Instant::now(),
        }
    }

    /// Counts a flush (its fsyncs) that took `took`.
    pub(crate) fn flushed(&self, took: Duration) {
        self.flush_seconds.observe(took.as_secs_f64());
    }
}

/// A request being timed ([`Metrics::request`]).
#[derive(Debug)]
pub(crate) struct Timer<'m> {
    metrics: &'m Metrics,
    labels: [&'static str; 2],
    began: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        let m = self.metrics;
        m.requests.with_label_values(&self.labels).inc();
        let seconds = self.began.elapsed().as_secs_f64();
        m.request_seconds
            .with_label_values(&self.labels)
            .observe(seconds);
    }
}
