//! `klog-dump --registry`: what a registry directory holds, as tables or
//! NDJSON: the brokers and the topics they serve, the replication state
//! of each partition that has one (its replicas, leader, leader epoch,
//! in-sync replicas and high watermark; the table appears once a partition
//! has a state), each topic's own configs (those it sets over the
//! brokers', [`crate::coord::topic_config`]; the table appears once a
//! topic has some), the broker configs set at runtime
//! ([`crate::coord::broker_config`]: `default` for every broker, or a node
//! id), then per consumer group its members, the owner of each
//! partition, and the committed offsets with their lag (end offset minus
//! committed, from the partition's leader, or the broker that serves it).
//!
//! The high watermark is the end offset of the leader's metadata answer
//! for the partition (a leader answers with its high watermark: what
//! consumers may read). Where there is none, the table says `?` and why
//! (no leader, a leader not registered, one that does not answer or says
//! it does not lead the partition), and the JSON line has
//! `"high_watermark": null` and the reason in `high_watermark_error`.
//!
//! Each broker is asked once for all it is asked, every broker at once,
//! each within [`ANSWER_TIMEOUT`](super::ask::ANSWER_TIMEOUT) for the
//! whole dump (connecting included; see [`super::ask`]): a broker that
//! does not answer in time (stopped, overloaded, cut off) is asked nothing
//! more, its figures are `?` (`did not answer within 1s`; `null` in JSON,
//! where its broker line has `"answered": false`), and a `% broker ...
//! did not answer` line on stderr says so.
//! The dump still shows everything else: it ends within about a second
//! whatever the brokers do.
//!
//! Partitions that a member owns but that have nothing committed yet are
//! listed too, as committed `none`, so that a group that has just started
//! shows its whole assignment.
//!
//! Members and owners show their session: in a directory, the lease's age
//! against its timeout (`0.3s/10s`), marked `expired` once the holder has
//! been silent for longer. ZooKeeper keeps no lease: an entry lives as
//! long as its holder's session, which the ensemble ends after the
//! holder's session timeout, a number only the holder knows; the cell
//! says `zk session`, and the JSON lease fields (`lease_age_ms`,
//! `session_timeout_ms`) are null. Owners show their claim's generation
//! (on ZooKeeper, the zxid that created the owner znode).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use crate::coord::broker_config;
use crate::coord::offsets_topic::TopicRegistry;
use crate::coord::{BrokerInfo, Lease, MemberInfo, Owner, PartitionState, Registry, ZkRegistry};
use crate::protocol::{ELSEWHERE, OFFLINE};

use super::ask::{say_silent, Answers};
use super::Say;

/// One row of the registry's offsets: a group's committed offset and lag.
struct OffsetRow {
    group: String,
    topic: String,
    partition: u32,
    committed: Result<u64, String>,
    end: Option<u64>,
    owner: Option<Owner>,
}

/// A partition's replication state, as the registry holds it.
struct StateRow {
    topic: String,
    partition: u32,
    /// Its replicas, the preferred leader first.
    replicas: Vec<String>,
    /// Its state and the state's version, or why it cannot be read.
    state: Result<(PartitionState, u64), String>,
    /// Its high watermark, from its leader, or why it is not known.
    high_watermark: Result<u64, String>,
}

/// What a registry holds, read once and then printed.
/// A topic's own configs, by name, or why they cannot be read.
type OwnConfigs = Result<BTreeMap<String, String>, String>;

struct Snapshot {
    brokers: Vec<BrokerInfo>,
    /// The partitions that have a replication state.
    states: Vec<StateRow>,
    /// Each topic's own configs (or why they cannot be read), by topic.
    configs: Configs,
    /// The broker configs set at runtime, by entry (`default`, or a
    /// broker's node id), named as brokers name them.
    broker_configs: Configs,
    /// Each group's members whose process lives, as (group, member,
    /// lease).
    members: Vec<(String, MemberInfo, Lease)>,
    rows: Vec<OffsetRow>,
    /// Whether the registry keeps leases (a directory does; on ZooKeeper
    /// an entry lives with its holder's session).
    leases: bool,
    /// Whether each broker asked answered within
    /// [`ANSWER_TIMEOUT`](super::ask::ANSWER_TIMEOUT), by id (a broker not
    /// asked is not here).
    answered: BTreeMap<String, bool>,
}

/// End offsets, asked of the broker that holds each partition (its
/// leader, for a partition with a replication state), once per broker and
/// topic, every broker at once (see [`Answers::ask`]).
struct EndOffsets<'a> {
    brokers: &'a [BrokerInfo],
    /// What the brokers asked said.
    answers: Answers,
    /// The leader of each partition whose state names one.
    leaders: BTreeMap<(String, u32), String>,
}

impl<'a> EndOffsets<'a> {
    /// The broker to ask about `partition` of `topic`: its leader if its
    /// state names one (`None` if that one is not registered), else the
    /// broker that says it holds it.
    fn holder(&self, topic: &str, partition: u32) -> Option<&'a BrokerInfo> {
        let brokers = self.brokers;
        match self.leaders.get(&(topic.to_string(), partition)) {
            Some(leader) => brokers.iter().find(|b| &b.id == leader),
            None => brokers.iter().find(|b| {
                b.topics
                    .get(topic)
                    .is_some_and(|held| held.contains(&partition))
            }),
        }
    }

    /// The (start, end) offsets `broker` reported for `partition` of
    /// `topic`, or why there are none.
    fn offsets(
        &self,
        broker: &BrokerInfo,
        topic: &str,
        partition: u32,
    ) -> Result<(u64, u64), String> {
        match self.answers.offsets(&broker.id, topic) {
            Some(Ok(offsets)) => offsets
                .get(partition as usize)
                .copied()
                .ok_or_else(|| format!("{} has no partition {partition}", broker.id)),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("{} was not asked", broker.id)),
        }
    }

    /// The end offset of a partition for a group's lag: from its leader,
    /// else from the broker that says it holds it; `None` where neither
    /// answers with one.
    fn end(&self, topic: &str, partition: u32) -> Option<u64> {
        let broker = self.holder(topic, partition)?;
        served_end(self.offsets(broker, topic, partition).ok()?).ok()
    }

    /// The high watermark of a partition whose leader is `leader` (`None`:
    /// offline), from the leader's metadata, or why it is not known.
    fn high_watermark(
        &self,
        topic: &str,
        partition: u32,
        leader: Option<&str>,
    ) -> Result<u64, String> {
        let Some(leader) = leader else {
            return Err("offline: no leader".into());
        };
        let Some(broker) = self.brokers.iter().find(|b| b.id == leader) else {
            return Err(format!(
                "the leader {leader} is not registered: not running"
            ));
        };
        served_end(self.offsets(broker, topic, partition)?).map_err(|why| format!("{leader} {why}"))
    }
}

/// The end offset of a partition's (start, end) in a broker's metadata,
/// or why that broker does not serve it.
fn served_end((start, end): (u64, u64)) -> Result<u64, &'static str> {
    match start {
        ELSEWHERE => Err("does not serve it (it does not lead it now)"),
        OFFLINE => Err("holds it offline (damaged: see klog-recover)"),
        _ => Ok(end),
    }
}

/// Prints the registry in `dir`: tables on stdout, or one JSON object per
/// line with `json`.
pub fn show(dir: &Path, json: bool, quiet: bool) -> anyhow::Result<()> {
    if crate::coord::zk_address(dir).is_none() && !dir.join("brokers").is_dir() {
        anyhow::bail!("not a registry (no brokers/ inside)");
    }
    let registry = open_to_look(dir)?;
    // Committed offsets are the offsets topic's once it is placed.
    let topic = crate::coord::offsets_topic::OFFSETS_TOPIC;
    let offsets: Arc<dyn Registry> = match registry.placement(topic)? {
        Some(_) => Arc::new(TopicRegistry::new(Arc::clone(&registry), LOOK_TIMEOUT)),
        None => Arc::clone(&registry),
    };
    let mut snapshot = read(&*registry, &*offsets)?;
    snapshot.leases = crate::coord::zk_address(dir).is_none();
    let say = Say { quiet };
    say_silent(
        &snapshot.answered,
        &snapshot.brokers,
        "what it would tell is ?",
        say,
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        print_json(&mut out, &snapshot)
    } else {
        print_tables(&mut out, &snapshot)
    }
}

/// How long a look at a ZooKeeper registry waits for a session: a look
/// holds nothing, so an ensemble that is not there is said within seconds
/// (a broker or a member waits its whole session timeout).
const LOOK_TIMEOUT: Duration = Duration::from_secs(3);

/// Opens the registry `registry` only to look at it (see
/// [`crate::coord::open_read_only`]), giving up on a ZooKeeper ensemble
/// after [`LOOK_TIMEOUT`]. Also `-L --registry`'s.
pub(crate) fn open_to_look(registry: &Path) -> crate::Result<Arc<dyn Registry>> {
    match crate::coord::zk_address(registry) {
        Some(address) => Ok(Arc::new(ZkRegistry::open_read_only(address, LOOK_TIMEOUT)?)),
        None => crate::coord::open_read_only(registry),
    }
}

/// What the registry holds, with the committed offsets `offsets` holds
/// (the registry, or the offsets topic).
fn read(registry: &dyn Registry, offsets: &dyn Registry) -> anyhow::Result<Snapshot> {
    let brokers = registry.brokers()?;
    let mut ends = EndOffsets {
        brokers: &brokers,
        answers: Answers::default(),
        leaders: BTreeMap::new(),
    };
    let mut states = state_rows(registry)?;
    for row in &states {
        if let Ok((state, _)) = &row.state {
            if let Some(leader) = &state.leader {
                ends.leaders
                    .insert((row.topic.clone(), row.partition), leader.clone());
            }
        }
    }
    let mut members = Vec::new();
    let mut rows = Vec::new();
    for group in registry.groups()? {
        for (m, lease) in registry.sessions(&group)? {
            members.push((group.clone(), m, lease));
        }
        group_rows((registry, offsets), &group, &brokers, &mut rows)?;
    }
    // Everything read from the registry: now ask each broker, once.
    let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let partitions: Vec<(String, u32)> = (ends.leaders.keys().cloned())
        .chain(rows.iter().map(|r| (r.topic.clone(), r.partition)))
        .collect();
    for (topic, partition) in &partitions {
        if let Some(broker) = ends.holder(topic, *partition) {
            wanted
                .entry(broker.id.clone())
                .or_default()
                .insert(topic.clone());
        }
    }
    ends.answers = Answers::ask(&brokers, &wanted);
    for row in &mut states {
        if let Ok((state, _)) = &row.state {
            row.high_watermark =
                ends.high_watermark(&row.topic, row.partition, state.leader.as_deref());
        }
    }
    for row in &mut rows {
        row.end = ends.end(&row.topic, row.partition);
    }
    let (configs, broker_configs) = own_configs(registry)?;
    Ok(Snapshot {
        answered: ends.answers.answered,
        brokers,
        states,
        configs,
        broker_configs,
        members,
        rows,
        leases: true,
    })
}

/// The replication state of every partition of every placed topic that
/// has one; a placement or a state that cannot be read is its row's error.
fn state_rows(registry: &dyn Registry) -> anyhow::Result<Vec<StateRow>> {
    let mut rows = Vec::new();
    for topic in registry.topics()? {
        let placement = match registry.placement(&topic) {
            Ok(Some(placement)) => placement,
            Ok(None) => continue,
            Err(e) => {
                rows.push(StateRow {
                    topic,
                    partition: 0,
                    replicas: Vec::new(),
                    state: Err(e.to_string()),
                    high_watermark: Err("no state".into()),
                });
                continue;
            }
        };
        for partition in 0..placement.brokers.len() as u32 {
            let state = match registry.partition_state(&topic, partition) {
                Ok(Some(state)) => Ok(state),
                Ok(None) => continue,
                Err(e) => Err(e.to_string()),
            };
            let replicas = placement.replicas_of(partition).unwrap_or_default();
            rows.push(StateRow {
                topic: topic.clone(),
                partition,
                replicas: replicas.to_vec(),
                state,
                high_watermark: Err("not asked yet".into()),
            });
        }
    }
    Ok(rows)
}

/// A group's rows: its committed offsets, then the partitions it owns with
/// nothing committed yet (among those the `brokers` hold); their end
/// offsets are asked later.
fn group_rows(
    (registry, offsets): (&dyn Registry, &dyn Registry),
    group: &str,
    brokers: &[BrokerInfo],
    rows: &mut Vec<OffsetRow>,
) -> anyhow::Result<()> {
    let mut seen = BTreeSet::new();
    let committed = offsets
        .offsets(group)
        .with_context(|| format!("cannot read the committed offsets of group {group}"))?;
    for (topic, partition, committed) in committed {
        seen.insert((topic.clone(), partition));
        rows.push(OffsetRow {
            owner: registry.owner(group, &topic, partition),
            end: None,
            group: group.to_string(),
            topic,
            partition,
            committed: committed.map_err(|e| e.to_string()),
        });
    }
    for (topic, count) in brokers.iter().flat_map(|b| b.topics.iter()) {
        for &p in count {
            if seen.contains(&(topic.clone(), p)) {
                continue;
            }
            if let Some(owner) = registry.owner(group, topic, p) {
                seen.insert((topic.clone(), p));
                rows.push(OffsetRow {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: p,
                    committed: Err("none".into()),
                    end: None,
                    owner: Some(owner),
                });
            }
        }
    }
    Ok(())
}

fn print_json(out: &mut impl Write, snapshot: &Snapshot) -> anyhow::Result<()> {
    for b in &snapshot.brokers {
        writeln!(
            out,
            "{}",
            json!({"type": "broker", "id": b.id, "host": b.host, "port": b.port, "pid": b.pid, "topics": b.topics,
                "answered": snapshot.answered.get(&b.id)})
        )?;
    }
    for r in &snapshot.states {
        let mut line = json!({"type": "partition", "topic": r.topic, "partition": r.partition,
            "replicas": r.replicas});
        match &r.state {
            Ok((state, version)) => {
                line["leader"] = json!(state.leader);
                line["leader_epoch"] = json!(state.leader_epoch);
                line["isr"] = json!(state.isr);
                line["version"] = json!(version);
                line["high_watermark"] = json!(r.high_watermark.as_ref().ok());
                line["high_watermark_error"] = json!(r.high_watermark.as_ref().err());
            }
            Err(e) => line["error"] = json!(e),
        }
        writeln!(out, "{line}")?;
    }
    for (topic, configs) in &snapshot.configs {
        let line = match configs {
            Ok(configs) => json!({"type": "topic_configs", "topic": topic, "configs": configs}),
            Err(e) => json!({"type": "topic_configs", "topic": topic, "error": e}),
        };
        writeln!(out, "{line}")?;
    }
    for (entry, configs) in &snapshot.broker_configs {
        let line = match configs {
            Ok(configs) => json!({"type": "broker_configs", "broker": entry, "configs": configs}),
            Err(e) => json!({"type": "broker_configs", "broker": entry, "error": e}),
        };
        writeln!(out, "{line}")?;
    }
    for (group, m, lease) in &snapshot.members {
        let mut line = json!({"type": "member", "group": group, "member": m.member, "pid": m.pid, "topics": m.topics});
        add_lease(&mut line, snapshot.leases.then_some(lease));
        writeln!(out, "{line}")?;
    }
    for r in &snapshot.rows {
        if let Some(owner) = &r.owner {
            let mut line = json!({"type": "owner", "group": r.group, "topic": r.topic, "partition": r.partition,
                "member": owner.member, "generation": owner.generation});
            add_lease(&mut line, snapshot.leases.then_some(&owner.lease));
            writeln!(out, "{line}")?;
        }
        if let Ok(c) = r.committed {
            writeln!(
                out,
                "{}",
                json!({"type": "offset", "group": r.group, "topic": r.topic, "partition": r.partition,
                "committed": c, "end": r.end, "lag": r.end.map(|e| e.saturating_sub(c))})
            )?;
        }
    }
    Ok(())
}

/// Adds a lease's fields to a JSON line: `lease_age_ms`, `expired`, and
/// `session_timeout_ms` (null for a lease that never expires); the first
/// two null and `expired` false where there is no lease (ZooKeeper).
fn add_lease(line: &mut serde_json::Value, lease: Option<&Lease>) {
    let Some(lease) = lease else {
        line["session_timeout_ms"] = json!(null);
        line["lease_age_ms"] = json!(null);
        line["expired"] = json!(false);
        return;
    };
    let timeout_ms = u64::try_from(lease.timeout.as_millis())
        .ok()
        .filter(|&ms| ms < u64::from(u32::MAX));
    line["session_timeout_ms"] = json!(timeout_ms);
    line["lease_age_ms"] = json!(lease.age.as_millis() as u64);
    line["expired"] = json!(lease.expired());
}

/// A lease for a table: `0.3s/10s`, `12.1s/10s expired`; `zk session`
/// where there is none (ZooKeeper).
fn lease_cell(lease: Option<&Lease>) -> String {
    let Some(lease) = lease else {
        return "zk session".into();
    };
    let age = format!("{:.1}s", lease.age.as_secs_f64());
    if lease.timeout.as_millis() >= u128::from(u32::MAX) {
        return format!("{age}/none");
    }
    let timeout = format!("{}s", lease.timeout.as_secs_f64());
    if lease.expired() {
        format!("{age}/{timeout} expired")
    } else {
        format!("{age}/{timeout}")
    }
}

/// The partitions' replication states: leader `offline` while none, and a
/// state that cannot be read says why in place of its leader; a high
/// watermark not known is `?` and why.
fn states_table(rows: &[StateRow]) -> comfy_table::Table {
    let mut t = super::table(&[
        "topic",
        "partition",
        "replicas",
        "leader",
        "epoch",
        "isr",
        "high watermark",
    ]);
    for r in rows {
        let (leader, epoch, isr, high_watermark) = match &r.state {
            Ok((state, _)) => (
                state.leader.clone().unwrap_or_else(|| "offline".into()),
                state.leader_epoch.to_string(),
                state.isr.join(","),
                match &r.high_watermark {
                    Ok(hw) => hw.to_string(),
                    Err(why) => format!("? ({why})"),
                },
            ),
            Err(e) => (e.clone(), "?".into(), "?".into(), "?".into()),
        };
        t.add_row([
            r.topic.clone(),
            r.partition.to_string(),
            r.replicas.join(","),
            leader,
            epoch,
            isr,
            high_watermark,
        ]);
    }
    t
}

/// The registry's topic configs and broker configs set at runtime, each
/// entry read (or why it cannot be), by name.
type Configs = Vec<(String, OwnConfigs)>;

/// Every topic's own configs and the broker configs set at runtime.
fn own_configs(registry: &dyn Registry) -> anyhow::Result<(Configs, Configs)> {
    let configs: Configs = (registry
        .configs(crate::coord::topic_config::KIND)?
        .into_iter())
    .map(|topic| {
        let read = crate::coord::topic_config::read(registry, &topic);
        let read = read
            .map(|c| c.overrides().clone())
            .map_err(|e| e.to_string());
        (topic, read)
    })
    .collect();
    let broker_configs: Configs = (registry.configs(broker_config::KIND)?.into_iter())
        .map(|entry| {
            let read = broker_config::read(registry, &entry).map(|c| {
                let named = c.overrides().iter();
                named
                    .map(|(n, v)| {
                        (
                            broker_config::broker_name(n).unwrap_or(n).to_string(),
                            v.clone(),
                        )
                    })
                    .collect()
            });
            (entry, read.map_err(|e| e.to_string()))
        })
        .collect();
    Ok((configs, broker_configs))
}

/// Configs of the registry's own, a row per topic (or broker entry):
/// `header` names the two columns.
fn configs_table(header: &[&str; 2], configs: &[(String, OwnConfigs)]) -> comfy_table::Table {
    let mut t = super::table(header);
    for (topic, configs) in configs {
        let shown = match configs {
            Ok(c) => c
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            Err(e) => vec![e.clone()],
        };
        t.add_row([topic.clone(), shown.join(", ")]);
    }
    t
}

/// The tables of topic and broker configs, each once it has a row.
fn print_configs(out: &mut impl Write, snapshot: &Snapshot) -> anyhow::Result<()> {
    if !snapshot.configs.is_empty() {
        let header = ["topic", "configs (its own)"];
        writeln!(out, "{}", configs_table(&header, &snapshot.configs))?;
    }
    if !snapshot.broker_configs.is_empty() {
        let header = ["brokers", "configs set at runtime"];
        writeln!(out, "{}", configs_table(&header, &snapshot.broker_configs))?;
    }
    Ok(())
}

fn print_tables(out: &mut impl Write, snapshot: &Snapshot) -> anyhow::Result<()> {
    let mut t = super::table(&["broker", "address", "pid", "topics [partitions held]"]);
    for b in &snapshot.brokers {
        let topics: Vec<String> = b.topics.iter().map(|(t, n)| format!("{t} {n:?}")).collect();
        t.add_row([b.id.clone(), b.addr(), b.pid.to_string(), topics.join(", ")]);
    }
    writeln!(out, "{t}")?;
    if !snapshot.states.is_empty() {
        writeln!(out, "{}", states_table(&snapshot.states))?;
    }
    print_configs(out, snapshot)?;
    let mut t = super::table(&["group", "member", "pid", "topics", "lease"]);
    for (group, m, lease) in &snapshot.members {
        t.add_row([
            group.clone(),
            m.member.clone(),
            m.pid.to_string(),
            m.topics.join(", "),
            lease_cell(snapshot.leases.then_some(lease)),
        ]);
    }
    writeln!(out, "{t}")?;
    let mut t = super::table(&[
        "group",
        "topic",
        "partition",
        "owner",
        "generation",
        "lease",
        "committed",
        "end",
        "lag",
    ]);
    for r in &snapshot.rows {
        let committed = match &r.committed {
            Ok(c) => c.to_string(),
            Err(e) => e.clone(),
        };
        let lag = match (&r.committed, r.end) {
            (Ok(c), Some(e)) => e.saturating_sub(*c).to_string(),
            _ => "?".into(),
        };
        t.add_row([
            r.group.clone(),
            r.topic.clone(),
            r.partition.to_string(),
            r.owner
                .as_ref()
                .map_or_else(|| "-".into(), |o| o.member.clone()),
            r.owner
                .as_ref()
                .map_or_else(|| "-".into(), |o| o.generation.to_string()),
            r.owner.as_ref().map_or_else(
                || "-".into(),
                |o| lease_cell(snapshot.leases.then_some(&o.lease)),
            ),
            committed,
            r.end.map_or_else(|| "?".into(), |e| e.to_string()),
            lag,
        ]);
    }
    writeln!(out, "{t}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(age_ms: u64) -> Lease {
        Lease {
            timeout: std::time::Duration::from_secs(10),
            age: std::time::Duration::from_millis(age_ms),
        }
    }

    fn snapshot() -> Snapshot {
        let broker = BrokerInfo {
            kafka: None,
            id: "b1".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            pid: 7,
            topics: [("t".to_string(), vec![0, 1])].into_iter().collect(),
            principal: None,
        };
        let member = MemberInfo {
            member: "m1".into(),
            pid: 8,
            topics: vec!["t".into()],
            coordinator: None,
        };
        let row = |partition, committed, end| OffsetRow {
            group: "g".into(),
            topic: "t".into(),
            partition,
            committed,
            end,
            owner: Some(Owner {
                member: "m1".into(),
                generation: 3,
                lease: lease(300),
            }),
        };
        Snapshot {
            brokers: vec![broker],
            states: Vec::new(),
            configs: Vec::new(),
            broker_configs: Vec::new(),
            members: vec![("g".into(), member, lease(300))],
            rows: vec![row(0, Ok(5), Some(8)), row(1, Err("none".into()), None)],
            leases: true,
            answered: BTreeMap::new(),
        }
    }

    #[test]
    fn without_leases_the_session_is_said_and_no_timeout_is_made_up() {
        let snapshot = Snapshot {
            leases: false,
            ..snapshot()
        };
        let mut out = Vec::new();
        print_tables(&mut out, &snapshot).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("zk session").count(), 3, "{text}");
        assert!(!text.contains("s/10s"), "{text}");
        let mut out = Vec::new();
        print_json(&mut out, &snapshot).unwrap();
        for line in String::from_utf8(out).unwrap().lines() {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            if ["member", "owner"].contains(&line["type"].as_str().unwrap()) {
                assert!(line["lease_age_ms"].is_null(), "{line}");
                assert!(line["session_timeout_ms"].is_null(), "{line}");
                assert_eq!(line["expired"], false, "{line}");
            }
        }
    }

    #[test]
    fn json_lines_give_lag_only_where_an_offset_is_committed() {
        let mut out = Vec::new();
        print_json(&mut out, &snapshot()).unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["broker", "member", "owner", "offset", "owner"]);
        assert_eq!(lines[3]["committed"], 5);
        assert_eq!(lines[3]["lag"], 3);
        assert_eq!(lines[4]["partition"], 1);
        assert_eq!(lines[2]["generation"], 3);
        assert_eq!(lines[2]["lease_age_ms"], 300);
        assert_eq!(lines[2]["session_timeout_ms"], 10_000);
        assert_eq!(lines[1]["expired"], false);
    }

    fn with_states() -> Snapshot {
        let row = |partition, state, high_watermark| StateRow {
            topic: "t".into(),
            partition,
            replicas: vec!["b1".into(), "b2".into()],
            state,
            high_watermark,
        };
        let online = PartitionState {
            leader: Some("b2".into()),
            leader_epoch: 7,
            isr: vec!["b2".into(), "b1".into()],
        };
        let offline = PartitionState {
            leader: None,
            leader_epoch: 8,
            isr: vec!["b1".into()],
        };
        Snapshot {
            states: vec![
                row(0, Ok((online, 3)), Ok(42)),
                row(1, Ok((offline, 4)), Err("offline: no leader".into())),
                row(2, Err("t-2/junk: corrupt".into()), Err("no state".into())),
            ],
            ..snapshot()
        }
    }

    #[test]
    fn each_partition_with_a_state_shows_its_leader_epoch_isr_and_high_watermark() {
        let mut out = Vec::new();
        print_tables(&mut out, &with_states()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<Vec<String>> = text
            .lines()
            .map(|line| {
                line.split(['│', '┆'])
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .filter(|c| c.len() == 7)
            .collect();
        assert_eq!(
            rows,
            [
                [
                    "topic",
                    "partition",
                    "replicas",
                    "leader",
                    "epoch",
                    "isr",
                    "high watermark"
                ],
                ["t", "0", "b1,b2", "b2", "7", "b2,b1", "42"],
                [
                    "t",
                    "1",
                    "b1,b2",
                    "offline",
                    "8",
                    "b1",
                    "? (offline: no leader)"
                ],
                ["t", "2", "b1,b2", "t-2/junk: corrupt", "?", "?", "?"],
            ],
            "{text}"
        );
        let mut out = Vec::new();
        print_json(&mut out, &with_states()).unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &serde_json::Value| l["type"] == "partition")
            .collect();
        assert_eq!(
            lines[0],
            json!({"type": "partition", "topic": "t", "partition": 0, "replicas": ["b1", "b2"],
                "leader": "b2", "leader_epoch": 7, "isr": ["b2", "b1"], "version": 3,
                "high_watermark": 42, "high_watermark_error": null})
        );
        assert!(lines[1]["leader"].is_null(), "{}", lines[1]);
        assert!(lines[1]["high_watermark"].is_null(), "{}", lines[1]);
        assert_eq!(lines[1]["high_watermark_error"], "offline: no leader");
        assert_eq!(lines[2]["error"], "t-2/junk: corrupt");
        // No state anywhere: no table.
        let mut out = Vec::new();
        print_tables(&mut out, &snapshot()).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("epoch"));
    }

    #[test]
    fn tables_show_unknown_ends_and_lags_as_question_marks() {
        let mut out = Vec::new();
        print_tables(&mut out, &snapshot()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let cells = |line: &str| -> Vec<String> {
            line.split(['│', '┆'])
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        };
        let rows: Vec<Vec<String>> = text.lines().map(cells).filter(|c| c.len() == 9).collect();
        assert_eq!(
            rows[1],
            ["g", "t", "0", "m1", "3", "0.3s/10s", "5", "8", "3"]
        );
        assert_eq!(
            rows[2],
            ["g", "t", "1", "m1", "3", "0.3s/10s", "none", "?", "?"]
        );
        assert_eq!(lease_cell(Some(&lease(12_100))), "12.1s/10s expired");
        assert!(text.contains("127.0.0.1:9092"), "{text}");
    }

    #[test]
    fn a_broker_that_does_not_serve_a_partition_gives_no_end_offset() {
        assert_eq!(served_end((3, 50)), Ok(50));
        assert!(served_end((ELSEWHERE, ELSEWHERE))
            .unwrap_err()
            .contains("does not lead"));
        assert!(served_end((OFFLINE, OFFLINE))
            .unwrap_err()
            .contains("offline"));
    }
}
