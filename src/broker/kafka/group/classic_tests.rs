//! The classic protocol driven as Kafka clients drive it, over the memory
//! registry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::state::{Classic, Member};
use super::super::*;
use crate::coord::mem::MemRegistry;
use crate::coord::{BrokerInfo, MemberInfo};
use crate::kafka::consumer::{ConsumerProtocolAssignment, TopicPartition};

const LONG: Duration = Duration::from_secs(30);

/// A coordinator of broker `id` that is shut down when the test ends, and
/// the lines it logged.
struct Running(Arc<Coordinator>, Arc<Mutex<Vec<String>>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

fn start(registry: &Arc<dyn Registry>, id: &str) -> Running {
    let config = CoordinatorConfig {
        tick: Duration::from_millis(20),
        session_timeout_min: Duration::from_millis(10),
        broker_id: id.into(),
        ..CoordinatorConfig::default()
    };
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&lines);
    let count = |topic: &str| (topic == "t").then_some(4);
    let logger = move |line: std::fmt::Arguments<'_>| log.lock().unwrap().push(line.to_string());
    let c = Coordinator::start(Arc::clone(registry), count, || false, logger, config);
    Running(c.unwrap(), lines)
}

/// A join of `group` offering `protocols`; the leader assigns unless one
/// of them is the broker's.
fn request(group: &str, protocols: &[&str]) -> Join {
    Join {
        group: group.into(),
        member_id: String::new(),
        client_id: "kafkajs".into(),
        session_timeout: LONG,
        rebalance_timeout: Some(Duration::from_secs(2)),
        topics: vec!["t".into()],
        member_id_required: false,
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), format!("meta-{p}").into_bytes()))
            .collect(),
        leader_assigns: eager_protocol(protocols).is_none(),
        owned: Vec::new(),
    }
}

/// A join of group `g` as `member_id` offering `protocols`.
fn join(c: &Coordinator, member_id: &str, protocols: &[&str]) -> Joined {
    c.join(Join {
        member_id: member_id.into(),
        ..request("g", protocols)
    })
}

fn assignment(partitions: &[i32]) -> Vec<u8> {
    let mut out = Vec::new();
    ConsumerProtocolAssignment {
        version: 0,
        assigned_partitions: vec![TopicPartition {
            topic: "t",
            partitions: partitions.to_vec(),
        }],
        user_data: None,
    }
    .encode(&mut out);
    out
}

fn member(protocols: &[&str]) -> Member {
    let mut member = Member::new(None, LONG, LONG, std::time::Instant::now());
    member.protocols = protocols
        .iter()
        .map(|p| (p.to_string(), Vec::new()))
        .collect();
    member
}

#[test]
fn the_protocol_is_the_one_most_members_prefer_among_those_all_offer() {
    let members: BTreeMap<String, Member> = [
        ("a", member(&["sticky", "custom"])),
        ("b", member(&["custom", "sticky"])),
        ("c", member(&["custom", "sticky", "other"])),
    ]
    .into_iter()
    .map(|(id, m)| (id.to_string(), m))
    .collect();
    assert_eq!(Classic::vote(&members).as_deref(), Some("custom"));
    let apart: BTreeMap<String, Member> = [("a", member(&["x"])), ("b", member(&["y"]))]
        .into_iter()
        .map(|(id, m)| (id.to_string(), m))
        .collect();
    assert_eq!(Classic::vote(&apart), None);
}

/// The leader gets the members' metadata, its SyncGroup's assignments
/// reach each member as sent, and the partitions in them are claimed in
/// the registry for their member.
#[test]
fn the_leader_assigns_and_the_broker_claims_what_it_assigned() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(&registry, "b1");
    let joined = join(&c.0, "", &["RoundRobinAssigner"]);
    assert_eq!(joined.error, NONE, "{joined:?}");
    assert_eq!(joined.protocol, "RoundRobinAssigner");
    assert_eq!(joined.leader_id, joined.member_id, "the only member leads");
    let metadata = b"meta-RoundRobinAssigner".to_vec();
    assert_eq!(joined.members, vec![(joined.member_id.clone(), metadata)]);
    let entry = registry.members("g").unwrap();
    assert_eq!(entry[0].coordinator.as_deref(), Some("b1"));
    let bytes = assignment(&[0, 2, 9]);
    let synced = c.0.sync(&Sync {
        group: "g".into(),
        member_id: joined.member_id.clone(),
        generation: joined.generation,
        assignments: vec![(joined.member_id.clone(), bytes.clone())],
    });
    assert_eq!(synced.error, NONE);
    assert_eq!(
        synced.raw.as_deref(),
        Some(&bytes[..]),
        "as the leader sent it"
    );
    assert_eq!(synced.assignment, vec![("t".to_string(), vec![0, 2])]);
    let owner = |p| registry.owner("g", "t", p).map(|o| o.member);
    assert_eq!(owner(0).as_deref(), Some(joined.member_id.as_str()));
    assert_eq!(owner(2).as_deref(), Some(joined.member_id.as_str()));
    assert_eq!(owner(1), None, "only what was assigned is claimed");
    let codes = c.0.commit(
        "g",
        &joined.member_id,
        joined.generation,
        &[("t".into(), 0, 5)],
    );
    assert_eq!(codes, vec![NONE], "a commit of an assigned partition");
}

/// A member whose assignors the broker runs cannot join a group whose
/// leader assigns, nor the other way round, nor a group with klog members:
/// each refusal is said in the log.
#[test]
fn groups_are_not_mixed_and_the_log_says_why() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(&registry, "b1");
    let leader = join(&c.0, "", &["cooperative-sticky"]);
    assert_eq!(leader.error, NONE);
    let range = join(&c.0, "", &["range"]);
    assert_eq!(range.error, INCONSISTENT_GROUP_PROTOCOL);
    let other = join(&c.0, "", &["sticky"]);
    assert_eq!(
        other.error, INCONSISTENT_GROUP_PROTOCOL,
        "no protocol in common"
    );
    let lines = c.1.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("group g: refused"), "{lines:?}");
    assert!(lines[0].contains("leader assigns"), "{lines:?}");
    assert!(lines[1].contains("none of its assignors"), "{lines:?}");

    let klog = MemberInfo {
        member: "klog-1".into(),
        pid: 1,
        topics: vec!["t".into()],
        coordinator: None,
    };
    let _entry = registry.join("h", &klog, LONG).unwrap();
    let mut j = request("h", &["RoundRobinAssigner"]);
    assert_eq!(c.0.join(j.clone()).error, INCONSISTENT_GROUP_PROTOCOL);
    assert!(c.1.lock().unwrap()[2].contains("klog-1"));
    j = request("g", &["range"]);
    assert_eq!(c.0.join(j).error, INCONSISTENT_GROUP_PROTOCOL);
}

fn broker(id: &str, port: u16) -> BrokerInfo {
    BrokerInfo {
        id: id.into(),
        host: "127.0.0.1".into(),
        port,
        pid: 1,
        topics: BTreeMap::new(),
        kafka: Some(format!("127.0.0.1:{port}")),
        principal: None,
    }
}

/// A group whose leader assigns lives on one broker: FindCoordinator
/// elsewhere points at it, and a join elsewhere is NOT_COORDINATOR.
#[test]
fn a_group_whose_leader_assigns_is_coordinated_by_one_broker() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let _b1 = registry.register_broker(&broker("b1", 1)).unwrap();
    let _b2 = registry.register_broker(&broker("b2", 2)).unwrap();
    let (one, two) = (start(&registry, "b1"), start(&registry, "b2"));
    assert!(one.0.coordinator_of("g").is_none(), "no one holds g yet");
    let joined = join(&two.0, "", &["sticky"]);
    assert_eq!(joined.error, NONE);
    assert_eq!(
        one.0.coordinator_of("g").map(|b| b.id).as_deref(),
        Some("b2")
    );
    assert!(two.0.coordinator_of("g").is_none(), "b2 answers for itself");
    assert_eq!(join(&one.0, "", &["sticky"]).error, NOT_COORDINATOR);
    // Where the broker assigns, every broker coordinates.
    let mut other = join(&one.0, "", &["range"]);
    assert_eq!(
        other.error, INCONSISTENT_GROUP_PROTOCOL,
        "g is the leader's"
    );
    other = two.0.join(request("k", &["range"]));
    assert_eq!(other.error, NONE);
    assert!(one.0.coordinator_of("k").is_none());
}
