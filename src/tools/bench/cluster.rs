//! A cluster of the benchmark's own (`--brokers N`): a directory registry
//! and N `klog-broker` processes in one temporary directory, started with
//! the replication factor and minimum ISR asked for; the measured topic
//! is created, and the run starts only once every partition has a leader
//! that serves it and every replica in its ISR. Dropped (at the end, on a
//! failure, after SIGINT or SIGTERM) it stops the brokers and removes the
//! directory.
//!
//! The brokers are child processes (the `klog-broker` beside
//! `klog-bench`), not threads of this one: each has its own threads,
//! allocator and descriptors as in a deployment, nothing of the
//! benchmark's client shares their process, and a profiler tells the
//! leader's work from each follower's by process (`perf record -a`, then
//! `perf report --sort pid,comm`). The price: a `kill -9` of `klog-bench`
//! leaves them running (their command lines name the directory).
//!
//! ```text
//! $TMPDIR/klog-bench-cluster-<pid>-<nanos>/
//!     registry/            the directory registry
//!     broker-<i>/          broker i's data directory
//!     broker-<i>.log       its stderr
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::route::Route;
use crate::client::Connections;
use crate::coord::Registry;
use crate::error::{Error, Result};

/// How long a broker has to start listening, and a topic to get its
/// leaders and full ISRs.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long a broker has to shut down after SIGTERM before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(10);
/// How often the registry and the brokers are looked at while waiting.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// The cluster asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Brokers.
    pub brokers: u32,
    /// Replicas of each partition.
    pub replication_factor: u32,
    /// `--min-insync-replicas` of every broker.
    pub min_insync_replicas: u32,
}

/// What the registry says of a topic's replication: live brokers, the
/// topic's replication factor, and the smallest ISR among its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// Brokers registered live.
    pub brokers: usize,
    /// Replicas of the topic's partitions, as placed.
    pub replication_factor: usize,
    /// The fewest in-sync replicas of any of its partitions.
    pub in_sync_replicas_min: usize,
}

/// A running cluster of the benchmark's own.
#[derive(Debug)]
pub struct OwnCluster {
    shape: Shape,
    addrs: Vec<String>,
    registry: Arc<dyn Registry>,
    /// Last: dropped after the registry handle.
    processes: Processes,
}

impl OwnCluster {
    /// Starts `shape.brokers` brokers on 127.0.0.1 (free ports), whose
    /// topics have `partitions` partitions and segments of
    /// `segment_bytes` (the broker's default when `None`), and waits until
    /// each listens.
    pub fn start(
        shape: Shape,
        partitions: u32,
        segment_bytes: Option<u64>,
    ) -> anyhow::Result<OwnCluster> {
        use anyhow::Context;
        let exe = broker_binary()?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("klog-bench-cluster-{}-{nanos}", std::process::id()));
        let registry_dir = dir.join("registry");
        std::fs::create_dir_all(&registry_dir)
            .with_context(|| format!("cannot create {}", registry_dir.display()))?;
        let mut processes = Processes {
            dir,
            children: Vec::new(),
        };
        for i in 0..shape.brokers {
            let child = spawn_broker(&exe, &processes.dir, i, shape, partitions, segment_bytes)?;
            processes.children.push(child);
        }
        let mut addrs = Vec::with_capacity(processes.children.len());
        for i in 0..processes.children.len() {
            addrs.push(processes.wait_listening(i)?);
        }
        let registry = crate::coord::open_read_only(&registry_dir)?;
        Ok(OwnCluster {
            shape,
            addrs,
            registry,
            processes,
        })
    }

    /// Its shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// A broker's address.
    pub fn addr(&self) -> &str {
        &self.addrs[0]
    }

    /// Creates `topic` with `partitions` (unless it exists) and waits until
    /// every partition has a leader that serves it and all its replicas in
    /// sync: the leader of each.
    pub fn leaders(&self, topic: &str, partitions: u32) -> Result<Route> {
        let mut conns = Connections::new();
        // The first places it; each other opens what it holds of it (a
        // broker learns of a topic of single copies only when asked).
        let mut count = partitions;
        for addr in &self.addrs {
            count = conns.with(addr, |c| c.create_topic(topic, partitions))?;
        }
        let started = Instant::now();
        loop {
            let why = match self.leaders_now(&mut conns, topic, count) {
                Ok(Ok(addrs)) => return Ok(Route::Leaders(addrs)),
                Ok(Err(why)) => why,
                // Retried: a broker may be busy electing, or restarting.
                Err(e) => e.to_string(),
            };
            if crate::stop::stopping() {
                return Err(Error::Stopped {
                    addr: self.addr().to_string(),
                });
            }
            if started.elapsed() > READY_WITHIN {
                return Err(Error::Config(format!(
                    "topic {topic:?} is not ready after {} s: {why}",
                    READY_WITHIN.as_secs()
                )));
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }

    /// The leader of each partition of `topic` if each is ready, else why
    /// one is not.
    fn leaders_now(
        &self,
        conns: &mut Connections,
        topic: &str,
        count: u32,
    ) -> Result<std::result::Result<Vec<String>, String>> {
        let Some(placement) = self.registry.placement(topic)? else {
            return Ok(Err("it is not placed yet".into()));
        };
        let brokers = self.registry.brokers()?;
        let mut leaders = Vec::with_capacity(count as usize);
        for p in 0..count {
            let replicas = placement.replicas_of(p).unwrap_or_default();
            let leader = if replicas.len() > 1 {
                let Some((state, _)) = self.registry.partition_state(topic, p)? else {
                    return Ok(Err(format!("partition {p} has no replication state yet")));
                };
                if let Some(missing) = replicas.iter().find(|r| !state.isr.contains(r)) {
                    return Ok(Err(format!(
                        "replica {missing} of partition {p} is not in sync (ISR {:?})",
                        state.isr
                    )));
                }
                match state.leader {
                    Some(leader) => leader,
                    None => return Ok(Err(format!("partition {p} has no leader"))),
                }
            } else {
                match replicas.first() {
                    Some(only) => only.clone(),
                    None => return Ok(Err(format!("partition {p} has no replica"))),
                }
            };
            let Some(addr) = brokers.iter().find(|b| b.id == leader).map(|b| b.addr()) else {
                return Ok(Err(format!(
                    "the leader of partition {p}, {leader}, is not registered"
                )));
            };
            // The state names it; it serves once it took the lead itself.
            let offsets = conns.with(&addr, |c| c.partitions(topic))?;
            let serves = offsets.get(p as usize).is_some_and(|&(start, _)| {
                start != crate::protocol::ELSEWHERE && start != crate::protocol::OFFLINE
            });
            if !serves {
                return Ok(Err(format!(
                    "broker {leader} does not lead partition {p} yet"
                )));
            }
            leaders.push(addr);
        }
        Ok(Ok(leaders))
    }

    /// What the registry says now of `topic`'s replication.
    pub fn observe(&self, topic: &str) -> Result<Observed> {
        let brokers = self.registry.brokers()?.len();
        let Some(placement) = self.registry.placement(topic)? else {
            return Err(Error::Config(format!("topic {topic:?} is not placed")));
        };
        let mut in_sync_replicas_min = usize::MAX;
        for p in 0..placement.brokers.len() as u32 {
            let replicas = placement.replicas_of(p).map_or(0, <[String]>::len);
            let in_sync = match self.registry.partition_state(topic, p)? {
                Some((state, _)) => state.isr.len(),
                // A single copy has no state: its one replica.
                None if replicas <= 1 => replicas,
                None => 0,
            };
            in_sync_replicas_min = in_sync_replicas_min.min(in_sync);
        }
        Ok(Observed {
            brokers,
            replication_factor: placement.replication_factor(),
            in_sync_replicas_min: in_sync_replicas_min.min(placement.replication_factor()),
        })
    }

    /// Bytes of the segment files of `topic` on one replica: of each
    /// partition, its most on any broker (a follower holds a prefix of its
    /// leader's log, and with acks=1 may not hold all of it yet).
    pub fn log_bytes(&self, topic: &str) -> u64 {
        let Ok(Some(placement)) = self.registry.placement(topic) else {
            return 0;
        };
        (0..placement.brokers.len())
            .map(|p| {
                (0..self.processes.children.len())
                    .map(|i| {
                        let name = crate::storage::store::partition_dir_name(topic, p as u32);
                        let dir = broker_dir(&self.processes.dir, i).join(name);
                        super::workload::segment_bytes(&dir, topic)
                    })
                    .max()
                    .unwrap_or(0)
            })
            .sum()
    }
}

/// The `klog-broker` beside this program.
fn broker_binary() -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let me = std::env::current_exe().context("cannot find klog-bench's own path")?;
    let exe = me.with_file_name(format!("klog-broker{}", std::env::consts::EXE_SUFFIX));
    if !exe.is_file() {
        anyhow::bail!(
            "no klog-broker beside {} to start a cluster with (install the six binaries together)",
            me.display()
        );
    }
    Ok(exe)
}

fn broker_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("broker-{i}"))
}

fn broker_log(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("broker-{i}.log"))
}

/// Starts broker `i` of the cluster in `dir`, its stderr to its log file.
fn spawn_broker(
    exe: &Path,
    dir: &Path,
    i: u32,
    shape: Shape,
    partitions: u32,
    segment_bytes: Option<u64>,
) -> anyhow::Result<Child> {
    use anyhow::Context;
    let log_path = broker_log(dir, i as usize);
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut command = Command::new(exe);
    command
        .arg("--data-dir")
        .arg(broker_dir(dir, i as usize))
        .arg("--registry")
        .arg(dir.join("registry"))
        .args(["--listen", "127.0.0.1:0"])
        .args([
            "--replication-factor",
            &shape.replication_factor.to_string(),
        ])
        .args([
            "--min-insync-replicas",
            &shape.min_insync_replicas.to_string(),
        ])
        .args(["--partitions", &partitions.to_string()]);
    if let Some(bytes) = segment_bytes {
        command.args(["--segment-bytes", &bytes.to_string()]);
    }
    command
        .env_remove("KLOG_REGISTRY")
        .env_remove("KLOG_BROKER_DATA_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))
}

/// The brokers' processes and their directory: stopped and removed when
/// dropped.
#[derive(Debug)]
struct Processes {
    dir: PathBuf,
    children: Vec<Child>,
}

impl Processes {
    /// Waits for broker `i`'s `% Listening on ADDR` line; its address.
    fn wait_listening(&mut self, i: usize) -> anyhow::Result<String> {
        let path = broker_log(&self.dir, i);
        let started = Instant::now();
        loop {
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            if let Some(addr) = log.lines().find_map(|l| l.strip_prefix("% Listening on ")) {
                return Ok(addr.trim().to_string());
            }
            if let Some(status) = self.children[i].try_wait()? {
                anyhow::bail!(
                    "broker {i} of the cluster ended ({status}) before listening:\n{log}"
                );
            }
            if crate::stop::stopping() {
                return Err(Error::Stopped {
                    addr: format!("broker {i} of the cluster"),
                }
                .into());
            }
            if started.elapsed() > READY_WITHIN {
                anyhow::bail!(
                    "broker {i} of the cluster is not listening after {} s:\n{log}",
                    READY_WITHIN.as_secs()
                );
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        for child in &self.children {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        let started = Instant::now();
        for child in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && started.elapsed() < STOP_WITHIN {
                std::thread::sleep(LOOK_EVERY);
            }
            // Still there: it will not stop by itself.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
