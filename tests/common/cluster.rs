//! A cluster of `klog-broker`s for a replication test: N brokers on
//! 127.0.0.1 port 0 sharing a registry (a directory or ZooKeeper, see
//! [`super::registry`]), each in a data directory of its own that outlives
//! its process, so that a broker can be killed (SIGKILL), frozen (SIGSTOP),
//! thawed (SIGCONT) and started again on the same data. Every broker is
//! killed when the cluster is dropped, also when the test fails (a stopped
//! one too: SIGKILL ends a stopped process), and then the data directories
//! and the registry are removed.
//!
//! The cluster reads the registry through the `Registry` trait (each
//! partition's leader, epoch and ISR), waits with a bound for a new epoch
//! or a full ISR, and reads each replica's log with the library's read API
//! (after the brokers stopped, or read-only while they run) to compare
//! replicas batch by batch.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::coord::{PartitionState, Registry};
use klog::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::Batch;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::registry::{Backend, TestRegistry};
use super::BrokerProc;

/// One broker's place in a cluster: its data directory, its id, and its
/// process while it runs.
struct Slot {
    dir: tempfile::TempDir,
    id: String,
    broker: Option<BrokerProc>,
    /// Every stderr line of its earlier runs.
    past: Vec<String>,
}

/// N brokers on one registry (see the module doc).
pub struct Cluster {
    /// Declared first: the brokers are killed before their registry goes.
    slots: Vec<Slot>,
    registry: TestRegistry,
    view: Arc<dyn Registry>,
    args: Vec<String>,
}

/// A partition's state as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub leader: Option<String>,
    pub epoch: u64,
    pub isr: Vec<String>,
}

impl From<PartitionState> for State {
    fn from(s: PartitionState) -> State {
        State {
            leader: s.leader,
            epoch: s.leader_epoch,
            isr: s.isr,
        }
    }
}

/// One batch of a replica's log: its first and last offsets and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    pub base_offset: u64,
    pub last_offset: u64,
    pub bytes: Vec<u8>,
}

/// A replica's log as read back: its batches, and its records as
/// (offset, value).
#[derive(Debug, Clone, Default)]
pub struct Replica {
    pub batches: Vec<StoredBatch>,
    pub records: Vec<(u64, Vec<u8>)>,
}

impl Replica {
    /// One past its last offset.
    pub fn end(&self) -> u64 {
        self.batches.last().map_or(0, |b| b.last_offset + 1)
    }

    /// Its batches wholly below `offset`.
    pub fn batches_below(&self, offset: u64) -> Vec<&StoredBatch> {
        self.batches
            .iter()
            .filter(|b| b.last_offset < offset)
            .collect()
    }
}

impl Cluster {
    /// Starts `n` brokers on a fresh registry on `backend`, each with
    /// `args` (besides `--data-dir`, `--listen` and `--registry`), and
    /// waits until all are registered; `None` when the backend is
    /// ZooKeeper and it is not installed (a `skipped:` line is printed).
    pub fn start(backend: Backend, n: usize, args: &[&str]) -> Option<Cluster> {
        let registry = TestRegistry::start(backend)?;
        let view = registry.open_read_only();
        let mut all = vec!["--registry".to_string(), registry.spec().to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        let mut cluster = Cluster {
            slots: Vec::new(),
            registry,
            view,
            args: all,
        };
        for _ in 0..n {
            let dir = tempfile::tempdir().expect("a data directory");
            let broker = BrokerProc::start(dir.path(), &cluster.arg_refs());
            let id = std::fs::read_to_string(dir.path().join("broker-id"))
                .expect("the broker wrote its id")
                .trim()
                .to_string();
            cluster.slots.push(Slot {
                dir,
                id,
                broker: Some(broker),
                past: Vec::new(),
            });
        }
        cluster.wait_registered(Duration::from_secs(30));
        Some(cluster)
    }

    fn arg_refs(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    /// The `--registry` argument.
    pub fn spec(&self) -> &str {
        self.registry.spec()
    }

    /// Three brokers on a registry directory replicating every partition
    /// of a one-partition topic three times, quick to fail over (a
    /// session and a replica lag of 2s), with `extra` arguments.
    pub fn three_fast(extra: &[&str]) -> Cluster {
        let mut args = vec![
            "--replication-factor",
            "3",
            "--partitions",
            "1",
            "--session-timeout",
            "2s",
            "--replica-lag-time",
            "2s",
        ];
        args.extend_from_slice(extra);
        Cluster::start(Backend::Dir, 3, &args).expect("a registry directory")
    }

    /// `n` brokers on a registry directory, each with a Kafka listener and
    /// `--min-insync-replicas 1`, and `extra` arguments.
    pub fn with_kafka(n: usize, extra: &[&str]) -> Option<Cluster> {
        let mut args = vec![
            "--kafka-listen",
            "127.0.0.1:0",
            "--min-insync-replicas",
            "1",
        ];
        args.extend_from_slice(extra);
        Cluster::start(Backend::Dir, n, &args)
    }

    /// The Kafka listener of broker `slot`'s current run, as its log says
    /// it (started with `--kafka-listen`).
    pub fn kafka_addr(&self, slot: usize) -> String {
        let log = self.run_log(slot);
        let line = log
            .iter()
            .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "));
        line.map(str::to_string).expect("a Kafka listener")
    }

    /// The klog listener of broker `slot`'s current run.
    pub fn addr(&self, slot: usize) -> String {
        let broker = self.slots[slot].broker.as_ref();
        broker.expect("a running broker").addr.clone()
    }

    /// How many brokers it has (running or not).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The id of broker `slot`.
    pub fn id(&self, slot: usize) -> &str {
        &self.slots[slot].id
    }

    /// The slot of the broker with `id`.
    pub fn slot_of(&self, id: &str) -> usize {
        self.slots
            .iter()
            .position(|s| s.id == id)
            .unwrap_or_else(|| panic!("no broker {id} in the cluster"))
    }

    /// The data directory of broker `slot`.
    pub fn data_dir(&self, slot: usize) -> &Path {
        self.slots[slot].dir.path()
    }

    /// Whether broker `slot` has a process (running or stopped).
    pub fn running(&self, slot: usize) -> bool {
        self.slots[slot].broker.is_some()
    }

    /// Every stderr line of broker `slot`, over all its runs.
    pub fn log(&self, slot: usize) -> Vec<String> {
        let s = &self.slots[slot];
        let mut lines = s.past.clone();
        if let Some(b) = &s.broker {
            lines.extend(b.log());
        }
        lines
    }

    /// The stderr lines of broker `slot`'s current run.
    pub fn run_log(&self, slot: usize) -> Vec<String> {
        self.slots[slot]
            .broker
            .as_ref()
            .map_or_else(Vec::new, BrokerProc::log)
    }

    /// Waits until broker `slot`'s current run said a line containing
    /// `text`.
    pub fn wait_said(&self, slot: usize, text: &str, bound: Duration) {
        let what = format!("broker {} says {text:?}", self.id(slot));
        self.wait(&what, bound, || {
            self.run_log(slot).iter().any(|l| l.contains(text))
        });
    }

    /// Waits until every running broker is registered and live.
    pub fn wait_registered(&self, bound: Duration) {
        let wanted: Vec<&str> = (0..self.len())
            .filter(|&s| self.running(s))
            .map(|s| self.id(s))
            .collect();
        self.wait(&format!("brokers {wanted:?} registered"), bound, || {
            let live = self.view.brokers().unwrap_or_default();
            wanted.iter().all(|id| live.iter().any(|b| b.id == *id))
        });
    }

    /// Kills broker `slot` with SIGKILL and reaps it.
    pub fn kill9(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let mut broker = s.broker.take().expect("the broker runs");
        broker.kill9();
        s.past.extend(broker.log());
    }

    /// Stops broker `slot` with SIGTERM (a clean shutdown) and waits.
    pub fn terminate(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let mut broker = s.broker.take().expect("the broker runs");
        let status = broker.terminate();
        s.past.extend(broker.log());
        assert!(status.success(), "broker {} exited {status}", s.id);
    }

    /// Stops every running broker with SIGTERM.
    pub fn terminate_all(&mut self) {
        for slot in 0..self.len() {
            if self.running(slot) {
                self.terminate(slot);
            }
        }
    }

    /// Freezes broker `slot` (SIGSTOP): it answers nothing and renews
    /// nothing, and closes nothing.
    pub fn freeze(&self, slot: usize) {
        self.signal(slot, Signal::SIGSTOP);
    }

    /// Thaws a frozen broker `slot` (SIGCONT).
    pub fn thaw(&self, slot: usize) {
        self.signal(slot, Signal::SIGCONT);
    }

    fn signal(&self, slot: usize, signal: Signal) {
        let broker = self.slots[slot].broker.as_ref().expect("the broker runs");
        kill(Pid::from_raw(broker.child.id() as i32), signal).expect("signal the broker");
    }

    /// Starts broker `slot` again on its data directory (same id), once
    /// its last registration is gone (on ZooKeeper a killed broker's
    /// session lives until it expires, and holds its id).
    pub fn restart(&mut self, slot: usize) {
        assert!(!self.running(slot), "broker {} still runs", self.id(slot));
        let id = self.id(slot).to_string();
        let what = format!("the registration of the stopped broker {id} expires");
        self.wait(&what, Duration::from_secs(30), || {
            self.view
                .brokers()
                .is_ok_and(|live| live.iter().all(|b| b.id != id))
        });
        let broker = BrokerProc::start(self.slots[slot].dir.path(), &self.arg_refs());
        self.slots[slot].broker = Some(broker);
    }

    /// The state of `topic`'s `partition`, if it has one.
    pub fn state(&self, topic: &str, partition: u32) -> Option<State> {
        match self.view.partition_state(topic, partition) {
            Ok(state) => state.map(|(s, _)| s.into()),
            // ZooKeeper may be slow to answer under load: not known now.
            Err(_) => None,
        }
    }

    /// Waits up to `bound` for `done`, looking every 50 ms; fails with
    /// `what`, the partition states and every broker's stderr.
    pub fn wait(&self, what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            if started.elapsed() > bound {
                self.fail(&format!("{what} (waited {bound:?})"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Panics with `why`, every partition state of topic `t` and each
    /// broker's stderr (its last lines).
    pub fn fail(&self, why: &str) -> ! {
        let mut text = format!("{why}\n");
        for p in 0..4 {
            if let Some(s) = self.state("t", p) {
                text.push_str(&format!("t-{p}: {s:?}\n"));
            }
        }
        for slot in 0..self.len() {
            let log = self.log(slot);
            let tail = &log[log.len().saturating_sub(40)..];
            text.push_str(&format!("broker {} ({slot}):\n", self.id(slot)));
            for line in tail {
                text.push_str(&format!("  {line}\n"));
            }
        }
        panic!("{text}");
    }

    /// Waits until `topic`'s `partition` has a live leader, and returns
    /// its state.
    pub fn wait_leader(&self, topic: &str, partition: u32, bound: Duration) -> State {
        let mut found = None;
        self.wait(&format!("{topic}-{partition} has a leader"), bound, || {
            found = self.state(topic, partition).filter(|s| s.leader.is_some());
            found.is_some()
        });
        found.expect("found")
    }

    /// Waits until `topic`'s `partition` has a leader in an epoch past
    /// `epoch`, a broker that runs and is not frozen (`frozen`), and
    /// returns its state.
    pub fn wait_new_epoch(
        &self,
        topic: &str,
        partition: u32,
        epoch: u64,
        frozen: Option<usize>,
        bound: Duration,
    ) -> State {
        let mut found = None;
        let what = format!("{topic}-{partition} has a live leader in an epoch past {epoch}");
        self.wait(&what, bound, || {
            found = self.state(topic, partition).filter(|s| {
                let leader = s.leader.as_deref().map(|id| self.slot_of(id));
                s.epoch > epoch
                    && leader.is_some_and(|slot| self.running(slot) && Some(slot) != frozen)
            });
            found.is_some()
        });
        found.expect("found")
    }

    /// Waits until broker `slot` is in the ISR of `topic`'s `partition`.
    pub fn wait_in_isr(&self, topic: &str, partition: u32, slot: usize, bound: Duration) {
        let id = self.id(slot).to_string();
        let what = format!("broker {id} back in the ISR of {topic}-{partition}");
        self.wait(&what, bound, || {
            self.state(topic, partition)
                .is_some_and(|s| s.leader.is_some() && s.isr.contains(&id))
        });
    }

    /// Waits until the ISR of `topic`'s `partition` holds every broker.
    pub fn wait_full_isr(&self, topic: &str, partition: u32, bound: Duration) {
        let what = format!("every broker in the ISR of {topic}-{partition}");
        self.wait(&what, bound, || {
            self.state(topic, partition)
                .is_some_and(|s| s.leader.is_some() && s.isr.len() == self.len())
        });
    }

    /// The log of `topic`'s `partition` on broker `slot`, read through the
    /// library (read-only, no lock: the broker may run).
    pub fn replica(&self, slot: usize, topic: &str, partition: u32) -> Replica {
        replica_in(&self.data_dir(slot).join(format!("{topic}-{partition}")))
    }

    /// Waits until every replica of `topic`'s `partition` ends at the same
    /// offset (they caught up), and returns them, by slot.
    pub fn wait_same_end(&self, topic: &str, partition: u32, bound: Duration) -> Vec<Replica> {
        let mut replicas = Vec::new();
        self.wait(
            &format!("the replicas of {topic}-{partition} end alike"),
            bound,
            || {
                replicas = (0..self.len())
                    .map(|s| self.replica(s, topic, partition))
                    .collect();
                replicas.windows(2).all(|w| w[0].end() == w[1].end())
            },
        );
        replicas
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if let Some(mut b) = s.broker.take() {
                b.kill9();
            }
        }
    }
}

/// The log in partition directory `dir` (none: empty), read through the
/// library (read-only, no lock: a broker may run on it).
pub fn replica_in(dir: &Path) -> Replica {
    if !dir.exists() {
        return Replica::default();
    }
    let options = OpenOptions {
        writable: false,
        lock: false,
    };
    let log = Log::open(Arc::new(RealFs), dir, LogConfig::default(), options)
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    read_replica(&log)
}

/// Every batch of `log` from its start, and its records, each batch
/// decoded whole and each record's CRC checked.
pub fn read_replica(log: &Log) -> Replica {
    let mut replica = Replica::default();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 20).expect("read the log") {
        slice.read_into(&mut buf).expect("read the log");
        let mut at = 0;
        while let Ok(b) = Batch::decode(slice.format, &buf[at..], BATCH_BYTES_MAX) {
            let bytes = buf[at..at + b.total_bytes()].to_vec();
            at += b.total_bytes();
            if b.header.base_offset < offset {
                continue;
            }
            for r in b.records(RECORD_BYTES_MAX_LIMIT) {
                let r = r.expect("a record whose CRC holds");
                replica.records.push((r.offset, r.value.to_vec()));
            }
            replica.batches.push(StoredBatch {
                base_offset: b.header.base_offset,
                last_offset: b.header.last_offset(),
                bytes,
            });
        }
        assert!(at > 0, "no whole batch at offset {offset}");
        match replica.batches.last() {
            Some(last) if last.last_offset + 1 > offset => offset = last.last_offset + 1,
            _ => break,
        }
    }
    replica
}
