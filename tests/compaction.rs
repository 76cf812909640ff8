//! Compacted topics through a broker (issue 28): `--log-cleanup-policy
//! compact` keeps each key's latest record, read back by klog-consume and
//! kcat with the offsets the records were given.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{kcat_path, Kcat};
use common::{consume_from, eventually, produce_to, BrokerProc};

const BOUND: Duration = Duration::from_secs(60);

/// `rounds` updates of each of `keys` keys, as `key:value` lines.
fn updates(rounds: u32, keys: u32) -> String {
    let mut input = String::new();
    for round in 0..rounds {
        for k in 0..keys {
            input += &format!("key{k}:value{k}-{round}\n");
        }
    }
    input
}

/// The table `offset key value` lines build, checking that offsets
/// increase; and how many lines there were.
fn table(out: &str) -> (BTreeMap<String, String>, usize) {
    let mut table = BTreeMap::new();
    let mut last = None;
    let mut n = 0;
    for line in out.lines() {
        let mut fields = line.splitn(3, ' ');
        let offset: u64 = fields.next().unwrap().parse().unwrap();
        assert!(last.is_none_or(|l| l < offset), "offsets increase: {line}");
        last = Some(offset);
        table.insert(
            fields.next().unwrap().to_string(),
            fields.next().unwrap().to_string(),
        );
        n += 1;
    }
    (table, n)
}

/// A broker compacting every topic, with segments of `segment_bytes`,
/// cleaning as soon as a hundredth of a log is dirty; and `extra` flags.
fn compacting_broker(dir: &Path, segment_bytes: &str, extra: &[&str]) -> BrokerProc {
    let mut args = vec![
        "--log-cleanup-policy",
        "compact",
        "--segment-bytes",
        segment_bytes,
        "--log-cleaner-backoff",
        "100ms",
        "--log-cleaner-min-cleanable-ratio",
        "0.01",
    ];
    args.extend_from_slice(extra);
    BrokerProc::start(dir, &args)
}

/// `topic` read from the files of the data directory `dir` (no broker),
/// as `offset key value` lines.
fn consume_files(dir: &Path, topic: &str) -> String {
    let data = dir.to_str().unwrap();
    let out = common::bin("klog-consume")
        .args([
            "--data-dir",
            data,
            "-t",
            topic,
            "-e",
            "-q",
            "-f",
            "%o %k %s\n",
        ])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout).to_string()
}

#[test]
fn a_compacted_topic_is_read_back_as_the_latest_table_with_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = compacting_broker(dir.path(), "16KiB", &["--kafka-listen", "127.0.0.1:0"]);
    let (rounds, keys) = (30, 100);
    let input = updates(rounds, keys);
    produce_to(&broker.addr, "cdc", &input, &["-K", ":", "--batch", "7"]);
    // One producer, one partition: line N of the input is offset N (a
    // read now could race the first cleans).
    let before: String = (input.lines().enumerate())
        .map(|(o, l)| format!("{o} {}\n", l.replacen(':', " ", 1)))
        .collect();
    let (expected, all) = table(&before);
    assert_eq!(
        (expected.len(), all),
        (keys as usize, (rounds * keys) as usize)
    );
    // Cleans follow one another until the closed segments hold one
    // record a key.
    let mut after = String::new();
    eventually("the topic compacted", Duration::from_secs(60), || {
        after = consume_from(&broker.addr, "cdc", &["-f", "%o %k %s\n"]);
        table(&after).1 < all / 2
    });
    let (table_after, kept) = table(&after);
    assert_eq!(table_after, expected);
    // Read from the files too, as the broker writes them: the same.
    assert_eq!(table(&consume_files(dir.path(), "cdc")).0, expected);
    // Each record kept is the one at its offset before.
    let before_lines: std::collections::HashSet<&str> = before.lines().collect();
    assert!(after.lines().all(|l| before_lines.contains(l)));
    // The last offset stays the last: nothing after the clean reuses one.
    produce_to(&broker.addr, "cdc", "key0:new\n", &["-K", ":"]);
    let tail = consume_from(&broker.addr, "cdc", &["-f", "%o %k %s\n", "-o", "-1"]);
    assert_eq!(tail, format!("{} key0 new\n", rounds * keys));
    // A cleaned partition verifies whole, and recovery finds nothing to
    // cut, while the broker runs and after it stops.
    let partition = dir.path().join("cdc-0");
    let verify = || {
        common::bin("klog-dump")
            .args(["--verify", partition.to_str().unwrap()])
            .assert()
            .success();
    };
    verify();
    let dump = common::bin("klog-dump").arg(&partition).assert().success();
    let dump = String::from_utf8_lossy(&dump.get_output().stdout).to_string();
    assert!(
        dump.contains("Cleaned (compacted): offsets up to"),
        "{dump}"
    );
    // Kafka's clients read the gaps the same.
    if let Some(kcat) = kcat_path() {
        let out = Kcat::at(&kcat, &broker.kafka_addr()).consume("cdc", &["-f", "%o %k %s\n"]);
        // (The cleaner may have cleaned more since.)
        let (kcat_table, n) = table(&out);
        assert!(n <= kept + 1, "{n} records, {kept} before");
        assert!(out
            .lines()
            .all(|l| before_lines.contains(l) || l.ends_with(" key0 new")));
        let mut expected = expected.clone();
        expected.insert("key0".into(), "new".into());
        assert_eq!(kcat_table, expected);
    }
    let mut broker = broker;
    assert!(broker.terminate().success());
    verify();
    let recover = common::bin("klog-recover")
        .args(["--dry-run", "--full", partition.to_str().unwrap()])
        .assert()
        .success();
    let said = String::from_utf8_lossy(&recover.get_output().stdout).to_string();
    assert!(!said.contains("cut"), "{said}");
    // A restart reads the same table.
    let broker = BrokerProc::start(dir.path(), &["--log-cleanup-policy", "compact"]);
    let (again, _) = table(&consume_from(&broker.addr, "cdc", &["-f", "%o %k %s\n"]));
    assert_eq!(again.get("key0").map(String::as_str), Some("new"));
    assert_eq!(again.len(), keys as usize);
}

#[test]
fn a_tombstone_deletes_its_key_and_then_goes_itself() {
    let dir = tempfile::tempdir().unwrap();
    let retention = ["--log-cleaner-delete-retention", "1s"];
    let broker = compacting_broker(dir.path(), "8KiB", &retention);
    produce_to(&broker.addr, "t", &updates(10, 50), &["-K", ":"]);
    // key3 deleted, with kcat's -Z: an empty value is null.
    produce_to(&broker.addr, "t", "key3:\n", &["-K", ":", "-Z"]);
    // More updates, so that the tombstone's segment closes.
    produce_to(
        &broker.addr,
        "t",
        &updates(10, 50).replace("key3:", "other3:"),
        &["-K", ":"],
    );
    let read = || consume_from(&broker.addr, "t", &["-Z", "-f", "%o %k %s %S\n"]);
    let out = read();
    assert!(
        out.contains(" key3 NULL -1\n"),
        "the tombstone reads as null: {out}"
    );
    // The tombstone goes, with key3's values, at a clean once its segment
    // is older than the delete retention (cleans follow new writes).
    let more = updates(10, 50).replace("key3:", "other3:");
    eventually(
        "key3 gone, tombstone and all",
        Duration::from_secs(60),
        || {
            produce_to(&broker.addr, "t", &more, &["-K", ":"]);
            !read().contains(" key3 ")
        },
    );
    let (table, _) = table(
        &read()
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string() + "\n")
            .collect::<String>(),
    );
    assert_eq!(table.len(), 50, "every key but key3, and other3");
    assert_eq!(table.get("key4").map(String::as_str), Some("value4-9"));
    assert_eq!(table.get("other3").map(String::as_str), Some("value3-9"));
}

#[test]
fn a_compacted_topic_refuses_a_record_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(
        dir.path(),
        &[
            "--log-cleanup-policy",
            "compact",
            "--kafka-listen",
            "127.0.0.1:0",
        ],
    );
    let refused = common::bin("klog-produce")
        .args(["-b", &broker.addr, "-t", "k", "--message-timeout", "5s"])
        .write_stdin("no key\n")
        .assert()
        .failure();
    let said = String::from_utf8_lossy(&refused.get_output().stderr).to_string();
    assert!(said.contains("without a key"), "{said}");
    produce_to(&broker.addr, "k", "a:1\n", &["-K", ":"]);
    if let Some(kcat) = kcat_path() {
        let kcat = Kcat::at(&kcat, &broker.kafka_addr());
        let out = kcat.run(
            &["-P", "-t", "k", "-X", "message.timeout.ms=5000"],
            b"no key\n",
        );
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            said.contains("failed to validate record"),
            "INVALID_RECORD: {said}"
        );
        kcat.produce("k", b"b:2\n", &["-K", ":"]);
    }
    let out = consume_from(&broker.addr, "k", &["-f", "%k=%s\n"]);
    let expected = if kcat_path().is_some() {
        "a=1\nb=2\n"
    } else {
        "a=1\n"
    };
    assert_eq!(out, expected);
}

#[test]
fn a_reader_of_the_files_crosses_the_gaps_a_clean_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let broker = compacting_broker(dir.path(), "8KiB", &[]);
    // A key written once, then one hot key over many segments: the first
    // segment keeps the first record only, then a gap to the next.
    let hot: String = (0..6000).map(|i| format!("hot:{i}\n")).collect();
    let input = format!("stable:s\n{hot}");
    produce_to(&broker.addr, "g", &input, &["-K", ":", "--batch", "10"]);
    eventually("the topic compacted", Duration::from_secs(60), || {
        consume_from(&broker.addr, "g", &[]).lines().count() < 2000
    });
    let through_broker = consume_from(&broker.addr, "g", &["-f", "%o %k %s\n"]);
    let files = consume_files(dir.path(), "g");
    assert!(files.starts_with("0 stable s\n"), "{files}");
    // The same records, or fewer: the cleaner may have cleaned again since.
    let seen: std::collections::HashSet<&str> = through_broker.lines().collect();
    assert!(files.lines().all(|l| seen.contains(l)), "{files}");
    assert_eq!(files.lines().last(), Some("6000 hot 5999"));
}

#[test]
fn a_damaged_partition_does_not_keep_the_cleaner_from_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let threads = |n| ["--log-cleaner-threads", n];
    let mut broker = compacting_broker(dir.path(), "8KiB", &threads("0"));
    produce_to(
        &broker.addr,
        "x",
        &updates(30, 100),
        &["-K", ":", "--batch", "7"],
    );
    assert!(broker.terminate().success());
    // A bit flipped in a record of x's first segment: its CRC fails.
    let segment = dir.path().join("x-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[300] ^= 0x40;
    std::fs::write(&segment, bytes).unwrap();
    let broker = compacting_broker(dir.path(), "8KiB", &threads("1"));
    produce_to(
        &broker.addr,
        "y",
        &updates(30, 100),
        &["-K", ":", "--batch", "7"],
    );
    eventually("y compacted", Duration::from_secs(60), || {
        consume_from(&broker.addr, "y", &[]).lines().count() < 1500
    });
    std::thread::sleep(Duration::from_secs(1));
    let failures = broker
        .log()
        .iter()
        .filter(|l| l.contains("x-0: clean failed"))
        .count();
    assert_eq!(failures, 1, "{:?}", broker.log());
}

/// A replicated compacted topic (three replicas): each replica cleans its
/// own log; a follower stopped while the leader cleaned copies the
/// cleaned log, gaps and all, ends where the leader ends and is back in
/// the ISR; killed, the leader hands over to a follower that serves the
/// same table; every replica's files hold it.
#[test]
fn the_replicas_of_a_compacted_topic_clean_apart_and_fail_over_to_the_same_table() {
    let extra = [
        "--log-cleanup-policy",
        "compact",
        "--segment-bytes",
        "16KiB",
        "--log-cleaner-backoff",
        "100ms",
        "--log-cleaner-min-cleanable-ratio",
        "0.01",
    ];
    let mut cluster = Cluster::three_fast(&extra);
    let produce = |cluster: &Cluster, input: &str| {
        common::bin("klog-produce")
            .args(["--registry", cluster.spec(), "-t", "cdc", "-q", "-K", ":"])
            .args(["--acks", "all", "--batch", "7"])
            .write_stdin(input.to_string())
            .timeout(BOUND)
            .assert()
            .success();
    };
    produce(&cluster, "key0:first\n");
    cluster.wait_full_isr("cdc", 0, BOUND);
    let state = cluster.wait_leader("cdc", 0, BOUND);
    let leads = cluster.slot_of(state.leader.as_deref().unwrap());
    let behind = (leads + 1) % 3;
    cluster.terminate(behind);
    let (rounds, keys) = (30, 100);
    let input = updates(rounds, keys);
    produce(&cluster, &input);
    let all = format!("0 key0 first\n{}", numbered(&input, 1));
    let (expected, written) = table(&all);
    // The leader cleans while the follower is away.
    let leader_dir = cluster.data_dir(leads).to_path_buf();
    eventually("the leader cleaned", BOUND, || {
        table(&consume_files(&leader_dir, "cdc")).1 < written / 2
    });
    cluster.restart(behind);
    cluster.wait_full_isr("cdc", 0, BOUND);
    let replicas = cluster.wait_same_end("cdc", 0, BOUND);
    let end = replicas[leads].end();
    assert_eq!(end, written as u64);
    assert!(
        copied_gaps(&cluster.data_dir(behind).join("cdc-0")),
        "the follower that came back copied the leader's gaps"
    );
    // Every replica (the one that came back copied gaps) holds the table,
    // each record the one at its offset before.
    let lines: std::collections::HashSet<&str> = all.lines().collect();
    eventually("every replica compacted", BOUND, || {
        (0..3).all(|slot| {
            let files = consume_files(cluster.data_dir(slot), "cdc");
            let (t, n) = table(&files);
            assert_eq!(t, expected, "replica {slot}");
            assert!(files.lines().all(|l| lines.contains(l)), "replica {slot}");
            n < written / 2
        })
    });
    // The leader killed, a follower leads and serves the same table, and
    // takes new records after the last offset.
    cluster.kill9(leads);
    let new = cluster.wait_new_epoch("cdc", 0, state.epoch, None, BOUND);
    let now_leads = cluster.slot_of(new.leader.as_deref().unwrap());
    produce(&cluster, "key1:after\n");
    let out = consume_from(&cluster.addr(now_leads), "cdc", &["-f", "%o %k %s\n"]);
    let (t, _) = table(&out);
    let mut expected = expected;
    expected.insert("key1".into(), "after".into());
    assert_eq!(t, expected);
    assert!(out.ends_with(&format!("{end} key1 after\n")), "{out}");
}

/// `input`'s `key:value` lines as `offset key value` lines, from `first`.
fn numbered(input: &str, first: usize) -> String {
    (input.lines().enumerate())
        .map(|(o, l)| format!("{} {}\n", o + first, l.replacen(':', " ", 1)))
        .collect()
}

/// Whether a segment of the partition in `dir` is a follower's copy with
/// gaps (version 3, flag 2).
fn copied_gaps(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let path = e.unwrap().path();
        let is_log = path.extension().is_some_and(|x| x == "log");
        let head = std::fs::read(&path).unwrap_or_default();
        is_log
            && klog::storage::segment::read_header(&head).is_ok_and(|h| h.gaps && h.end.is_none())
    })
}

/// A broker killed (SIGKILL) in the middle of a clean: its cleaned files
/// are half written; restarted, it removes them, serves the same table,
/// verifies whole, and cleans again.
#[test]
fn a_broker_killed_mid_clean_restarts_clean() {
    let dir = tempfile::tempdir().unwrap();
    // Slow cleans: 64 KiB a second, so that one is under way for seconds.
    let slow = ["--log-cleaner-io-bytes-per-second", "64KiB"];
    let mut broker = compacting_broker(dir.path(), "16KiB", &slow);
    let (rounds, keys) = (40, 100);
    let input = updates(rounds, keys);
    produce_to(&broker.addr, "cdc", &input, &["-K", ":", "--batch", "7"]);
    let (expected, written) = table(&numbered(&input, 0));
    let partition = dir.path().join("cdc-0");
    let cleaning = || {
        std::fs::read_dir(&partition).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".cleaned.")
        })
    };
    eventually("a clean under way", BOUND, cleaning);
    broker.kill9();
    assert!(cleaning(), "the kill left the clean's files");
    // Restarted first with no cleaner, to look at what the open left.
    let mut broker = compacting_broker(dir.path(), "16KiB", &["--log-cleaner-threads", "0"]);
    let (t, _) = table(&consume_from(&broker.addr, "cdc", &["-f", "%o %k %s\n"]));
    assert_eq!(t, expected);
    assert!(!cleaning(), "the clean's files went at the open");
    common::bin("klog-dump")
        .args(["--verify", partition.to_str().unwrap()])
        .assert()
        .success();
    assert!(broker.terminate().success());
    let broker = compacting_broker(dir.path(), "16KiB", &[]);
    eventually("cleaned after the restart", BOUND, || {
        table(&consume_from(&broker.addr, "cdc", &["-f", "%o %k %s\n"])).1 < written / 2
    });
}
