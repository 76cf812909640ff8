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

/// Two brokers that took one group at once (b's member joined before b
/// was listed as live; a's, before b's entry showed): b, whose id sorts
/// after a's, makes its members rejoin and sends them to a, so that the
/// group settles on one coordinator (found by review: it rebalanced
/// forever, a's members unable to claim what b's member held).
#[test]
fn two_brokers_that_took_one_group_settle_on_the_first() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let _a = registry.register_broker(&broker("a", 1)).unwrap();
    let (a, b) = (start(&registry, "a"), start(&registry, "b"));
    let c1 = join(&b.0, "", &["sticky"]);
    assert_eq!(c1.error, NONE);
    let synced = b.0.sync(&Sync {
        group: "g".into(),
        member_id: c1.member_id.clone(),
        generation: c1.generation,
        assignments: vec![(c1.member_id.clone(), assignment(&[0, 1, 2, 3]))],
    });
    assert_eq!(synced.error, NONE);
    let c2 = join(&a.0, "", &["sticky"]);
    assert_eq!(c2.error, NONE, "b was not live yet: a took the group too");
    let _b = registry.register_broker(&broker("b", 2)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while b.0.heartbeat("g", &c1.member_id, c1.generation) == NONE {
        assert!(
            std::time::Instant::now() < deadline,
            "b never let its member go"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rejoined = join(&b.0, &c1.member_id, &["sticky"]);
    assert_eq!(rejoined.error, NOT_COORDINATOR, "sent to a");
    assert_eq!(b.0.coordinator_of("g").map(|x| x.id).as_deref(), Some("a"));
    let owner = registry.owner("g", "t", 0).map(|o| o.member);
    assert_ne!(
        owner.as_deref(),
        Some(c1.member_id.as_str()),
        "its claims went with it"
    );
}

/// A cooperative member that rejoins keeps the claims of the partitions
/// it says it owns (KIP-429), and only those.
#[test]
fn a_cooperative_member_keeps_what_it_still_owns_as_it_rejoins() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(&registry, "b1");
    let joined = join(&c.0, "", &["cooperative-sticky"]);
    let synced = c.0.sync(&Sync {
        group: "g".into(),
        member_id: joined.member_id.clone(),
        generation: joined.generation,
        assignments: vec![(joined.member_id.clone(), assignment(&[0, 1, 2]))],
    });
    assert_eq!(synced.error, NONE);
    let rejoined = c.0.join(Join {
        member_id: joined.member_id.clone(),
        owned: vec![("t".into(), 0), ("t".into(), 2)],
        ..request("g", &["cooperative-sticky"])
    });
    assert_eq!(rejoined.error, NONE);
    let owner = |p| registry.owner("g", "t", p).map(|o| o.member);
    assert_eq!(owner(0).as_deref(), Some(joined.member_id.as_str()), "kept");
    assert_eq!(owner(2).as_deref(), Some(joined.member_id.as_str()), "kept");
    assert_eq!(owner(1), None, "given up: not owned any more");
}

/// A member's protocol metadata is bounded, and so are the bytes the
/// broker keeps for all such members (found by review: 6 joins of 60 MiB
/// each grew the broker by 360 MiB, kept after their connections closed).
#[test]
fn the_metadata_kept_for_members_is_bounded() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(&registry, "b1");
    let with = |group: &str, bytes: usize| {
        c.0.join(Join {
            protocols: vec![("sticky".into(), vec![7; bytes])],
            ..request(group, &["sticky"])
        })
    };
    let huge = with("g", MEMBER_METADATA_BYTES_MAX + 1);
    assert_eq!(huge.error, INVALID_REQUEST);
    let each = MEMBER_METADATA_BYTES_MAX - 100;
    let fit = CLASSIC_BYTES_MAX / MEMBER_METADATA_BYTES_MAX;
    for i in 0..fit {
        assert_eq!(with(&format!("g{i}"), each).error, NONE, "member {i}");
    }
    let past = with("one-more", each);
    assert_eq!(past.error, GROUP_MAX_SIZE_REACHED);
    assert!(c
        .1
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("is all the broker keeps")));
}

/// OffsetDelete of partitions that do not exist, or that have no offset,
/// writes nothing in the registry (found by review: one request of 5000
/// made-up partitions made 20,000 registry entries).
#[test]
fn offset_delete_of_partitions_made_up_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let registry: Arc<dyn Registry> =
        Arc::new(crate::coord::dir::DirRegistry::open(dir.path()).unwrap());
    let c = start(&registry, "b1");
    let claim = registry.claim("g", "t", 1, "m", LONG).unwrap().unwrap();
    registry.store_offset("g", "t", 1, 5, &claim).unwrap();
    drop(claim);
    let count = || walk(dir.path());
    let before = count();
    let asked: Vec<(String, i32)> = (0..500)
        .map(|p| ("made-up".to_string(), i32::MAX - p))
        .chain([("t".to_string(), 9), ("t".to_string(), 2)])
        .collect();
    let (error, codes) = c.0.delete_offsets("g", &asked);
    assert_eq!(error, NONE);
    assert!(
        codes[..501]
            .iter()
            .all(|c| *c == UNKNOWN_TOPIC_OR_PARTITION),
        "{codes:?}"
    );
    assert_eq!(codes[501], NONE, "an existing partition with no offset");
    assert_eq!(count(), before, "no registry entry made");
    let (_, deleted) = c.0.delete_offsets("g", &[("t".to_string(), 1)]);
    assert_eq!(deleted, [NONE]);
    assert_eq!(registry.committed("g", "t", 1).unwrap(), None);
}

/// Files and directories under `dir`.
fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| 1 + walk(&e.path()))
            .sum()
    })
}
