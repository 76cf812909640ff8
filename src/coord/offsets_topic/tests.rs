use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::kafka::wire::put_string;
use crate::storage::batches::Batches;
use crate::storage::cleaner::OffsetMap;
use crate::storage::fs::sim::SimFs;
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::record::{BatchBuilder, Decompressed};

fn key(group: &str, topic: &str, partition: u32) -> OffsetKey {
    OffsetKey {
        group: group.into(),
        topic: topic.into(),
        partition,
    }
}

fn committed(offset: u64, generation: u64) -> Committed {
    Committed {
        offset: Some(offset),
        leader_epoch: 3,
        metadata: "m".into(),
        timestamp_ms: 1_700_000_000_123,
        generation,
        cluster: None,
    }
}

#[test]
fn keys_and_values_round_trip() {
    let k = key("gr\u{1F600}up", "orders", 7);
    assert_eq!(decode_key(&encode_key(&k)).unwrap(), Some(k));
    let c = committed(1 << 40, 9);
    let generation = encode_generation(9);
    assert_eq!(
        decode_value(&encode_value(&c), Some(&generation)).unwrap(),
        c
    );
    // Kafka's own records carry no generation: 0.
    let read = decode_value(&encode_value(&c), None).unwrap();
    assert_eq!(read.generation, 0);
}

/// Values of Kafka's older versions, laid out by hand from its schemas.
#[test]
fn older_kafka_versions_read() {
    let mut v1 = Vec::new();
    put_i16(&mut v1, 1);
    put_i64(&mut v1, 42);
    put_string(&mut v1, "meta");
    put_i64(&mut v1, 1000);
    put_i64(&mut v1, 2000); // expire timestamp
    let read = decode_value(&v1, None).unwrap();
    assert_eq!(
        (
            read.offset.unwrap(),
            read.leader_epoch,
            read.metadata.as_str(),
            read.timestamp_ms
        ),
        (42, -1, "meta", 1000)
    );
    let mut v0 = Vec::new();
    put_i16(&mut v0, 0);
    put_i64(&mut v0, 7);
    put_string(&mut v0, "");
    put_i64(&mut v0, 5);
    assert_eq!(decode_value(&v0, None).unwrap().offset, Some(7));
    // A group's metadata (key version 2) is not an offset's.
    let mut group_key = Vec::new();
    put_i16(&mut group_key, 2);
    put_string(&mut group_key, "g");
    assert_eq!(decode_key(&group_key).unwrap(), None);
}

/// Every prefix of a record, a byte too many, and bytes of any kind:
/// an error naming the topic, never a panic.
#[test]
fn hostile_bytes_are_errors() {
    let k = encode_key(&key("g", "t", 1));
    let v = encode_value(&committed(5, 1));
    for cut in 0..k.len() {
        assert!(decode_key(&k[..cut]).is_err(), "key cut at {cut}");
    }
    for cut in 0..v.len() {
        assert!(decode_value(&v[..cut], None).is_err(), "value cut at {cut}");
    }
    let mut long = v.clone();
    long.push(0);
    assert!(decode_value(&long, None).is_err());
    let mut negative = k.clone();
    let at = negative.len() - 4;
    negative[at..].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(decode_key(&negative).is_err());
    let mut offset = v.clone();
    offset[2] = 0x80;
    assert!(decode_value(&offset, None).is_err(), "a negative offset");
    offset[2..10].copy_from_slice(&(-1i64).to_be_bytes());
    assert_eq!(decode_value(&offset, None).unwrap().offset, None, "a fence");
    assert!(
        decode_value(&v, Some(&[1, 2, 3])).is_err(),
        "a short generation"
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 40) as usize;
        let bytes: Vec<u8> = (0..len).map(|i| (seed >> (i % 8 * 8)) as u8).collect();
        let _ = decode_key(&bytes);
        if let Err(e) = decode_value(&bytes, None) {
            assert!(e.to_string().starts_with(OFFSETS_TOPIC), "{e}");
        }
    }
}

/// Java's `String.hashCode`, Kafka's `Utils.abs`, 50 partitions (values
/// computed apart from this code).
#[test]
fn a_group_goes_where_kafka_puts_it() {
    for (group, partition) in [
        ("", 0),
        ("a", 47),
        ("test-group", 12),
        ("my-consumer-group-42", 36),
        ("gr\u{1F600}up", 29),
        // Its hash is i32::MIN.
        ("polygenelubricants", 0),
    ] {
        assert_eq!(partition_of(group, 50), partition, "{group:?}");
    }
    assert_eq!(partition_of("a", 1), 0);
}

#[test]
fn the_table_keeps_each_keys_latest_and_fences_older_generations() {
    let mut t = OffsetsTable::new();
    let (a, b) = (key("g", "t", 0), key("g", "t", 1));
    let gen = |g| encode_generation(g);
    for (k, offset, g) in [(&a, 5, 1), (&a, 9, 2), (&b, 3, 2)] {
        let value = encode_value(&committed(offset, g));
        let cluster = Some(&b"one"[..]);
        t.apply(&encode_key(k), Some(&value), Some(&gen(g)), cluster)
            .unwrap();
    }
    assert_eq!(t.get(&a).and_then(|c| c.offset), Some(9));
    assert_eq!(t.group("g"), [("t".into(), 0, 9), ("t".into(), 1, 3)]);
    assert_eq!(t.groups(), ["g"]);
    // A paused member's late commit, of the generation before: refused.
    assert!(matches!(
        t.check(&a, 1, Some("one")),
        Err(Error::Fenced {
            generation: 1,
            current: 2,
            ..
        })
    ));
    assert!(t.check(&a, 2, Some("one")).is_ok() && t.check(&a, 3, Some("one")).is_ok());
    assert!(t.check(&key("g", "t", 9), 0, Some("one")).is_ok());
    // Another cluster's registry (one rebuilt since) is not fenced by
    // this one's generations; a broker that does not say fences all.
    assert_eq!(t.fence(&a, Some("two")), None);
    assert!(t.check(&a, 1, Some("two")).is_ok());
    assert!(t.check(&a, 1, None).is_err());
    // A cluster header that is no id does not decode.
    let value = encode_value(&committed(1, 1));
    let bad = t.apply(&encode_key(&a), Some(&value), Some(&gen(1)), Some(b"a/b"));
    assert!(bad.is_err());
    // A tombstone deletes; a damaged record changes nothing.
    t.apply(&encode_key(&b), None, None, None).unwrap();
    assert_eq!(t.get(&b), None);
    assert!(t.apply(&encode_key(&a), Some(&[0, 3]), None, None).is_err());
    assert_eq!(t.get(&a).and_then(|c| c.offset), Some(9));
    assert_eq!(t.len(), 1);
}

/// Commits appended to a compacted log and cleaned: the log shrinks to
/// one record a key, and replayed it builds the same table as before.
#[test]
fn a_cleaned_offsets_log_replays_to_the_same_table() {
    let sim = SimFs::new();
    let dir = Path::new("/offsets");
    sim.create_dir_all_durable(dir);
    let config = LogConfig {
        segment_bytes: 4096,
        retention_ms: None,
        delete: false,
        compact: true,
        ..LogConfig::default()
    };
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut log = Log::open(Arc::new(sim.clone()), dir, config, options).unwrap();
    for round in 0..50u64 {
        let mut b = BatchBuilder::new();
        for p in 0..8u32 {
            let k = encode_key(&key("g", "t", p));
            let v = encode_value(&committed(round * 10 + u64::from(p), round));
            let g = encode_generation(round);
            let headers = [(GENERATION_HEADER.as_bytes(), g.as_slice())];
            b.push_nullable(1000, Some(&k), &headers, Some(&v));
        }
        log.append(&mut b.finish().to_vec(), 1000).unwrap();
    }
    log.roll().unwrap();
    log.flush().unwrap();
    let before = replay(&log);
    let plan = log.clean_plan(u64::MAX, 2000).unwrap().unwrap();
    let mut map = OffsetMap::with_memory(1 << 20);
    let cleaned = plan.run(&mut map, &mut |_| true).unwrap().unwrap();
    log.commit_clean(cleaned).unwrap().finish().unwrap();
    let after = replay(&log);
    assert_eq!(after.0.committed, before.0.committed);
    assert_eq!((before.1, after.1), (400, 8));
    assert_eq!(
        after.0.get(&key("g", "t", 3)).and_then(|c| c.offset),
        Some(493)
    );
}

/// The table `log`'s records build, and how many records there were.
fn replay(log: &Log) -> (OffsetsTable, usize) {
    let mut n = 0;
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    let mut scratch = Decompressed::default();
    while let Some(slice) = log.read(offset, 1 << 20).unwrap() {
        slice.read_into(&mut buf).unwrap();
        for step in Batches::new(slice.format, &buf, crate::limits::BATCH_BYTES_MAX) {
            let batch = step.unwrap().1;
            n += batch.records_in(&mut scratch, u32::MAX).unwrap().count();
            offset = batch.header.next_offset();
        }
    }
    (super::replay(log).unwrap(), n)
}
