//! `-L` of `klog-consume` and `klog-produce` (kcat's metadata list): the
//! brokers, and per topic each partition's leader, replicas, in-sync
//! replicas and start and end offsets, as tables or one JSON object per
//! line.
//!
//! Where the answer comes from:
//!
//! - `-b`: the broker's metadata request (topics, partitions, offsets). A
//!   partition the broker does not serve (a cluster placed it on another
//!   broker) is `elsewhere`, one it holds but cannot serve `offline`. The
//!   protocol names no broker ids: the leader is the broker's address.
//!   A broker's metadata names no other broker, so each partition's
//!   replicas and in-sync replicas show that broker alone: `--registry`
//!   shows the real ones.
//! - `--registry`: every registered broker; per topic (those the brokers
//!   say they serve, and those placed), each partition's replicas from the
//!   topic's placement, and, for a partition with a replication state, its
//!   leader and in-sync replicas from that state (a partition of one
//!   replica has none: its broker leads it and is its ISR); its offsets
//!   from the leader's metadata, whose end offset is the leader's high
//!   watermark. The registry is read first, then each leader is asked
//!   once for all its topics, every leader at once, each within
//!   [`ANSWER_TIMEOUT`](super::ask::ANSWER_TIMEOUT) in all (see
//!   [`super::ask`]): a leader that does not answer in time (stopped,
//!   overloaded, cut off) is asked nothing more, its partitions are
//!   `unreachable` (`B did not answer within 1s`), a `% broker B did not
//!   answer within 1s ...` line on stderr names it, and the listing ends
//!   within about a second whatever the brokers do. A leader that answers with an error makes its partitions
//!   `unreachable` too, one gone from the registry `down`; a replicated
//!   partition with no leader (none elected yet, or no in-sync replica
//!   alive) is `offline`, and a state that cannot be read `unreachable`
//!   with the reason.
//! - `--data-dir`: the data directory's topics, read directly (no lock, no
//!   broker, no leader).
//!
//! JSON lines, each with a `type`: `broker` (`id`, `addr`, `answered`:
//! whether it answered, null if it was not asked), `topic` (`topic`,
//! `partitions`), `partition` (`topic`, `partition`, `leader`, `replicas`,
//! `isr`, `start_offset`, `end_offset`, `state`: `online`, `elsewhere`,
//! `offline`, `unreachable` or `down`; the offsets are null unless
//! `online`; `error`: why it is `unreachable`, else null).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

use crate::client::Connections;
use crate::coord::{BrokerInfo, Registry};
use crate::protocol::{ErrorCode, ELSEWHERE, OFFLINE};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::store::Store;

use super::ask::{say_silent, Answers};
use super::Say;

/// What `-L` is asked to list.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only this topic (all when `None`).
    pub topic: Option<String>,
    /// The broker to ask (without `data_dir` and `registry`).
    pub broker: String,
    /// Embedded mode: list this data directory.
    pub data_dir: Option<PathBuf>,
    /// List the cluster of this registry.
    pub registry: Option<PathBuf>,
    /// One JSON object per line instead of tables.
    pub json: bool,
    /// Only print errors.
    pub quiet: bool,
}

/// A broker of the listing.
#[derive(Debug)]
struct Broker {
    id: Option<String>,
    addr: String,
    /// Whether it answered (`None`: it was not asked).
    answered: Option<bool>,
}

/// A partition's offsets, or why there are none.
#[derive(Debug)]
enum State {
    Online { start: u64, end: u64 },
    Elsewhere,
    Offline,
    Unreachable(String),
    Down,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Online { .. } => "online",
            State::Elsewhere => "elsewhere",
            State::Offline => "offline",
            State::Unreachable(_) => "unreachable",
            State::Down => "down",
        }
    }

    /// A partition's state from the (start, end) a broker's metadata gave.
    fn of((start, end): (u64, u64)) -> State {
        match start {
            ELSEWHERE => State::Elsewhere,
            OFFLINE => State::Offline,
            _ => State::Online { start, end },
        }
    }
}

/// A partition of the listing.
#[derive(Debug)]
struct Partition {
    topic: String,
    partition: u32,
    leader: Option<String>,
    /// Its replicas and in-sync replicas, where known (a registry's
    /// listing); else the leader alone is both.
    replicas: Option<(Vec<String>, Vec<String>)>,
    state: State,
}

impl Partition {
    /// Its replicas and in-sync replicas: the known ones, else its leader
    /// alone (none without a leader).
    fn replicas_and_isr(&self) -> (Vec<String>, Vec<String>) {
        match &self.replicas {
            Some(known) => known.clone(),
            None => {
                let alone: Vec<String> = self.leader.iter().cloned().collect();
                (alone.clone(), alone)
            }
        }
    }
}

/// Who holds a partition, as the registry says.
#[derive(Debug)]
struct Roles {
    /// Its leader (for a partition of one replica, its broker), if any.
    leader: Option<String>,
    /// Its replicas and in-sync replicas, when the placement names them.
    replicas: Option<(Vec<String>, Vec<String>)>,
    /// Why it has no leader to ask, when it has none: a state with no
    /// leader (`None`: offline), or one that cannot be read.
    leaderless: Option<State>,
}

/// What was found.
#[derive(Debug, Default)]
struct Listing {
    brokers: Vec<Broker>,
    /// Each topic's partition count.
    topics: BTreeMap<String, u32>,
    partitions: Vec<Partition>,
}

/// Lists what `options` names, on stdout.
pub fn run(options: &Options) -> anyhow::Result<()> {
    let say = Say {
        quiet: options.quiet,
    };
    let (listing, from) = match (&options.data_dir, &options.registry) {
        (Some(dir), _) => (
            from_data_dir(dir, options.topic.as_deref())?,
            format!("data directory {}", dir.display()),
        ),
        (None, Some(dir)) => (
            from_registry(dir, options.topic.as_deref(), say)?,
            format!("registry {}", dir.display()),
        ),
        (None, None) => (
            from_broker(&options.broker, options.topic.as_deref())?,
            format!("broker {}", options.broker),
        ),
    };
    let brokers = match options.data_dir {
        Some(_) => String::new(),
        None => format!(
            "{}, ",
            crate::human::count(listing.brokers.len() as u64, "broker")
        ),
    };
    say.info(format_args!(
        "Metadata for {} (from {from}): {brokers}{}",
        options
            .topic
            .as_deref()
            .map_or_else(|| "all topics".to_string(), |t| format!("topic {t}")),
        crate::human::count(listing.topics.len() as u64, "topic"),
    ));
    for p in &listing.partitions {
        if let State::Unreachable(why) = &p.state {
            say.info(format_args!("{} [{}]: {why}", p.topic, p.partition));
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if options.json {
        print_json(&mut out, &listing)?;
    } else {
        print_tables(&mut out, &listing)?;
    }
    out.flush()?;
    Ok(())
}

/// One broker's metadata.
fn from_broker(addr: &str, topic: Option<&str>) -> anyhow::Result<Listing> {
    let asked: Vec<&str> = topic.into_iter().collect();
    let mut conns = Connections::new();
    let topics = conns
        .with(addr, |c| c.metadata(&asked))
        .with_context(|| format!("cannot read the metadata of {addr}"))?;
    let mut listing = Listing {
        brokers: vec![Broker {
            id: None,
            addr: addr.to_string(),
            answered: Some(true),
        }],
        ..Listing::default()
    };
    for t in topics {
        if t.error != ErrorCode::None {
            return Err(crate::Error::Broker {
                code: t.error,
                message: t.message,
            })
            .with_context(|| format!("cannot list topic {:?} of {addr}", t.topic));
        }
        listing
            .topics
            .insert(t.topic.clone(), t.partitions.len() as u32);
        for (p, &offsets) in t.partitions.iter().enumerate() {
            let state = State::of(offsets);
            let leader = match state {
                State::Elsewhere => None,
                _ => Some(addr.to_string()),
            };
            listing.partitions.push(Partition {
                topic: t.topic.clone(),
                partition: p as u32,
                leader,
                replicas: None,
                state,
            });
        }
    }
    Ok(listing)
}

/// A registry's cluster: its brokers, and each partition's from the
/// placement, with the offsets its leader reports (each leader asked
/// within [`ANSWER_TIMEOUT`](super::ask::ANSWER_TIMEOUT); one that does
/// not answer is said by `say`).
fn from_registry(dir: &Path, topic: Option<&str>, say: Say) -> anyhow::Result<Listing> {
    if crate::coord::zk_address(dir).is_none() && !dir.join("brokers").is_dir() {
        anyhow::bail!("{} is not a registry (no brokers/ inside)", dir.display());
    }
    let registry = super::registry_dump::open_to_look(dir)?;
    let brokers = registry.brokers()?;
    // Everything read from the registry first, then the leaders asked.
    let held = held(&*registry, &brokers, topic)?;
    let mut placed = Vec::with_capacity(held.len());
    for (t, holders) in held {
        let roles = roles(&*registry, &t, &holders)?;
        placed.push((t, roles));
    }
    let answers = ask_leaders(&brokers, &placed);
    say_silent(
        &answers.answered,
        &brokers,
        "its partitions are unreachable",
        say,
    );
    let mut listing = Listing {
        brokers: brokers
            .iter()
            .map(|b| Broker {
                id: Some(b.id.clone()),
                addr: b.addr(),
                answered: answers.answered.get(&b.id).copied(),
            })
            .collect(),
        ..Listing::default()
    };
    for (t, roles) in placed {
        listing.topics.insert(t.clone(), roles.len() as u32);
        for (p, roles) in roles.into_iter().enumerate() {
            let asked = roles
                .leader
                .as_deref()
                .and_then(|id| answers.offsets(id, &t));
            let state = match (roles.leaderless, asked) {
                (Some(why), _) => why,
                // Its leader is not registered: not running.
                (None, None) => State::Down,
                (None, Some(Ok(o))) => o.get(p).copied().map_or(State::Elsewhere, State::of),
                (None, Some(Err(why))) => State::Unreachable(why.clone()),
            };
            listing.partitions.push(Partition {
                topic: t.clone(),
                partition: p as u32,
                leader: roles.leader,
                replicas: roles.replicas,
                state,
            });
        }
    }
    Ok(listing)
}

/// The topics to list (`topic` alone, if given: an error if the registry
/// knows it not), each with its partitions and the broker that says it
/// holds each.
fn held(
    registry: &dyn Registry,
    brokers: &[BrokerInfo],
    topic: Option<&str>,
) -> anyhow::Result<BTreeMap<String, BTreeMap<u32, String>>> {
    let mut held: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    for b in brokers {
        for (t, partitions) in &b.topics {
            for &p in partitions {
                held.entry(t.clone()).or_default().insert(p, b.id.clone());
            }
        }
    }
    if let Some(t) = topic {
        if !held.contains_key(t) && registry.placement(t)?.is_none() {
            anyhow::bail!(crate::Error::NotInRegistry {
                topic: t.to_string(),
                registry: registry.location(),
            });
        }
        held.retain(|name, _| name == t);
        held.entry(t.to_string()).or_default();
    }
    Ok(held)
}

/// Asks each registered leader of `placed` (each topic's partitions' roles)
/// for the offsets of the topics it leads, every leader at once, each
/// within [`ANSWER_TIMEOUT`](super::ask::ANSWER_TIMEOUT).
fn ask_leaders(brokers: &[BrokerInfo], placed: &[(String, Vec<Roles>)]) -> Answers {
    let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (t, roles) in placed {
        for leader in roles
            .iter()
            .filter(|r| r.leaderless.is_none())
            .filter_map(|r| r.leader.as_ref())
        {
            wanted.entry(leader.clone()).or_default().insert(t.clone());
        }
    }
    Answers::ask(brokers, &wanted)
}

/// Who holds each partition of `topic`: with a placement, each
/// partition's replicas, and its leader and ISR from its replication
/// state (its one broker leads a partition of one replica, which has no
/// state); without one, the broker that says it holds the partition.
fn roles(
    registry: &dyn Registry,
    topic: &str,
    holders: &BTreeMap<u32, String>,
) -> anyhow::Result<Vec<Roles>> {
    let Some(placement) = registry.placement(topic)? else {
        let count = holders.keys().next_back().map_or(0, |p| p + 1);
        return Ok((0..count)
            .map(|p| Roles {
                leader: holders.get(&p).cloned(),
                replicas: None,
                leaderless: None,
            })
            .collect());
    };
    let mut all = Vec::with_capacity(placement.brokers.len());
    for (p, preferred) in placement.brokers.iter().enumerate() {
        let replicas = placement
            .replicas_of(p as u32)
            .map_or_else(Vec::new, <[String]>::to_vec);
        let roles = match registry.partition_state(topic, p as u32) {
            Ok(Some((state, _))) => Roles {
                leaderless: state.leader.is_none().then_some(State::Offline),
                leader: state.leader,
                replicas: Some((replicas, state.isr)),
            },
            // One replica: its broker leads it, with no state.
            Ok(None) if replicas.len() <= 1 => Roles {
                leader: Some(preferred.clone()),
                replicas: None,
                leaderless: None,
            },
            // Replicated, before its first election.
            Ok(None) => Roles {
                leader: None,
                replicas: Some((replicas, Vec::new())),
                leaderless: Some(State::Offline),
            },
            Err(e) => Roles {
                leader: None,
                replicas: Some((replicas, Vec::new())),
                leaderless: Some(State::Unreachable(e.to_string())),
            },
        };
        all.push(roles);
    }
    Ok(all)
}

/// A data directory's topics, read directly.
fn from_data_dir(dir: &Path, topic: Option<&str>) -> anyhow::Result<Listing> {
    if !dir.is_dir() {
        anyhow::bail!("no data directory at {}", dir.display());
    }
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let store = Store::with_vfs(dir, Arc::clone(&vfs));
    let mut topics = store.topics()?;
    if let Some(t) = topic {
        let count = store.partition_count(t)?;
        topics = BTreeMap::from([(t.to_string(), count)]);
    }
    let mut listing = Listing::default();
    for (t, count) in topics {
        for p in 0..count {
            let state =
                match super::consume::open_read_only(Arc::clone(&vfs), &store.partition_dir(&t, p))
                {
                    // A damaged single copy is offline until klog-recover,
                    // though a reader reads it up to the damage.
                    Ok(log) => match &log.recovery().damage {
                        Some(damage) => State::Unreachable(damage.error().to_string()),
                        None => State::Online {
                            start: log.start_offset(),
                            end: log.next_offset(),
                        },
                    },
                    Err(e) => State::Unreachable(e.to_string()),
                };
            listing.partitions.push(Partition {
                topic: t.clone(),
                partition: p,
                leader: None,
                replicas: None,
                state,
            });
        }
        listing.topics.insert(t, count);
    }
    Ok(listing)
}

fn print_json(out: &mut impl Write, listing: &Listing) -> anyhow::Result<()> {
    for b in &listing.brokers {
        writeln!(
            out,
            "{}",
            json!({"type": "broker", "id": b.id, "addr": b.addr, "answered": b.answered})
        )?;
    }
    for (topic, partitions) in &listing.topics {
        writeln!(
            out,
            "{}",
            json!({"type": "topic", "topic": topic, "partitions": partitions})
        )?;
    }
    for p in &listing.partitions {
        let (start, end) = match p.state {
            State::Online { start, end } => (Some(start), Some(end)),
            _ => (None, None),
        };
        let error = match &p.state {
            State::Unreachable(why) => Some(why),
            _ => None,
        };
        let (replicas, isr) = p.replicas_and_isr();
        writeln!(
            out,
            "{}",
            json!({"type": "partition", "topic": p.topic, "partition": p.partition,
                "leader": p.leader, "replicas": replicas, "isr": isr,
                "start_offset": start, "end_offset": end, "state": p.state.name(),
                "error": error})
        )?;
    }
    Ok(())
}

fn print_tables(out: &mut impl Write, listing: &Listing) -> anyhow::Result<()> {
    if !listing.brokers.is_empty() {
        let mut t = super::table(&["broker", "address"]);
        for b in &listing.brokers {
            t.add_row([b.id.clone().unwrap_or_else(|| "-".into()), b.addr.clone()]);
        }
        writeln!(out, "{t}")?;
    }
    let mut t = super::table(&[
        "topic",
        "partition",
        "leader",
        "replicas",
        "isr",
        "start",
        "end",
    ]);
    for p in &listing.partitions {
        let leader = p.leader.clone().unwrap_or_else(|| "-".into());
        let (start, end) = match p.state {
            State::Online { start, end } => (start.to_string(), end.to_string()),
            _ => ("-".into(), p.state.name().to_string()),
        };
        let (replicas, isr) = p.replicas_and_isr();
        let cell = |ids: Vec<String>| match ids.is_empty() {
            true => "-".to_string(),
            false => ids.join(","),
        };
        t.add_row([
            p.topic.clone(),
            p.partition.to_string(),
            leader,
            cell(replicas),
            cell(isr),
            start,
            end,
        ]);
    }
    writeln!(out, "{t}")?;
    Ok(())
}
