//! The metrics endpoint (`--metrics-listen HOST:PORT`): `GET /metrics`
//! answers Prometheus' text format (0.0.4) of [`super::metrics`], with the
//! partitions' and groups' values read at the scrape.
//!
//! It answers one connection at a time: a request head of at most 8 KiB,
//! read within 2 s, then the answer, and the connection closes. A client
//! that sends nothing holds it 2 s at most; anything but `GET /metrics`
//! (or `GET /`) is answered 404.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{Encoder, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

use super::shared::Shared;
use crate::sync::lock;

/// The longest request head read.
const HEAD_MAX: usize = 8 * 1024;
/// How long a scrape's request may take to arrive.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// A metric registered for one scrape (a registration fails only for a
/// name given twice, which these are not).
fn add(registry: &Registry, metric: impl Collector + 'static) {
    let _ = registry.register(Box::new(metric));
}

/// A gauge family of one scrape, labelled by `labels`.
fn gauges(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let family = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    add(registry, family.clone());
    family
}

/// The text Prometheus scrapes: the counters, and the partitions' and
/// groups' values now.
pub(super) fn render(shared: &Shared) -> String {
    let m = &shared.metrics;
    let registry = Registry::new();
    add(&registry, m.requests.clone());
    add(&registry, m.request_seconds.clone());
    add(&registry, m.flush_seconds.clone());
    let counter = |name: &str, help: &str, value: u64| {
        let c = IntCounter::new(name, help).expect("valid metric");
        c.inc_by(value);
        add(&registry, c);
    };
    counter(
        "klog_appended_batches_total",
        "Batches appended",
        shared.appends.load(Ordering::Relaxed),
    );
    counter(
        "klog_fsyncs_total",
        "Group-commit fsyncs",
        shared.fsyncs.load(Ordering::Relaxed),
    );
    counter(
        "klog_producers_expired_total",
        "Idempotent producers forgotten after --producer-id-expiration",
        shared.producers_expired.load(Ordering::Relaxed),
    );
    if let Some(spares) = &shared.config.log.spares {
        counter(
            "klog_preallocated_segments_total",
            "Segments given a spare file of zeros (--preallocate)",
            spares.taken(),
        );
        counter(
            "klog_preallocate_misses_total",
            "Segments made with no spare ready (--preallocate)",
            spares.missed(),
        );
    }
    let connections =
        IntGauge::new("klog_connections", "Open client connections").expect("valid metric");
    connections.set(lock(&shared.sockets).len() as i64);
    add(&registry, connections);
    partitions(shared, &registry);
    let mut out = Vec::new();
    // Encoding the families gathered cannot fail.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// The partitions' gauges, and the groups' lag on them.
fn partitions(shared: &Shared, registry: &Registry) {
    let tp = ["topic", "partition"];
    let start = gauges(
        registry,
        "klog_partition_log_start_offset",
        "First offset kept",
        &tp,
    );
    let end = gauges(
        registry,
        "klog_partition_log_end_offset",
        "Next offset to append",
        &tp,
    );
    let hw = gauges(
        registry,
        "klog_partition_high_watermark",
        "Offset consumers read up to",
        &tp,
    );
    let replicas = gauges(
        registry,
        "klog_partition_replicas",
        "Replicas of the partition",
        &tp,
    );
    let isr = gauges(
        registry,
        "klog_partition_in_sync_replicas",
        "In-sync replicas (leader)",
        &tp,
    );
    let under = gauges(
        registry,
        "klog_partition_under_replicated",
        "1 when fewer are in sync",
        &tp,
    );
    let producers = gauges(
        registry,
        "klog_partition_producers",
        "Idempotent producers the partition knows",
        &tp,
    );
    let lag = gauges(
        registry,
        "klog_group_lag",
        "High watermark minus the group's committed offset",
        &["group", "topic", "partition"],
    );
    let groups = shared
        .registry
        .as_ref()
        .and_then(|r| r.groups().ok())
        .unwrap_or_default();
    let families = [&start, &end, &hw, &replicas, &isr, &under, &producers];
    for p in shared.all_partitions() {
        if let Some(high) = partition_gauges(&p, families) {
            group_lag(shared, &groups, (&p.topic, p.partition, high), &lag);
        }
    }
}

/// One partition's gauges in `[start, end, high watermark, replicas, in
/// sync, under-replicated, producers]`: its high watermark where this
/// broker leads it (or holds its only copy), for the groups' lag.
fn partition_gauges(p: &super::shared::Partition, families: [&IntGaugeVec; 7]) -> Option<u64> {
    let [start, end, hw, replicas, isr, under, producers] = families;
    let index = p.partition.to_string();
    let labels = [p.topic.as_str(), index.as_str()];
    let (first, next, known) = {
        let log = p.lock();
        (log.start_offset(), log.next_offset(), log.producers_known())
    };
    producers.with_label_values(&labels).set(known as i64);
    let high = p.high_watermark.load(Ordering::Acquire);
    start.with_label_values(&labels).set(first as i64);
    end.with_label_values(&labels).set(next as i64);
    hw.with_label_values(&labels).set(high as i64);
    let count = p.replica.as_ref().map_or(1, |r| r.replicas.len());
    replicas.with_label_values(&labels).set(count as i64);
    let in_sync = match &p.replica {
        None => 1,
        Some(r) => match &*r.role() {
            super::replica::Role::Leader(leading) => leading.isr.len(),
            _ => return None,
        },
    };
    isr.with_label_values(&labels).set(in_sync as i64);
    under
        .with_label_values(&labels)
        .set(i64::from(in_sync < count));
    Some(high)
}

/// Each group's lag on a partition this broker leads: its high watermark
/// minus the group's committed offset, for the groups that committed one.
fn group_lag(
    shared: &Shared,
    groups: &[String],
    (topic, partition, high): (&str, u32, u64),
    lag: &IntGaugeVec,
) {
    let Some(registry) = &shared.registry else {
        return;
    };
    let index = partition.to_string();
    for group in groups {
        if let Ok(Some(committed)) = registry.committed(group, topic, partition) {
            let behind = high.saturating_sub(committed);
            lag.with_label_values(&[group.as_str(), topic, index.as_str()])
                .set(behind as i64);
        }
    }
}

/// Serves `GET /metrics` on `listener` until the broker stops.
pub(super) fn serve(shared: &Arc<Shared>, listener: &TcpListener) {
    while !shared.stopping() {
        match super::listener::wait_for_peer(listener) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                shared.log(format_args!("the metrics listener failed: {e}"));
                return;
            }
        }
        let Ok((mut stream, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
        let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
        let answer = match read_head(&mut stream) {
            Some(head) if asks_for_metrics(&head) => {
                let body = render(shared);
                respond("200 OK", "text/plain; version=0.0.4; charset=utf-8", &body)
            }
            Some(_) => respond("404 Not Found", "text/plain", "GET /metrics\n"),
            None => continue,
        };
        let _ = stream.write_all(answer.as_bytes());
    }
}

/// The request head (to the blank line), at most [`HEAD_MAX`] bytes;
/// `None` for one cut short, too long or too slow.
fn read_head(stream: &mut impl Read) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        head.extend_from_slice(&chunk[..n]);
        if head.len() > HEAD_MAX {
            return None;
        }
    }
    Some(head)
}

/// Whether the head is `GET /metrics` (a query string allowed) or `GET /`.
fn asks_for_metrics(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|b| *b == b' ');
    let (method, path) = (words.next(), words.next());
    let path = path.map(|p| p.split(|b| *b == b'?').next().unwrap_or_default());
    method == Some(b"GET") && matches!(path, Some(b"/metrics") | Some(b"/"))
}

fn respond(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_answered_with_metrics() {
        assert!(asks_for_metrics(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        ));
        assert!(asks_for_metrics(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"));
        assert!(asks_for_metrics(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(!asks_for_metrics(b"POST /metrics HTTP/1.1\r\n\r\n"));
        assert!(!asks_for_metrics(b"GET /other HTTP/1.1\r\n\r\n"));
        assert!(!asks_for_metrics(b""));
    }

    #[test]
    fn a_head_is_read_to_its_blank_line_and_no_further_than_its_bound() {
        let mut short: &[u8] = b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest";
        assert!(read_head(&mut short).is_some());
        let mut cut: &[u8] = b"GET / HTTP/1.1\r\n";
        assert_eq!(read_head(&mut cut), None, "ended before its blank line");
        let long = vec![b'a'; HEAD_MAX * 2];
        assert_eq!(read_head(&mut &long[..]), None, "past the bound");
    }
}
