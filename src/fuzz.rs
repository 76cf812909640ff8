//! Entry points for coverage-guided fuzzing (`fuzz/`, `cargo fuzz`) and
//! for the replay of its corpus in the tests: each takes arbitrary bytes
//! and runs one decoder a peer can reach, as the broker or a client runs
//! it. None may panic, hang or take memory out of proportion to its input;
//! what each decodes is thrown away.
//!
//! | target | decoder |
//! |---|---|
//! | `klog_request` | a klog request frame's body ([`crate::protocol::decode_request`]) |
//! | `kafka_request` | a Kafka request frame's body, every API and version ([`crate::kafka::request::decode_request`]) |
//! | `record_batch` | produced records as the broker checks them ([`crate::kafka::records::check_produce`]), a stored batch read back, and a legacy batch converted |
//! | `sasl` | the broker's side of PLAIN and SCRAM, and the client's SCRAM, fed the input as the peer's messages |
//! | `registry` | registry entries: placements, partition states, offsets, users and ACLs |
//! | `tls_handshake` | a TLS server's first flight read from the input (rustls under klog's configuration) |

use crate::net::sasl::scram::{Client, Hash};
use crate::net::sasl::{Credential, Mechanism, ServerExchange, Users};
use crate::storage::record::{legacy, Batch, Format};

/// The record size bound the targets check against.
const RECORD_BYTES_MAX: u32 = 1 << 20;

/// A klog request.
pub fn klog_request(data: &[u8]) {
    let _ = crate::protocol::decode_request(data);
}

/// A Kafka request.
pub fn kafka_request(data: &[u8]) {
    let _ = crate::kafka::request::decode_request(data);
}

/// Produced records, a stored batch, and a legacy batch.
pub fn record_batch(data: &[u8]) {
    let mut headers = Vec::new();
    let _ = crate::kafka::records::check_produce(data, (RECORD_BYTES_MAX, true), &mut headers);
    for format in [Format::Kafka, Format::Legacy] {
        if let Ok(batch) = Batch::decode(format, data, crate::limits::BATCH_BYTES_MAX) {
            let _ = batch.validate(RECORD_BYTES_MAX);
            for record in batch.records(RECORD_BYTES_MAX).take(1 << 16) {
                if record.is_err() {
                    break;
                }
            }
        }
    }
    let mut out = Vec::new();
    let _ = legacy::to_kafka(data, &mut out);
}

/// One user, `alice`, with both SCRAM credentials (made once).
struct Alice;

impl Users for Alice {
    fn credential(&self, user: &str, hash: Hash) -> Option<Credential> {
        static CREDENTIALS: std::sync::OnceLock<Vec<Credential>> = std::sync::OnceLock::new();
        let all = CREDENTIALS.get_or_init(|| {
            [Hash::Sha256, Hash::Sha512]
                .into_iter()
                .filter_map(|h| Credential::new(h, "secret", 4096).ok())
                .collect()
        });
        (user == "alice")
            .then(|| all.iter().find(|c| c.hash == hash).cloned())
            .flatten()
    }
}

/// The input's first byte picks a mechanism; the rest, split at NUL-NUL,
/// are the client's messages to the server, then the server's to a
/// SCRAM client.
pub fn sasl(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mechanism = crate::net::sasl::MECHANISMS[usize::from(pick) % 3];
    let mut server = ServerExchange::new(mechanism);
    for message in rest.split(|&b| b == 0xff).take(4) {
        if server.step(message, &Alice).is_err() {
            break;
        }
    }
    if let Some(hash) = mechanism.scram() {
        let mut client = Client::new(hash, "alice", "secret");
        let _ = client.next(b"");
        for message in rest.split(|&b| b == 0xff).take(3) {
            if !matches!(client.next(message), Ok(Some(_))) {
                break;
            }
        }
    }
    let _ = Mechanism::parse_list(&String::from_utf8_lossy(rest));
}

/// Registry entries of every kind, as the broker reads them.
pub fn registry(data: &[u8]) {
    use crate::coord::registry::{parse_offset, parse_placement, parse_state};
    let path = std::path::PathBuf::from("fuzz");
    let _ = parse_placement(path.clone(), "t", data);
    let _ = parse_state(path.clone(), data);
    let _ = parse_offset(path, data);
    let _ = serde_json::from_slice::<crate::broker::auth::UserEntry>(data);
    if let Ok(acl) = crate::coord::acl::parse(data) {
        let op = crate::coord::acl::Operation::Read;
        let topic = crate::coord::acl::ResourceType::Topic;
        let _ = crate::coord::acl::decide(&[acl], "User:alice", op, (topic, "t"));
    }
}

/// A TLS server reading the input as a client's first flight.
pub fn tls_handshake(data: &[u8]) {
    let Some(server) = fuzz_server() else {
        return;
    };
    let Ok(mut conn) = rustls::ServerConnection::new(server) else {
        return;
    };
    let mut input = data;
    while !input.is_empty() {
        match conn.read_tls(&mut input) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if conn.process_new_packets().is_err() {
                    break;
                }
            }
        }
    }
}

/// A server configuration with a throwaway self-signed certificate
/// (`fuzz/tls/`: its key protects nothing).
fn fuzz_server() -> Option<std::sync::Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    static CONFIG: std::sync::OnceLock<Option<std::sync::Arc<rustls::ServerConfig>>> =
        std::sync::OnceLock::new();
    let build = || {
        let cert = CertificateDer::from_pem_slice(include_bytes!("../fuzz/tls/server.pem")).ok()?;
        let key = PrivateKeyDer::from_pem_slice(include_bytes!("../fuzz/tls/server.key")).ok()?;
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .ok()?;
        Some(std::sync::Arc::new(config))
    };
    CONFIG.get_or_init(build).clone()
}
