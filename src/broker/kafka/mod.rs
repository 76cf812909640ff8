//! The Kafka listener (`--kafka-listen`): Kafka's own clients (kcat,
//! librdkafka, kafka-python, …) produce to and fetch from the same logs,
//! and consume in the same groups, as klog's tools.
//!
//! # Threads
//!
//! ```text
//! accept (kafka-accept) ──▶ per connection: one thread, requests in order
//!                              │ produce: Kafka batches checked, appended as sent
//!                              │          (acks=-1 waits for the flusher, acks=1 for the file)
//!                              │ fetch:   the segment's bytes, sent with sendfile
//!                              ▼ groups:  the coordinator (registry: Algorithm 1, claims, offsets)
//! ```
//!
//! A connection's requests are handled in order, and answered in order,
//! as Kafka's own broker does: a fetch waiting for records, or a group
//! join waiting for its rebalance, holds up that connection alone.
//! Produces are the exception that keeps a pipelining producer fast: the
//! produce requests read together (those already buffered, up to 64) are
//! appended one after the other, then answered together, in order, so
//! that their appends share the flusher's next fsync; any other request
//! is handled only after the answers before it left.
//! Frames have big-endian lengths; the native listener's bounds hold:
//! `--max-request-bytes`, `--max-connections` (both listeners together),
//! the request memory budget, `--request-timeout` for a frame begun and
//! for any wait a client asks for, `--idle-timeout` between requests.
//!
//! # Records
//!
//! The log stores Kafka's RecordBatch v2 as sent: a produce's batches are
//! checked, all of a partition's before any is appended
//! ([`crate::kafka::records`]), and appended as they are, the log writing
//! only their offsets and epoch. A fetch's records are the segment's byte
//! range, sent from the file with `sendfile` after the answer's other
//! bytes ([`crate::broker::send`]): the heap holds none of them. Only a
//! legacy segment (klog's format of before) is read and converted, its
//! conversion taking what it holds (four times the bytes it reads) from
//! the request memory first, and giving it back once the answer is sent;
//! a fetch of Kafka-format segments holds none.
//!
//! # Brokers
//!
//! A Kafka node id is a number: a klog broker's is derived from its id
//! ([`node_id`]), the same on every broker. Metadata lists the brokers of
//! the registry that have a Kafka listener (their `--kafka-advertised`
//! address), or this broker alone without a registry; a partition's
//! leader, replicas and ISR are the registry's. Every broker is the
//! coordinator of every group the broker assigns: the paper's rebalance
//! needs no master; a group whose leader assigns (a client's own
//! assignor) has one coordinator ([`group`]'s `classic`).

use std::net::SocketAddr;

use crate::net::Stream;
use crate::sync::lock;
use std::sync::Arc;

use super::shared::Shared;
use super::BrokerConfig;
use crate::protocol::ErrorCode;

mod access;
mod acls;
mod configs_admin;
mod configs_broker;
mod configs_common;
mod connection;
mod epochs;
mod fetch;
pub(crate) mod group;
mod group_admin;
mod groups;
mod handlers;
mod metadata;
mod partitions_create;
mod produce;
mod records_delete;
mod scram;
mod topics_admin;
mod topics_delete;
mod transactions;
mod txn;

/// What the Kafka connections of a broker share besides [`Shared`].
#[derive(Debug)]
struct Kafka {
    /// The `host:port` this broker gives Kafka clients.
    advertised: (String, u16),
    /// This broker's Kafka node id.
    node_id: i32,
    /// The client software (name, version) already named in the log.
    clients_seen: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    /// The group coordinator.
    coordinator: Arc<group::Coordinator>,
    /// The transaction coordinator.
    transactions: Arc<transactions::Transactions>,
    /// Held while an admin request changes the registry's ACLs or users.
    admin: std::sync::Mutex<()>,
}

/// The address Kafka clients are told to connect to: `--kafka-advertised`,
/// else the listener's own, which must then be one a client can reach (not
/// a wildcard): `None` for a wildcard unless `required` (then an error).
pub(super) fn advertised(
    config: &BrokerConfig,
    local: SocketAddr,
    required: bool,
) -> anyhow::Result<Option<(String, u16)>> {
    if let Some(addr) = &config.kafka_advertised {
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| {
                Some((
                    h.trim_start_matches('[').trim_end_matches(']'),
                    p.parse().ok()?,
                ))
            })
            .filter(|(h, p)| !h.is_empty() && *p != 0)
            .ok_or_else(|| anyhow::anyhow!("--kafka-advertised {addr:?} is not HOST:PORT"))?;
        return Ok(Some((host.to_string(), port)));
    }
    if local.ip().is_unspecified() && !required {
        return Ok(None);
    }
    if local.ip().is_unspecified() {
        anyhow::bail!(
            "the Kafka listener is on the wildcard address {local}: say which address clients \
             connect to with --kafka-advertised HOST:PORT"
        );
    }
    Ok(Some((local.ip().to_string(), local.port())))
}

/// A broker's Kafka node id, from its klog id: the same number on every
/// broker and across restarts (a CRC-32 of the id, made non-negative).
pub(super) fn node_id(broker_id: &str) -> i32 {
    (crc32fast::hash(broker_id.as_bytes()) & 0x7fff_ffff) as i32
}

/// The Kafka side of a broker: what its Kafka connections share, made at
/// the first one (a broker no Kafka client reaches starts no group
/// coordinator), and ended once, at the broker's stop.
#[derive(Debug)]
pub(super) struct KafkaSide {
    /// The `host:port` given to Kafka clients: `None` where it is not
    /// known (a wildcard listener without `--kafka-advertised`), and then
    /// Kafka clients are refused with the reason.
    advertised: Option<(String, u16)>,
    state: std::sync::Mutex<SideState>,
}

#[derive(Debug)]
enum SideState {
    Idle,
    Running(Arc<Kafka>),
    Stopped,
}

impl KafkaSide {
    /// A Kafka side that gives clients `advertised`.
    pub(super) fn new(advertised: Option<(String, u16)>) -> KafkaSide {
        KafkaSide {
            advertised,
            state: std::sync::Mutex::new(SideState::Idle),
        }
    }

    /// Starts the coordinators now, rather than at the first Kafka
    /// client's connection: after a restart, transactions left open or
    /// prepared are aborted or finished without waiting for a client (a
    /// broker with a Kafka listener, or with a registry: klog's
    /// transactional producers too).
    pub(super) fn start(&self, shared: &Arc<Shared>) {
        if let Err(why) = self.kafka(shared) {
            shared.log(format_args!(
                "the Kafka side waits for its first client: {why}"
            ));
        }
    }

    /// Serves a Kafka client's connection until it ends.
    pub(super) fn serve(
        &self,
        shared: &Arc<Shared>,
        stream: Stream,
        peer: SocketAddr,
        principal: Option<String>,
    ) {
        let kafka = match self.advertised {
            None => Err(WILDCARD.to_string()),
            Some(_) => self.kafka(shared),
        };
        match kafka {
            Ok(kafka) => connection::serve(shared, &kafka, stream, peer, principal),
            Err(why) => shared.log_peer(format_args!("{peer}: a Kafka client refused: {why}")),
        }
    }

    fn kafka(&self, shared: &Arc<Shared>) -> Result<Arc<Kafka>, String> {
        let mut state = lock(&self.state);
        match &*state {
            SideState::Running(kafka) => return Ok(kafka.clone()),
            SideState::Stopped => return Err("the broker is stopping".into()),
            SideState::Idle => {}
        }
        // Without an address for Kafka clients (who are refused), the
        // coordinators still serve klog's transactional producers.
        let advertised = self
            .advertised
            .clone()
            .unwrap_or_else(|| (String::new(), 0));
        let (coordinator, transactions) = start_coordinator(shared).map_err(|e| e.to_string())?;
        let kafka = Arc::new(Kafka {
            advertised,
            node_id: node_id(&shared.broker_id),
            clients_seen: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            coordinator,
            transactions,
            admin: std::sync::Mutex::new(()),
        });
        *state = SideState::Running(Arc::clone(&kafka));
        Ok(kafka)
    }

    /// Ends the Kafka side at the broker's stop: members waiting in a join
    /// answer at once, and their registry entries go.
    pub(super) fn shutdown(&self) {
        let state = std::mem::replace(&mut *lock(&self.state), SideState::Stopped);
        if let SideState::Running(kafka) = state {
            kafka.coordinator.shutdown();
        }
    }
}

/// Why a Kafka client of a wildcard listener is refused.
const WILDCARD: &str = "this listener is on a wildcard address: say which address Kafka \
                        clients connect to with --kafka-advertised HOST:PORT";

impl crate::broker::connection::txn::Coordinators for KafkaSide {
    fn transactions(
        &self,
        shared: &Arc<Shared>,
    ) -> Result<Arc<dyn crate::broker::connection::txn::Txns>, String> {
        Ok(self.kafka(shared)?.transactions.clone())
    }
}

/// The group and transaction coordinators, over the broker's registry; a
/// broker without one keeps Kafka groups and transactions in a registry
/// directory of its own, `<data-dir>/kafka-groups` (offsets durable there;
/// `klog-consume -G` shares groups with Kafka clients through a broker's
/// `--registry`). The transaction coordinator's thread looks at the
/// transactions every [`transactions::TICK`] until the broker stops.
fn start_coordinator(
    shared: &Arc<Shared>,
) -> std::io::Result<(Arc<group::Coordinator>, Arc<transactions::Transactions>)> {
    // Groups commit to the offsets topic, led by some broker.
    let registry = match crate::broker::offsets::registry(shared) {
        Some(r) => r,
        None => {
            let dir = shared.config.data_dir.join("kafka-groups");
            crate::coord::open(&dir, shared.config.session_timeout)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.display())))?
        }
    };
    let counts = Arc::clone(shared);
    let stops = Arc::clone(shared);
    let logs = Arc::clone(shared);
    let groups = group::Coordinator::start(
        Arc::clone(&registry),
        move |topic| counts.read_topics().get(topic).map(|p| p.len() as u32),
        move || stops.stopping(),
        move |line| logs.log_peer(line),
        group::CoordinatorConfig {
            members_total_max: super::shared::kafka_members_max(),
            broker_id: shared.broker_id.clone(),
            ..group::CoordinatorConfig::default()
        },
    )?;
    let transactions = Arc::new(transactions::Transactions::new(
        registry,
        Arc::clone(&groups),
    ));
    let (looks, t) = (Arc::clone(shared), Arc::clone(&transactions));
    std::thread::Builder::new()
        .name("txn-coordinator".into())
        .spawn(move || {
            while !looks.stopping() {
                std::thread::sleep(transactions::TICK);
                t.tick(&looks);
            }
        })?;
    Ok((groups, transactions))
}

/// The Kafka error code for a klog one.
fn kafka_code(code: ErrorCode) -> i16 {
    use crate::kafka as k;
    match code {
        ErrorCode::None => k::NONE,
        ErrorCode::OffsetOutOfRange => k::OFFSET_OUT_OF_RANGE,
        ErrorCode::CorruptBatch => k::CORRUPT_MESSAGE,
        ErrorCode::UnknownTopic | ErrorCode::UnknownPartition => k::UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode::RecordTooLarge => k::MESSAGE_TOO_LARGE,
        ErrorCode::RequestTooLarge => k::RECORD_LIST_TOO_LARGE,
        ErrorCode::InvalidTopic => k::INVALID_TOPIC_EXCEPTION,
        ErrorCode::InvalidRequest => k::INVALID_REQUEST,
        ErrorCode::Timeout => k::REQUEST_TIMED_OUT,
        ErrorCode::StorageError | ErrorCode::DiskFull => k::KAFKA_STORAGE_ERROR,
        ErrorCode::PartitionElsewhere | ErrorCode::NotLeader => k::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::FencedEpoch => k::FENCED_LEADER_EPOCH,
        ErrorCode::UnknownEpoch => k::UNKNOWN_LEADER_EPOCH,
        ErrorCode::NotEnoughReplicas => k::NOT_ENOUGH_REPLICAS,
        ErrorCode::LeaderNotAvailable | ErrorCode::ShuttingDown => k::LEADER_NOT_AVAILABLE,
        // A bound of the broker's (topics, partitions): its policy.
        ErrorCode::LimitReached => k::POLICY_VIOLATION,
        ErrorCode::OutOfOrderSequence => k::OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode::ProducerFenced => k::INVALID_PRODUCER_EPOCH,
        ErrorCode::InvalidTxnState => k::INVALID_TXN_STATE,
        ErrorCode::CommitFenced => k::ILLEGAL_GENERATION,
        _ => k::UNKNOWN_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_is_a_stable_non_negative_number_of_the_broker_id() {
        let a = node_id("broker-18c2f5d0a1b2c3d4");
        assert_eq!(a, node_id("broker-18c2f5d0a1b2c3d4"));
        assert!(a >= 0);
        assert_ne!(a, node_id("broker-18c2f5d0a1b2c3d5"));
    }

    #[test]
    fn a_wildcard_listener_needs_an_advertised_address() {
        let mut config = BrokerConfig::new("/d", "127.0.0.1:0");
        let wild: SocketAddr = "0.0.0.0:9093".parse().unwrap();
        let err = advertised(&config, wild, true).unwrap_err().to_string();
        assert!(err.contains("--kafka-advertised"), "{err}");
        assert_eq!(advertised(&config, wild, false).unwrap(), None);
        config.kafka_advertised = Some("kafka.example:19093".into());
        let named = Some(("kafka.example".to_string(), 19093));
        assert_eq!(advertised(&config, wild, true).unwrap(), named);
        assert_eq!(advertised(&config, wild, false).unwrap(), named);
        config.kafka_advertised = Some("nope".into());
        assert!(advertised(&config, wild, false).is_err());
        config.kafka_advertised = None;
        let local: SocketAddr = "127.0.0.1:9093".parse().unwrap();
        assert_eq!(
            advertised(&config, local, false).unwrap(),
            Some(("127.0.0.1".to_string(), 9093))
        );
    }
}
