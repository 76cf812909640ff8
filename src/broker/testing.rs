//! Scenes for the broker's unit tests: a broker's shared state over a
//! simulated file system, with no socket and no thread of its own.

use std::sync::Arc;

use super::shared::{Partition, Shared};
use super::BrokerConfig;
use crate::protocol::{self, ErrorCode, Reader};
use crate::storage::fs::sim::SimFs;
use crate::storage::record::BatchBuilder;
use crate::storage::store::Store;

/// A quiet broker's state over a fresh simulated disk, without a registry.
pub(super) fn shared() -> (Arc<SimFs>, Arc<Shared>) {
    shared_with(|_| {})
}

/// [`shared`], with its configuration changed by `change` first.
pub(super) fn shared_with(change: impl FnOnce(&mut BrokerConfig)) -> (Arc<SimFs>, Arc<Shared>) {
    let sim = Arc::new(SimFs::new());
    let mut config = BrokerConfig::new("/data", "127.0.0.1:0");
    change(&mut config);
    config.vfs = sim.clone();
    config.quiet = true;
    // Small indexes: a simulated disk holds every byte in memory.
    config.log.index_bytes_max = 4096;
    config.vfs.create_dir_all(&config.data_dir).unwrap();
    let store = Store::with_vfs(&config.data_dir, Arc::clone(&config.vfs));
    let shared = Shared::new(config, store, None, "broker-test".into());
    (sim, Arc::new(shared))
}

/// A quiet broker's state as `me` over a fresh simulated disk, with
/// `registry`, where topic t (one partition, replicas broker-test, b and
/// c) is placed and its state made, when new: led by broker-test in
/// epoch 1 with ISR `isr`. `change` changes the configuration first.
pub(super) fn shared_in(
    registry: Arc<dyn crate::coord::Registry>,
    me: &str,
    isr: &[&str],
    change: impl FnOnce(&mut BrokerConfig),
) -> (Arc<SimFs>, Arc<Shared>) {
    use crate::coord::{PartitionState, Placement};
    let (sim, quiet) = shared_with(change);
    let config = quiet.config.clone();
    let store = Store::with_vfs(&config.data_dir, Arc::clone(&config.vfs));
    let ids = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let placement = Placement::new("t", vec![ids(&["broker-test", "b", "c"])]);
    registry.create_placement(&placement).unwrap();
    let state = PartitionState {
        leader: Some("broker-test".into()),
        leader_epoch: 1,
        isr: ids(isr),
    };
    registry.create_partition_state("t", 0, &state).unwrap();
    let shared = Shared::new(config, store, Some(registry), me.into());
    (sim, Arc::new(shared))
}

/// Partition 0 of `topic`, created with one partition if it is new.
pub(super) fn partition(shared: &Shared, topic: &str) -> Arc<Partition> {
    shared.create_topic(topic, 1).unwrap();
    shared.partition(topic, 0).unwrap()
}

/// A batch of one record, as a producer sends it.
pub(super) fn batch() -> Vec<u8> {
    batch_of(b"x")
}

/// A batch of one record of `value`.
pub(super) fn batch_of(value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push(0, None, &[], value);
    b.finish().to_vec()
}

/// Appends a batch of one record to `p`, as the reader does.
pub(super) fn append(p: &Partition) -> crate::storage::log::AppendInfo {
    p.lock().append(&mut batch(), 0).unwrap()
}

/// The answers in `bytes`, frame by frame: each one's correlation id,
/// error code, and body after the header.
pub(super) fn answers(bytes: &[u8]) -> Vec<(u32, ErrorCode, Vec<u8>)> {
    let mut found = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let frame = &rest[4..4 + len];
        let mut r = Reader::new(frame);
        let header = protocol::decode_response_header(&mut r).unwrap();
        found.push((
            header.correlation_id,
            header.error,
            frame[r.position()..].to_vec(),
        ));
        rest = &rest[4 + len..];
    }
    found
}

/// Partition 0 of a new topic `topic` held as one of `replicas` (this
/// broker's id is `broker-test`), opened as the broker opens its logs,
/// and in the role `role`.
pub(super) fn replicated_partition(
    shared: &Shared,
    topic: &str,
    replicas: &[&str],
    role: super::replica::Role,
) -> Arc<Partition> {
    shared.store.create_topic(topic, 1).unwrap();
    let mut config = shared.config.log.clone();
    config.visible_after_flush = true;
    config.write_buffer_bytes = super::shared::WRITE_BUFFER_BYTES;
    let options = crate::storage::log::OpenOptions {
        writable: true,
        lock: false,
    };
    let log = shared.store.open_log(topic, 0, config, options).unwrap();
    let replica =
        super::replica::Replica::new(replicas.iter().map(|r| r.to_string()).collect(), None);
    *replica.role() = role;
    let p = Arc::new(Partition::replicated(topic, 0, log, Some(replica)));
    shared
        .write_topics()
        .insert(topic.to_string(), vec![Some(Arc::clone(&p))]);
    p
}

/// Partition 0 of a new topic `topic` led by this broker (`broker-test`)
/// in epoch 0, with `followers` in sync.
pub(super) fn led_partition(shared: &Shared, topic: &str, followers: &[&str]) -> Arc<Partition> {
    let mut replicas = vec!["broker-test"];
    replicas.extend_from_slice(followers);
    let leading = super::replica::Role::Leader(super::replica::Leading {
        epoch: 0,
        version: 0,
        isr: replicas.iter().map(|r| r.to_string()).collect(),
        epoch_start: 0,
        since: std::time::Instant::now(),
        progress: Default::default(),
    });
    replicated_partition(shared, topic, &replicas, leading)
}

/// A fetch's ask of partition 0 of `topic` from `offset`, a MiB at most.
pub(super) fn ask(topic: &str, offset: u64) -> protocol::FetchPartition {
    protocol::FetchPartition {
        topic: topic.into(),
        partition: 0,
        offset,
        bytes_max: 1 << 20,
        leader_epoch: None,
    }
}

/// A batch of one record, from producer `id` in a transaction when `id`
/// is not -1.
pub(super) fn one_record(id: i64) -> Vec<u8> {
    one_record_at(id, 1_000)
}

/// [`one_record`] with the timestamp `at` (ms).
pub(super) fn one_record_at(id: i64, at: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push(at, None, &[], b"v");
    let mut bytes = b.finish().to_vec();
    if id >= 0 {
        crate::storage::record::set_producer(&mut bytes, id, 0, 0);
        bytes[21..23].copy_from_slice(&crate::storage::record::ATTR_TRANSACTIONAL.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}
