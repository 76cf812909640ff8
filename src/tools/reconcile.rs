//! `klog-consume --audit AUDIT`: reconciles what producers say they sent
//! (their counts in AUDIT, see [`crate::tools::audit`]) against what the
//! data topics hold, per window, producer and topic.
//!
//! AUDIT is read to its end first (the largest count of each window
//! wins: counts are cumulative, and one published twice changes
//! nothing), then each data topic it names (or `-t`'s alone) to the end
//! it has now. A record counts for the window of its timestamp, in its
//! producer's window length, and is told apart by its producer and
//! number (`klog.producer`, `klog.seq`): a number seen again is a
//! duplicate (at-least-once delivery: a batch sent again, a mirror
//! restarted), a number never seen is lost. Per row:
//!
//! - `received`: records of the window in the topic, duplicates included;
//! - `lost`: counted by the producer, not there (`sent` less the
//!   distinct numbers received);
//! - `duplicated`: received more than once;
//! - `status`: `ok`; `lost`; `unaudited` (records with no count, or more
//!   distinct numbers than the count: a producer that died before it
//!   published); or `open`, a window that has not closed yet (its end
//!   plus the grace, `--audit-grace`, is still to come), whatever it
//!   holds so far.
//!
//! The exit status is 3 when a closed window is not `ok` (as `klog-dump
//! --verify` on damage), else 0.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};

use anyhow::Context;

use super::audit::{window_of, Count, PRODUCER_HEADER, SEQ_HEADER, WINDOW_MS_DEFAULT};
use super::follow::{read_to_end, Options};
use super::Say;
use crate::client::offset::OffsetSpec;
use crate::storage::record::Record;

/// One window of one producer's records of one topic.
type Key = (i64, String, String);

/// What a window holds.
#[derive(Debug, Default)]
struct Tally {
    /// Records received, duplicates included.
    received: u64,
    /// The distinct numbers received, as ranges (start → end, exclusive).
    seqs: BTreeMap<u64, u64>,
    distinct: u64,
}

impl Tally {
    /// Notes number `seq` received; false when it was already.
    fn receive(&mut self, seq: u64) -> bool {
        self.received += 1;
        let before = self.seqs.range(..=seq).next_back().map(|(&s, &e)| (s, e));
        if before.is_some_and(|(_, end)| seq < end) {
            return false;
        }
        self.distinct += 1;
        let after = self.seqs.get(&(seq + 1)).copied();
        match (before.filter(|&(_, end)| end == seq), after) {
            (Some((start, _)), Some(end)) => {
                self.seqs.remove(&(seq + 1));
                self.seqs.insert(start, end);
            }
            (Some((start, _)), None) => {
                self.seqs.insert(start, seq + 1);
            }
            (None, Some(end)) => {
                self.seqs.remove(&(seq + 1));
                self.seqs.insert(seq, end);
            }
            (None, None) => {
                self.seqs.insert(seq, seq + 1);
            }
        }
        true
    }
}

/// One row of the reconciliation.
#[derive(Debug, serde::Serialize)]
struct Row {
    window: i64,
    window_ms: u64,
    producer: String,
    host: String,
    topic: String,
    sent: Option<u64>,
    received: u64,
    lost: u64,
    duplicated: u64,
    status: &'static str,
}

/// What was read: the counts, and what the topics hold.
#[derive(Debug, Default)]
struct Ledger {
    /// The largest count of each window.
    counts: HashMap<Key, u64>,
    /// Each producer's host and window length.
    producers: HashMap<String, (String, u64)>,
    tallies: HashMap<Key, Tally>,
    /// Records of AUDIT that are not counts.
    bad_counts: u64,
    /// Records of the data topics with no stamp.
    unstamped: u64,
}

impl Ledger {
    fn count(&mut self, value: &[u8]) {
        let Ok(c) = serde_json::from_slice::<Count>(value) else {
            self.bad_counts += 1;
            return;
        };
        let key = (c.window, c.producer.clone(), c.topic);
        let best = self.counts.entry(key).or_default();
        *best = (*best).max(c.count);
        self.producers.insert(c.producer, (c.host, c.window_ms));
    }

    fn receive(&mut self, topic: &str, r: &Record<'_>) {
        let (mut producer, mut seq) = (None, None);
        for (name, value) in r.headers() {
            if name == PRODUCER_HEADER.as_bytes() {
                producer = std::str::from_utf8(value).ok();
            } else if name == SEQ_HEADER.as_bytes() {
                seq = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
        }
        let (Some(producer), Some(seq)) = (producer, seq) else {
            self.unstamped += 1;
            return;
        };
        let window_ms = self
            .producers
            .get(producer)
            .map_or(WINDOW_MS_DEFAULT, |(_, ms)| *ms);
        let key = (
            window_of(r.timestamp, window_ms),
            producer.to_string(),
            topic.to_string(),
        );
        self.tallies.entry(key).or_default().receive(seq);
    }

    /// The rows, by window, producer and topic; closed before `closed_by`
    /// (ms since the epoch, less the grace).
    fn rows(&self, closed_by: i64) -> Vec<Row> {
        let mut keys: Vec<&Key> = self.counts.keys().chain(self.tallies.keys()).collect();
        keys.sort();
        keys.dedup();
        let empty = Tally::default();
        keys.into_iter()
            .map(|key| {
                let (window, producer, topic) = key;
                let (host, window_ms) = self
                    .producers
                    .get(producer)
                    .cloned()
                    .unwrap_or_else(|| ("?".into(), WINDOW_MS_DEFAULT));
                let sent = self.counts.get(key).copied();
                let tally = self.tallies.get(key).unwrap_or(&empty);
                let lost = sent.map_or(0, |s| s.saturating_sub(tally.distinct));
                let closed = window.saturating_add(window_ms as i64) <= closed_by;
                let status = match sent {
                    _ if !closed => "open",
                    Some(s) if tally.distinct > s => "unaudited",
                    None => "unaudited",
                    Some(_) if lost > 0 => "lost",
                    Some(_) => "ok",
                };
                Row {
                    window: *window,
                    window_ms,
                    producer: producer.clone(),
                    host,
                    topic: topic.clone(),
                    sent,
                    received: tally.received,
                    lost,
                    duplicated: tally.received - tally.distinct,
                    status,
                }
            })
            .collect()
    }
}

/// Reconciles `audit_topic` against its data topics (only
/// `options.topic` when `only_topic`), windows closing `grace_ms` after
/// their end; prints the rows (a table on a terminal, JSON lines
/// otherwise) and says whether every closed window is `ok`.
pub fn run(
    options: &Options,
    audit_topic: &str,
    only_topic: bool,
    grace_ms: u64,
) -> anyhow::Result<bool> {
    let json = matches!(options.output, super::follow::Output::Json);
    let say = Say {
        quiet: options.quiet,
    };
    let from_start = |topic: &str| Options {
        topic: topic.to_string(),
        offset: OffsetSpec::Beginning,
        partitions: Vec::new(),
        ..options.clone()
    };
    let mut ledger = Ledger::default();
    read_to_end(&from_start(audit_topic), &mut |_, r| {
        ledger.count(r.value);
        Ok(())
    })
    .with_context(|| format!("cannot read the audit topic {audit_topic:?}"))?;
    let mut topics: Vec<String> = ledger.counts.keys().map(|(_, _, t)| t.clone()).collect();
    if only_topic {
        topics = vec![options.topic.clone()];
    }
    topics.sort();
    topics.dedup();
    for topic in &topics {
        let mut tallies = std::mem::take(&mut ledger);
        read_to_end(&from_start(topic), &mut |_, r| {
            tallies.receive(topic, r);
            Ok(())
        })
        .with_context(|| format!("cannot read topic {topic:?}"))?;
        ledger = tallies;
    }
    if only_topic {
        ledger.counts.retain(|(_, _, t), _| *t == options.topic);
    }
    let closed_by = crate::clock::now_ms().saturating_sub(grace_ms as i64);
    let rows = ledger.rows(closed_by);
    print(&rows, json).context("cannot write to stdout")?;
    let bad = rows.iter().filter(|r| !matches!(r.status, "ok" | "open"));
    let bad = bad.count();
    if ledger.bad_counts > 0 {
        say.info(format_args!(
            "{} of {audit_topic} are not audit counts: skipped",
            crate::human::count(ledger.bad_counts, "record")
        ));
    }
    if ledger.unstamped > 0 {
        say.info(format_args!(
            "{} carry no audit stamp (klog.producer, klog.seq): not reconciled",
            crate::human::count(ledger.unstamped, "record")
        ));
    }
    say.info(format_args!(
        "{} of {} reconciled in {}",
        rows.iter().filter(|r| r.status == "ok").count(),
        crate::human::count(rows.len() as u64, "window"),
        topics.join(", ")
    ));
    Ok(bad == 0)
}

/// Prints the rows: a table on a terminal, else (or with `json`) one
/// JSON object a line.
fn print(rows: &[Row], json: bool) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json || !stdout.is_terminal() {
        for row in rows {
            serde_json::to_writer(&mut out, row)?;
            out.write_all(b"\n")?;
        }
        return out.flush();
    }
    let header = [
        "window",
        "producer",
        "host",
        "topic",
        "sent",
        "received",
        "lost",
        "duplicated",
        "status",
    ];
    let mut table = super::table(&header);
    for r in rows {
        table.add_row([
            crate::human::format_rfc3339(r.window),
            r.producer.clone(),
            r.host.clone(),
            r.topic.clone(),
            r.sent.map_or_else(|| "-".into(), |s| s.to_string()),
            r.received.to_string(),
            r.lost.to_string(),
            r.duplicated.to_string(),
            r.status.to_string(),
        ]);
    }
    writeln!(out, "{table}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_seen_again_are_duplicates_and_ranges_merge() {
        let mut t = Tally::default();
        for seq in [5, 3, 4, 9, 3, 8, 7, 6, 9, 0] {
            t.receive(seq);
        }
        assert_eq!((t.received, t.distinct), (10, 8));
        let ranges: Vec<(u64, u64)> = t.seqs.iter().map(|(&s, &e)| (s, e)).collect();
        assert_eq!(ranges, vec![(0, 1), (3, 10)]);
    }

    fn count(producer: &str, window: i64, n: u64) -> Vec<u8> {
        let c = Count {
            producer: producer.into(),
            host: "h".into(),
            topic: "t".into(),
            window,
            window_ms: 1000,
            count: n,
        };
        serde_json::to_vec(&c).unwrap()
    }

    /// The largest count of a window wins; rows say lost, duplicated,
    /// unaudited and open as the module doc says.
    #[test]
    fn each_window_is_reconciled_by_its_largest_count() {
        let mut l = Ledger::default();
        for c in [
            count("a", 0, 2),
            count("a", 0, 3),
            count("a", 0, 1),
            count("a", 1000, 2),
        ] {
            l.count(&c);
        }
        l.count(b"not json");
        let mut receive = |producer: &str, window: i64, seqs: &[u64]| {
            for &seq in seqs {
                let key = (window, producer.to_string(), "t".to_string());
                l.tallies.entry(key).or_default().receive(seq);
            }
        };
        receive("a", 0, &[0, 1, 1, 2]);
        receive("a", 1000, &[3]);
        receive("b", 0, &[0]);
        receive("a", 5000, &[9]);
        receive("a", -1000, &[7]);
        let rows = l.rows(2000);
        type Got<'a> = (i64, &'a str, Option<u64>, u64, u64, u64, &'a str);
        let got: Vec<Got> = rows
            .iter()
            .map(|r| {
                let p = r.producer.as_str();
                (
                    r.window,
                    p,
                    r.sent,
                    r.received,
                    r.lost,
                    r.duplicated,
                    r.status,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (-1000, "a", None, 1, 0, 0, "unaudited"),
                (0, "a", Some(3), 4, 0, 1, "ok"),
                (0, "b", None, 1, 0, 0, "open"),
                (1000, "a", Some(2), 1, 1, 0, "lost"),
                (5000, "a", None, 1, 0, 0, "open"),
            ]
        );
        assert_eq!(l.bad_counts, 1);
    }
}
