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
//!   holds so far; or `expired`, a window whose records or count
//!   retention may have deleted in part (it begins before the first
//!   record kept of a partition that lost some), shown and never a
//!   failure.
//!
//! Which windows are closed is fixed before anything is read. A data
//! topic that cannot be read (not there, not mirrored here) is said, and
//! its windows hold nothing. A count that cannot be one (a window of
//! another length than its producer's, not 100 ms to a day, or not a
//! multiple of it) is said and skipped.
//! The exit status is 3 when a closed window is not `ok` (as `klog-dump
//! --verify` on damage), else 0.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};

use anyhow::Context;

use super::audit::{
    window_of, Count, PRODUCER_HEADER, SEQ_HEADER, WINDOW_MS_DEFAULT, WINDOW_MS_MAX, WINDOW_MS_MIN,
};
use super::follow::{read_to_end, Options};
use super::Say;
use crate::client::offset::OffsetSpec;
use crate::storage::record::Record;

/// One window of one producer's records of one topic: the window's
/// start, the producer's and the topic's ids ([`Ledger::id`]).
type Key = (i64, u32, u32);

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
    /// Producer and topic names, by id, and their ids.
    names: Vec<String>,
    ids: HashMap<String, u32>,
    /// The largest count of each window.
    counts: HashMap<Key, u64>,
    /// Each producer's (by id) host and window length.
    producers: HashMap<u32, (String, u64)>,
    tallies: HashMap<Key, Tally>,
    /// Records of AUDIT that are not counts.
    bad_counts: u64,
    /// Records of the data topics with no stamp.
    unstamped: u64,
    /// By topic id: the timestamp before which retention may have
    /// deleted records of it (the latest first record kept of a
    /// partition whose first offset is past 0). The audit topic's too.
    horizons: HashMap<u32, i64>,
    /// The partitions of the topic being read whose first record was seen.
    seen: std::collections::HashSet<u32>,
}

impl Ledger {
    /// The id of a producer or topic name (allocated on first sight only).
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// Notes the first record of each partition of `topic` read: one past
    /// offset 0 had records before it deleted.
    fn first(&mut self, topic: u32, partition: u32, r: &Record<'_>) {
        if self.seen.insert(partition) && r.offset > 0 {
            let horizon = self.horizons.entry(topic).or_insert(i64::MIN);
            *horizon = (*horizon).max(r.timestamp);
        }
    }

    fn count(&mut self, value: &[u8]) {
        let Ok(c) = serde_json::from_slice::<Count>(value) else {
            self.bad_counts += 1;
            return;
        };
        let producer = self.id(&c.producer);
        let known = self.producers.get(&producer).map(|(_, ms)| *ms);
        let ms = c.window_ms;
        let plausible = (WINDOW_MS_MIN..=WINDOW_MS_MAX).contains(&ms)
            && c.window.rem_euclid(ms as i64) == 0
            && known.is_none_or(|k| k == ms);
        if !plausible {
            self.bad_counts += 1;
            return;
        }
        let key = (c.window, producer, self.id(&c.topic));
        let best = self.counts.entry(key).or_default();
        *best = (*best).max(c.count);
        self.producers.insert(producer, (c.host, ms));
    }

    fn receive(&mut self, topic: u32, r: &Record<'_>) {
        let (mut producer, mut seq) = (None, None);
        for (name, value) in r.headers() {
            if name == PRODUCER_HEADER.as_bytes() {
                producer = std::str::from_utf8(value).ok();
            } else if name == SEQ_HEADER.as_bytes() {
                seq = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
        }
        let (Some(producer), Some(seq)) = (producer, seq.filter(|&s: &u64| s < u64::MAX)) else {
            self.unstamped += 1;
            return;
        };
        let producer = self.id(producer);
        let window_ms = (self.producers.get(&producer)).map_or(WINDOW_MS_DEFAULT, |(_, ms)| *ms);
        let key = (window_of(r.timestamp, window_ms), producer, topic);
        self.tallies.entry(key).or_default().receive(seq);
    }

    /// The rows, by window, producer and topic; closed before `closed_by`
    /// (ms since the epoch, less the grace); the audit topic's id.
    fn rows(&self, closed_by: i64, audit: u32) -> Vec<Row> {
        let mut keys: Vec<&Key> = self.counts.keys().chain(self.tallies.keys()).collect();
        keys.sort_by_key(|&&(w, p, t)| (w, &self.names[p as usize], &self.names[t as usize]));
        keys.dedup();
        let empty = Tally::default();
        let horizon = |t: &u32| self.horizons.get(t).copied().unwrap_or(i64::MIN);
        keys.into_iter()
            .map(|key| {
                let &(window, producer, topic) = key;
                let (host, window_ms) = (self.producers.get(&producer).cloned())
                    .unwrap_or_else(|| ("?".into(), WINDOW_MS_DEFAULT));
                let sent = self.counts.get(key).copied();
                let tally = self.tallies.get(key).unwrap_or(&empty);
                let lost = sent.map_or(0, |s| s.saturating_sub(tally.distinct));
                let closed = window.saturating_add(window_ms as i64) <= closed_by;
                let expired = window < horizon(&topic).max(horizon(&audit));
                let status = match sent {
                    _ if !closed => "open",
                    Some(s) if lost == 0 && tally.distinct <= s => "ok",
                    _ if expired => "expired",
                    Some(s) if tally.distinct > s => "unaudited",
                    None => "unaudited",
                    Some(_) => "lost",
                };
                Row {
                    window,
                    window_ms,
                    producer: self.names[producer as usize].clone(),
                    host,
                    topic: self.names[topic as usize].clone(),
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
/// otherwise) and says whether every closed window is `ok` (or
/// `expired`).
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
    // Fixed first: a window that ends while the topics are read is open.
    let closed_by = crate::clock::now_ms().saturating_sub(grace_ms as i64);
    let from_start = |topic: &str| Options {
        topic: topic.to_string(),
        offset: OffsetSpec::Beginning,
        partitions: Vec::new(),
        ..options.clone()
    };
    let mut ledger = Ledger::default();
    let audit = ledger.id(audit_topic);
    read_to_end(&from_start(audit_topic), &mut |p, r| {
        ledger.first(audit, p, r);
        ledger.count(r.value);
        Ok(())
    })
    .with_context(|| format!("cannot read the audit topic {audit_topic:?}"))?;
    let mut topics: Vec<u32> = ledger.counts.keys().map(|&(_, _, t)| t).collect();
    if only_topic {
        let only = ledger.id(&options.topic);
        topics = vec![only];
        ledger.counts.retain(|&(_, _, t), _| t == only);
    }
    topics.sort_by_key(|&t| ledger.names[t as usize].clone());
    topics.dedup();
    for &topic in &topics {
        let name = ledger.names[topic as usize].clone();
        ledger.seen.clear();
        let read = read_to_end(&from_start(&name), &mut |p, r| {
            ledger.first(topic, p, r);
            ledger.receive(topic, r);
            Ok(())
        });
        if let Err(e) = read {
            say.info(format_args!("cannot read topic {name:?}: {e:#}"));
        }
    }
    let rows = ledger.rows(closed_by, audit);
    print(&rows, json).context("cannot write to stdout")?;
    tell(&ledger, &rows, audit_topic, say);
    Ok(rows
        .iter()
        .all(|r| matches!(r.status, "ok" | "open" | "expired")))
}

/// Says what was skipped, and the outcome.
fn tell(ledger: &Ledger, rows: &[Row], audit_topic: &str, say: Say) {
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
    let ok = rows.iter().filter(|r| r.status == "ok").count();
    say.info(format_args!(
        "{ok} of {} reconciled",
        crate::human::count(rows.len() as u64, "window")
    ));
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

    fn count(producer: &str, window: i64, window_ms: u64, n: u64) -> Vec<u8> {
        let c = Count {
            producer: producer.into(),
            host: "h".into(),
            topic: "t".into(),
            window,
            window_ms,
            count: n,
        };
        serde_json::to_vec(&c).unwrap()
    }

    /// The largest count of a window wins; rows say lost, duplicated,
    /// unaudited, open and expired as the module doc says; implausible
    /// counts are skipped.
    #[test]
    fn each_window_is_reconciled_by_its_largest_count() {
        let mut l = Ledger::default();
        let audit = l.id("audit");
        for c in [
            count("a", 0, 1000, 2),
            count("a", 0, 1000, 3),
            count("a", 0, 1000, 1),
            count("a", 1000, 1000, 2),
            count("a", 2000, 500, 9),
            count("c", 0, 0, 1),
            count("d", 50, 100, 1),
            count("e", 0, 1000, 5),
        ] {
            l.count(&c);
        }
        l.count(b"not json");
        assert_eq!(l.bad_counts, 4);
        let t = l.id("t");
        let mut receive = |producer: &str, window: i64, seqs: &[u64]| {
            let key = (window, l.id(producer), t);
            for &seq in seqs {
                l.tallies.entry(key).or_default().receive(seq);
            }
        };
        receive("a", 0, &[0, 1, 1, 2]);
        receive("a", 1000, &[3]);
        receive("b", 0, &[0]);
        receive("a", 5000, &[9]);
        receive("a", -1000, &[7]);
        l.horizons.insert(t, 1);
        let rows = l.rows(2000, audit);
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
                (-1000, "a", None, 1, 0, 0, "expired"),
                (0, "a", Some(3), 4, 0, 1, "ok"),
                (0, "b", None, 1, 0, 0, "open"),
                (0, "e", Some(5), 0, 5, 0, "expired"),
                (1000, "a", Some(2), 1, 1, 0, "lost"),
                (5000, "a", None, 1, 0, 0, "open"),
            ]
        );
    }
}
