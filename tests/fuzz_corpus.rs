//! The fuzz targets of `fuzz/` (klog::fuzz) on their seed corpus, and on
//! a few seconds of mutations of it, in every test run: coverage-guided
//! runs (`bash examples/fuzz.sh`) go further, this keeps every decoder a
//! peer can reach from panicking on what they found. `KLOG_BLESS=1`
//! writes the seed corpus anew from klog's and Kafka's encoders.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::kafka::{frame, produce_v3_body};
use klog::kafka::admin;
use klog::kafka::message::Message;
use klog::protocol::{self, FetchPartition, FetchWant};
use klog::storage::record::BatchBuilder;

/// A fuzz target's entry point.
type Target = fn(&[u8]);

/// Each target: its name and its entry point.
const TARGETS: &[(&str, Target)] = &[
    ("klog_request", klog::fuzz::klog_request),
    ("kafka_request", klog::fuzz::kafka_request),
    ("record_batch", klog::fuzz::record_batch),
    ("sasl", klog::fuzz::sasl),
    ("registry", klog::fuzz::registry),
    ("tls_handshake", klog::fuzz::tls_handshake),
];

/// How long each target's mutations run in a test run.
const MUTATION_TIME: Duration = Duration::from_secs(2);

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// A frame's body: klog's and Kafka's frames start with a 4-byte length.
fn body(frame: &[u8]) -> Vec<u8> {
    frame[4..].to_vec()
}

fn batch(values: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for (i, v) in values.iter().enumerate() {
        b.push(1_700_000_000_000 + i as i64, Some(b"k"), &[(b"h", b"v")], v);
    }
    b.finish().to_vec()
}

fn klog_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut f = Vec::new();
    let records = batch(&[b"one", b"two"]);
    protocol::produce_request(&mut f, 1, -1, 1000, "t", 0, &records);
    out.push(body(&f));
    let want = FetchWant {
        wait_ms_max: 100,
        bytes_min: 1,
        response_bytes_max: 1 << 20,
    };
    let part = FetchPartition {
        topic: "t".into(),
        partition: 0,
        offset: 0,
        bytes_max: 1 << 20,
        leader_epoch: None,
    };
    protocol::fetch_request(&mut f, 2, want, std::slice::from_ref(&part));
    out.push(body(&f));
    let replica = FetchPartition {
        leader_epoch: Some(3),
        ..part
    };
    protocol::replica_fetch_request(&mut f, 3, "b1", want, &[replica]);
    out.push(body(&f));
    protocol::metadata_request(&mut f, 4, &["t", "u"]);
    out.push(body(&f));
    protocol::create_topic_request(&mut f, 5, "t", 3);
    out.push(body(&f));
    protocol::list_offsets_request(&mut f, 6, "t", 0, -2);
    out.push(body(&f));
    protocol::offsets_for_leader_epoch_request(&mut f, 7, "t", 0, Some(2), 1);
    out.push(body(&f));
    protocol::sasl_handshake_request(&mut f, 8, "SCRAM-SHA-512");
    out.push(body(&f));
    protocol::sasl_authenticate_request(&mut f, 9, b"n,,n=alice,r=abc");
    out.push(body(&f));
    out
}

fn kafka_seeds() -> Vec<Vec<u8>> {
    let string = |s: &str| {
        let mut b = (s.len() as i16).to_be_bytes().to_vec();
        b.extend_from_slice(s.as_bytes());
        b
    };
    let records = batch(&[b"a", b"b", b"c"]);
    vec![
        body(&frame(18, 0, 1, &[])),
        body(&frame(
            18,
            3,
            2,
            &[6, b'k', b'c', b'a', b't', 4, b'2', b'.', b'0', 0],
        )),
        body(&frame(3, 1, 3, &(-1i32).to_be_bytes())),
        body(&frame(3, 4, 4, &[0, 0, 0, 1, 0, 1, b't', 1])),
        body(&frame(0, 3, 5, &produce_v3_body("t", -1, 1000, &records))),
        body(&frame(17, 1, 6, &string("SCRAM-SHA-256"))),
        body(&frame(36, 1, 7, &[0, 0, 0, 5, 0, b'a', 0, b'p', b'w'])),
        body(&frame(10, 1, 8, &[string("g"), vec![0]].concat())),
        body(&frame(
            22,
            1,
            9,
            &[vec![0xff, 0xff], 60_000i32.to_be_bytes().to_vec()].concat(),
        )),
        admin_seed(30, 2, &create_acls()),
        admin_seed(31, 1, &delete_acls()),
        admin_seed(51, 0, &alter_users()),
    ]
}

/// An admin request's frame body, klog's own encoding in `version` (with
/// the request header's tags in a flexible one).
fn admin_seed<'a, M: Message<'a>>(api_key: i16, version: i16, message: &M) -> Vec<u8> {
    let mut b = Vec::new();
    if M::version(version).flexible {
        b.push(0);
    }
    message.encode(version, &mut b);
    body(&frame(api_key, version, 10, &b))
}

fn create_acls() -> admin::CreateAclsRequest<'static> {
    admin::CreateAclsRequest {
        creations: vec![admin::AclCreation {
            resource_type: admin::code::TOPIC,
            resource_name: "t",
            resource_pattern_type: admin::code::PREFIXED,
            principal: "User:a",
            host: "*",
            operation: admin::code::READ,
            permission_type: admin::code::ALLOW,
        }],
    }
}

fn delete_acls() -> admin::DeleteAclsRequest<'static> {
    admin::DeleteAclsRequest {
        filters: vec![admin::AclFilter {
            resource_type: admin::code::ANY,
            resource_name: None,
            pattern_type: admin::code::MATCH,
            principal: Some("User:a"),
            host: None,
            operation: admin::code::ANY,
            permission_type: admin::code::ANY,
        }],
    }
}

fn alter_users() -> admin::AlterUserScramCredentialsRequest<'static> {
    admin::AlterUserScramCredentialsRequest {
        deletions: vec![admin::ScramCredentialDeletion {
            name: "old",
            mechanism: 1,
        }],
        upsertions: vec![admin::ScramCredentialUpsertion {
            name: "new",
            mechanism: 2,
            iterations: 4096,
            salt: b"salt",
            salted_password: &[7; 64],
        }],
    }
}

fn sasl_seeds() -> Vec<Vec<u8>> {
    vec![
        [&[0u8][..], b"\0alice\0secret"].concat(),
        [
            &[1u8][..],
            b"n,,n=alice,r=abcdef\xffc=biws,r=abcdefXYZ,p=AAAA",
        ]
        .concat(),
        [
            &[2u8][..],
            b"n,a=alice,n=alice,r=x\xffr=xyz,s=c2FsdA==,i=4096\xffv=AAAA",
        ]
        .concat(),
    ]
}

fn registry_seeds() -> Vec<Vec<u8>> {
    vec![
        br#"{"topic":"t","replicas":[["b1","b2"],["b2","b3"]]}"#.to_vec(),
        br#"{"leader":"b1","leader_epoch":3,"isr":["b1","b2"],"high_watermark":10}"#.to_vec(),
        b"42".to_vec(),
        br#"{"credentials":[{"hash":"SCRAM-SHA-256","salt":"c2FsdA==","iterations":4096,"stored_key":"AA==","server_key":"AA=="}]}"#.to_vec(),
        br#"{"pattern":{"resource":"topic","name":"t","pattern":"literal"},"rules":[{"principal":"User:alice","operation":"read","permission":"allow"}]}"#.to_vec(),
    ]
}

/// A TLS client's first flight (its ClientHello), as rustls writes it.
fn tls_seeds() -> Vec<Vec<u8>> {
    let roots = rustls::RootCertStore::empty();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    vec![hello, b"\x16\x03\x01\x00\x05hello".to_vec()]
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "klog_request" => klog_seeds(),
        "kafka_request" => kafka_seeds(),
        "record_batch" => vec![batch(&[b"x"]), batch(&[b"one", b"two", b"three"])],
        "sasl" => sasl_seeds(),
        "registry" => registry_seeds(),
        "tls_handshake" => tls_seeds(),
        _ => unreachable!(),
    }
}

/// The corpus of a target: its files (written first with `KLOG_BLESS`).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    if std::env::var_os("KLOG_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (i, seed) in seeds(target).into_iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (KLOG_BLESS=1 writes it)", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// xorshift64*, seeded: the mutations are the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `input`: flipped bits, bytes set to edge values,
/// cuts, duplicated runs, or a splice with another input.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len());
        match rng.below(6) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[at] = [0, 0x7f, 0x80, 0xff][rng.below(4)],
            2 => out.truncate(at),
            3 if !out.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                let run = out[at..end].to_vec();
                out.splice(at..at, run);
            }
            4 => out
                .splice(at..at, other.iter().copied().take(rng.below(64)))
                .for_each(drop),
            _ if at + 4 <= out.len() => {
                let edge = [0u32, 1, 0x7fff_ffff, 0xffff_ffff][rng.below(4)];
                out[at..at + 4].copy_from_slice(&edge.to_be_bytes());
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_target_takes_its_corpus_and_its_mutations_without_a_panic() {
    for &(name, target) in TARGETS {
        let inputs = corpus(name);
        assert!(!inputs.is_empty(), "{name}: an empty corpus");
        for input in &inputs {
            target(input);
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        let started = Instant::now();
        let mut runs = 0u64;
        while started.elapsed() < MUTATION_TIME {
            let a = &inputs[rng.below(inputs.len())];
            let b = &inputs[rng.below(inputs.len())];
            target(&mutate(&mut rng, a, b));
            runs += 1;
        }
        eprintln!("{name}: {} inputs, {runs} mutations", inputs.len());
    }
}
