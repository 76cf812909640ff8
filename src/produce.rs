//! Producing: turning input bytes into records, choosing partitions, and
//! appending batches, here to a local data directory (embedded mode).
//!
//! Input is split into records at a delimiter (default `\n`; a final
//! record without one counts too). Each record may be split into key and
//! value at the first key delimiter (`-K`), or parsed as the JSON envelope
//! that `klog-consume -J` prints (`-J`). A line that cannot be parsed is an
//! error naming its record number, and nothing after it is sent.
//!
//! # Partitioner
//!
//! With a key, the partition is `(murmur2(key) & 0x7fffffff) % partitions`,
//! Kafka's default partitioner (murmur2 with seed `0x9747b28c`), so a key
//! lands in the partition a Kafka client would choose. Without a key,
//! records go round-robin. A fixed partition (`-p`) overrides both.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::log::{Log, LogConfig, OpenOptions};
use crate::record::BatchBuilder;
use crate::store::Store;

/// Kafka's murmur2 hash (the Java client's `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const SEED: u32 = 0x9747_b28c;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// Chooses partitions: by key hash, else round-robin, unless fixed.
#[derive(Debug, Clone)]
pub struct Partitioner {
    partitions: u32,
    fixed: Option<u32>,
    next: u32,
}

impl Partitioner {
    /// A partitioner over `partitions` partitions, or always `fixed`.
    pub fn new(partitions: u32, fixed: Option<u32>) -> Partitioner {
        assert!(partitions > 0, "a topic has partitions");
        Partitioner {
            partitions,
            fixed,
            next: 0,
        }
    }

    /// The partition of a record with this key.
    pub fn partition(&mut self, key: Option<&[u8]>) -> u32 {
        if let Some(p) = self.fixed {
            return p;
        }
        match key {
            Some(key) => (murmur2(key) & 0x7fff_ffff) % self.partitions,
            None => {
                let p = self.next;
                self.next = (self.next + 1) % self.partitions;
                p
            }
        }
    }
}

/// Splits a byte stream into records at a delimiter, through one buffer.
#[derive(Debug)]
pub struct RecordSplitter<R> {
    input: R,
    delimiter: Vec<u8>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    record_max: usize,
    /// Number of the record last returned, from 1.
    pub number: u64,
}

const READ_CHUNK_BYTES: usize = 1 << 20;

impl<R: Read> RecordSplitter<R> {
    /// Splits `input` at `delimiter`; a record longer than `record_max` is
    /// an error (so memory stays bounded whatever the input).
    pub fn new(input: R, delimiter: Vec<u8>, record_max: usize) -> Self {
        assert!(!delimiter.is_empty());
        RecordSplitter {
            input,
            delimiter,
            buf: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
            eof: false,
            record_max,
            number: 0,
        }
    }

    fn find(&self, from: usize) -> Option<usize> {
        let hay = &self.buf[from..self.end];
        let d = &self.delimiter;
        if d.len() == 1 {
            return hay.iter().position(|&b| b == d[0]).map(|i| from + i);
        }
        hay.windows(d.len()).position(|w| w == d.as_slice()).map(|i| from + i)
    }

    /// The next record, or `None` at the end of the input.
    pub fn next_record(&mut self) -> io::Result<Option<&[u8]>> {
        let mut searched = self.start;
        loop {
            if let Some(at) = self.find(searched) {
                let record = self.start..at;
                self.start = at + self.delimiter.len();
                self.number += 1;
                return Ok(Some(&self.buf[record]));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let record = self.start..self.end;
                self.start = self.end;
                self.number += 1;
                return Ok(Some(&self.buf[record]));
            }
            let pending = self.end - self.start;
            if pending > self.record_max + self.delimiter.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("record {} is longer than {} bytes", self.number + 1, self.record_max),
                ));
            }
            searched = (self.end - self.start).saturating_sub(self.delimiter.len() - 1);
            // Move the partial record to the front, grow if it fills the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end = pending;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = match self.input.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.eof = n == 0;
            self.end += n;
        }
    }
}

/// A record parsed from input, borrowing from it where it can.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParsedRecord {
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
    /// Headers of this record (besides the fixed `-H` ones).
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Its own timestamp (`-J` envelopes), else the time of sending.
    pub timestamp: Option<i64>,
}

/// Parses one JSON envelope as `klog-consume -J` prints it.
pub fn parse_envelope(line: &[u8]) -> std::result::Result<ParsedRecord, String> {
    let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
    let obj = v.as_object().ok_or("a JSON envelope must be an object")?;
    // A field's encoding: its text itself, or base64 (`<field>_encoding`).
    let base64 = |field: &str| -> std::result::Result<bool, String> {
        match obj.get(&format!("{field}_encoding")) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(serde_json::Value::String(s)) if s == "base64" => Ok(true),
            Some(other) => Err(format!("\"{field}_encoding\" is {other}, not \"base64\"")),
        }
    };
    let decode = |field: &str, s: &str, b64: bool| -> std::result::Result<Vec<u8>, String> {
        if b64 {
            crate::b64::decode(s).map_err(|e| format!("\"{field}\": {e}"))
        } else {
            Ok(s.as_bytes().to_vec())
        }
    };
    let bytes = |field: &str| -> std::result::Result<Option<Vec<u8>>, String> {
        match obj.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => decode(field, s, base64(field)?).map(Some),
            Some(_) => Err(format!("\"{field}\" must be a string or null")),
        }
    };
    let headers_b64 = base64("headers")?;
    let mut headers = Vec::new();
    match obj.get("headers") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(items)) => {
            if items.len() % 2 != 0 {
                return Err("\"headers\" must list name, value pairs".into());
            }
            for pair in items.chunks(2) {
                let (Some(n), Some(v)) = (pair[0].as_str(), pair[1].as_str()) else {
                    return Err("header names and values must be strings".into());
                };
                headers.push((decode("headers", n, headers_b64)?, decode("headers", v, headers_b64)?));
            }
        }
        Some(_) => return Err("\"headers\" must be an array".into()),
    }
    let timestamp = match obj.get("ts") {
        None | Some(serde_json::Value::Null) => None,
        Some(t) => Some(t.as_i64().ok_or("\"ts\" must be an integer (ms since the epoch)")?),
    };
    Ok(ParsedRecord {
        key: bytes("key")?,
        value: bytes("payload")?.unwrap_or_default(),
        headers,
        timestamp,
    })
}

/// How input lines become records.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// Split key and value at the first occurrence of this.
    pub key_delimiter: Option<Vec<u8>>,
    /// A fixed key for every record.
    pub key: Option<Vec<u8>>,
    /// Input lines are JSON envelopes.
    pub json: bool,
}

/// Parses one input record into key, value and headers.
pub fn parse_record(raw: &[u8], options: &ParseOptions, out: &mut ParsedRecord) -> std::result::Result<(), String> {
    if options.json {
        *out = parse_envelope(raw)?;
        return Ok(());
    }
    out.headers.clear();
    out.timestamp = None;
    out.value.clear();
    if let Some(d) = &options.key_delimiter {
        let at = raw
            .windows(d.len())
            .position(|w| w == d.as_slice())
            .ok_or_else(|| format!("no key delimiter {:?} in the record", String::from_utf8_lossy(d)))?;
        out.key = Some(raw[..at].to_vec());
        out.value.extend_from_slice(&raw[at + d.len()..]);
    } else {
        out.key.clone_from(&options.key);
        out.value.extend_from_slice(raw);
    }
    Ok(())
}

/// How to batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Records per batch at most.
    pub records_max: u32,
    /// Bytes per batch at most (a single larger record still goes alone).
    pub bytes_max: usize,
}

/// What a produce run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceSummary {
    /// Records appended.
    pub delivered: u64,
    /// Records read but not appended.
    pub failed: u64,
}

/// Appends records to the partitions of one topic of a local data
/// directory, one batch builder per partition.
#[derive(Debug)]
pub struct EmbeddedProducer {
    store: Store,
    topic: String,
    config: LogConfig,
    logs: Vec<Option<Log>>,
    builders: Vec<BatchBuilder>,
    batch: BatchOptions,
    /// Records appended so far.
    pub delivered: u64,
}

/// A record's headers: (name, value) pairs; borrowed when they are just
/// the fixed ones (no allocation per record).
pub type Headers<'a, 'h> = std::borrow::Cow<'h, [(&'a [u8], &'a [u8])]>;

/// A record checked for a partition of a topic of `count` partitions:
/// its headers (the fixed ones first) and its encoded size, or why it
/// cannot go (no such partition, or larger than `record_bytes_max`).
pub fn check_record<'a, 'h>(
    topic: &str,
    partition: u32,
    count: u32,
    record: &'a ParsedRecord,
    fixed_headers: &'h [(&'a [u8], &'a [u8])],
    record_bytes_max: u32,
) -> Result<(Headers<'a, 'h>, usize)> {
    if partition >= count {
        return Err(Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count,
        });
    }
    let headers: Headers<'a, 'h> = if record.headers.is_empty() {
        std::borrow::Cow::Borrowed(fixed_headers)
    } else {
        let own = record.headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice()));
        std::borrow::Cow::Owned(fixed_headers.iter().copied().chain(own).collect())
    };
    let size = BatchBuilder::record_size(record.key.as_deref(), &headers, &record.value);
    if size > record_bytes_max as usize {
        return Err(Error::TooLarge {
            what: "record",
            size: size as u64,
            limit: u64::from(record_bytes_max),
        });
    }
    Ok((headers, size))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl EmbeddedProducer {
    /// Opens (creating with `partitions` if absent) `topic` in `store`.
    pub fn new(store: Store, topic: &str, partitions: u32, config: LogConfig, batch: BatchOptions) -> Result<Self> {
        let count = store.create_topic(topic, partitions)?;
        Ok(EmbeddedProducer {
            store,
            topic: topic.to_string(),
            config,
            logs: (0..count).map(|_| None).collect(),
            builders: vec![BatchBuilder::new(); count as usize],
            batch,
            delivered: 0,
        })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.logs.len() as u32
    }

    /// Adds a record to its partition's batch, appending the batch when full.
    pub fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        fixed_headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        let (headers, size) = check_record(
            &self.topic,
            partition,
            self.partitions(),
            record,
            fixed_headers,
            self.config.record_bytes_max,
        )?;
        let p = partition as usize;
        let ts = record.timestamp.unwrap_or(now);
        let builder = &self.builders[p];
        let full = builder.size_bytes() + size > self.batch.bytes_max;
        if !builder.is_empty() && (full || !builder.accepts_timestamp(ts)) {
            self.flush_partition(partition, now)?;
        }
        self.builders[p].push(ts, record.key.as_deref(), &headers, &record.value);
        if self.builders[p].len() >= self.batch.records_max {
            self.flush_partition(partition, now)?;
        }
        Ok(())
    }

    fn flush_partition(&mut self, partition: u32, now: i64) -> Result<()> {
        let p = partition as usize;
        if self.builders[p].is_empty() {
            return Ok(());
        }
        if self.logs[p].is_none() {
            let options = OpenOptions {
                writable: true,
                lock: true,
            };
            self.logs[p] = Some(
                self.store
                    .open_log(&self.topic, partition, self.config.clone(), options)?,
            );
        }
        let log = self.logs[p].as_mut().expect("opened");
        let info = log.append(self.builders[p].finish(), now)?;
        self.builders[p].clear();
        self.delivered += u64::from(info.record_count);
        log.maybe_flush(now)?;
        Ok(())
    }

    /// Appends every partial batch (the linger time has passed).
    pub fn flush_pending(&mut self, now: i64) -> Result<()> {
        for p in 0..self.partitions() {
            self.flush_partition(p, now)?;
        }
        Ok(())
    }

    /// Records waiting in batches.
    pub fn pending(&self) -> u64 {
        self.builders.iter().map(|b| u64::from(b.len())).sum()
    }

    /// Appends every partial batch, then flushes and closes every log.
    pub fn close(mut self) -> Result<u64> {
        self.flush_pending(now_ms())?;
        for log in self.logs.into_iter().flatten() {
            log.close()?;
        }
        Ok(self.delivered)
    }
}

/// Set by a signal handler to ask long loops to stop.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Whether a stop was asked for.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka() {
        // Vectors from Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 5] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input) as i32, expected, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn splitter_handles_multibyte_delimiters_across_reads() {
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(3);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut s = RecordSplitter::new(Slow(b"ab::cd::::e"), b"::".to_vec(), 100);
        let mut out = Vec::new();
        while let Some(r) = s.next_record().unwrap() {
            out.push(r.to_vec());
        }
        assert_eq!(out, vec![b"ab".to_vec(), b"cd".to_vec(), b"".to_vec(), b"e".to_vec()]);
    }

    #[test]
    fn splitter_bounds_memory() {
        let input = vec![b'x'; 10_000];
        let mut s = RecordSplitter::new(&input[..], b"\n".to_vec(), 100);
        assert!(s.next_record().is_err());
    }

    #[test]
    fn envelopes() {
        let r = parse_envelope(br#"{"key":"k","payload":"v","ts":5,"headers":["a","b"]}"#).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value, b"v");
        assert_eq!(r.timestamp, Some(5));
        assert_eq!(r.headers, vec![(b"a".to_vec(), b"b".to_vec())]);
        assert!(parse_envelope(b"{").is_err());
        assert!(parse_envelope(br#"{"headers":["a"]}"#).is_err());
        assert!(parse_envelope(br#"[1]"#).is_err());
    }
}
