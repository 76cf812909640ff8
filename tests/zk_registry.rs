//! The registry's ZooKeeper backend (`klog::coord::ZkRegistry`) against a
//! real ZooKeeper server: the promises of `klog::coord::registry` as the
//! directory backend keeps them, and what sessions add (an expired
//! session loses its entries and its commits, a broker registers again).
//! Skipped with a printed line when ZooKeeper is not installed.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::zk::ZkServer;
use klog::coord::{
    BrokerInfo, MemberInfo, PartitionState, Placement, Registry, SessionState, ZkRegistry,
};
use klog::error::Error;

/// The session timeout of the tests' registries.
const SESSION: Duration = Duration::from_secs(2);

fn open(server: &ZkServer, chroot: &str) -> ZkRegistry {
    ZkRegistry::open(&server.address(chroot), SESSION).expect("open the registry")
}

fn broker(id: &str, port: u16) -> BrokerInfo {
    BrokerInfo {
        kafka: None,
        id: id.into(),
        host: "127.0.0.1".into(),
        port,
        pid: std::process::id(),
        topics: BTreeMap::new(),
        principal: None,
    }
}

fn member(id: &str) -> MemberInfo {
    MemberInfo {
        member: id.into(),
        pid: std::process::id(),
        topics: vec!["t".into()],
        coordinator: None,
    }
}

/// Waits up to 15 s for `done`, failing with `what`.
fn eventually(what: &str, done: impl FnMut() -> bool) {
    common::eventually(what, Duration::from_secs(15), done);
}

#[test]
fn a_live_broker_id_is_refused_clearly_and_freed_with_its_handle() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (
        open(&server, "/brokers-test"),
        open(&server, "/brokers-test"),
    );
    let held = one.register_broker(&broker("b1", 9001)).unwrap();
    let refused = two.register_broker(&broker("b1", 9002)).unwrap_err();
    assert!(
        matches!(refused, Error::HeldElsewhere { .. }),
        "{refused:?}"
    );
    let message = refused.to_string();
    assert!(
        message.starts_with("broker b1 is held by another live session (ZooKeeper session 0x")
            && message.ends_with(&format!("in {}", server.address("/brokers-test"))),
        "{message}"
    );
    // The refusal erased nothing.
    assert_eq!(two.brokers().unwrap(), [broker("b1", 9001)]);
    let mut info = broker("b1", 9001);
    info.topics.insert("t".into(), vec![0, 2]);
    held.update(&info).unwrap();
    assert_eq!(two.brokers().unwrap(), [info]);
    drop(held);
    assert_eq!(two.brokers().unwrap(), []);
    let _now = two.register_broker(&broker("b1", 9002)).unwrap();
    assert_eq!(one.brokers().unwrap(), [broker("b1", 9002)]);
}

#[test]
fn ownership_is_exclusive_and_each_claim_has_a_higher_generation() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/owners-test"), open(&server, "/owners-test"));
    let a = one.claim("g", "t", 0, "a", SESSION).unwrap().unwrap();
    assert!(two.claim("g", "t", 0, "b", SESSION).unwrap().is_none());
    // Nor can the same process claim it twice.
    assert!(one.claim("g", "t", 0, "a", SESSION).unwrap().is_none());
    let owner = two.owner("g", "t", 0).unwrap();
    assert_eq!(
        (owner.member.as_str(), owner.generation),
        ("a", a.generation())
    );
    assert!(!owner.lease.expired());
    let first = a.generation();
    drop(a);
    assert_eq!(two.owner("g", "t", 0), None);
    let b = two.claim("g", "t", 0, "b", SESSION).unwrap().unwrap();
    assert!(b.generation() > first, "{} <= {first}", b.generation());
    two.commit("g", "t", 0, 7, &b).unwrap();
    assert_eq!(one.committed("g", "t", 0).unwrap(), Some(7));
    // A commit never lowers the offset.
    two.commit("g", "t", 0, 3, &b).unwrap();
    assert_eq!(one.committed("g", "t", 0).unwrap(), Some(7));
    assert_eq!(one.groups().unwrap(), ["g"]);
    let offsets: Vec<(String, u32, u64)> = one
        .offsets("g")
        .unwrap()
        .into_iter()
        .map(|(t, p, o)| (t, p, o.unwrap()))
        .collect();
    assert_eq!(offsets, [("t".to_string(), 0, 7)]);
}

#[test]
fn an_expired_session_loses_its_claims_and_its_commits_are_refused() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/fence-test"), open(&server, "/fence-test"));
    let joined = one.join("g", &member("a"), SESSION).unwrap();
    let a = one.claim("g", "t", 0, "a", SESSION).unwrap().unwrap();
    one.commit("g", "t", 0, 5, &a).unwrap();
    assert_eq!(one.session(), SessionState::Alive);

    one.stall_session(SESSION + Duration::from_secs(2));
    eventually("the other session sees the claim gone", || {
        two.owner("g", "t", 0).is_none()
    });
    let b = two.claim("g", "t", 0, "b", SESSION).unwrap().unwrap();
    assert!(b.generation() > a.generation());
    two.commit("g", "t", 0, 9, &b).unwrap();

    // The old holder learns it at its next renewal or commit.
    eventually("the expired session's handles say so", || {
        matches!(a.renew(), Err(Error::SessionLost { .. }))
    });
    let late = one.commit("g", "t", 0, 20, &a).unwrap_err();
    assert!(matches!(late, Error::SessionLost { .. }), "{late:?}");
    assert!(matches!(joined.renew(), Err(Error::SessionLost { .. })));
    assert_eq!(two.committed("g", "t", 0).unwrap(), Some(9));
    // Joining again opens a new session.
    drop(joined);
    let again = one.join("g", &member("a"), SESSION).unwrap();
    again.renew().unwrap();
    assert_eq!(one.session(), SessionState::Alive);
    let members: Vec<String> = two
        .members("g")
        .unwrap()
        .into_iter()
        .map(|m| m.member)
        .collect();
    assert_eq!(members, ["a"]);
}

#[test]
fn a_broker_whose_session_expired_registers_again() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/rereg-test"), open(&server, "/rereg-test"));
    let _held = one.register_broker(&broker("b1", 9001)).unwrap();
    one.stall_session(SESSION + Duration::from_secs(2));
    eventually("the broker is gone with its session", || {
        two.brokers().unwrap().is_empty()
    });
    eventually("the broker registers again in a new session", || {
        two.brokers().unwrap() == [broker("b1", 9001)]
    });
}

#[test]
fn an_offset_is_reset_only_while_no_member_owns_the_partition() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let reg = open(&server, "/reset-test");
    let a = reg.claim("g", "t", 1, "a", SESSION).unwrap().unwrap();
    reg.commit("g", "t", 1, 50, &a).unwrap();
    let refused = reg.reset_offset("g", "t", 1, 0).unwrap_err();
    assert!(matches!(refused, Error::GroupActive { .. }), "{refused:?}");
    assert!(refused.to_string().contains("member a"), "{refused}");
    drop(a);
    reg.reset_offset("g", "t", 1, 10).unwrap();
    assert_eq!(reg.committed("g", "t", 1).unwrap(), Some(10));
    // A reset of a partition never committed creates its offset, and
    // leaves no owner behind.
    reg.reset_offset("g", "t", 2, 4).unwrap();
    assert_eq!(reg.committed("g", "t", 2).unwrap(), Some(4));
    assert_eq!(reg.owner("g", "t", 2), None);
    reg.claim("g", "t", 2, "b", SESSION).unwrap().unwrap();
}

#[test]
fn an_offset_is_deleted_only_while_no_member_owns_the_partition() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let reg = open(&server, "/delete-test");
    let a = reg.claim("g", "t", 1, "a", SESSION).unwrap().unwrap();
    reg.commit("g", "t", 1, 50, &a).unwrap();
    let refused = reg.delete_offset("g", "t", 1).unwrap_err();
    assert!(matches!(refused, Error::GroupActive { .. }), "{refused:?}");
    assert_eq!(reg.committed("g", "t", 1).unwrap(), Some(50));
    drop(a);
    assert!(reg.delete_offset("g", "t", 1).unwrap(), "it had one");
    assert_eq!(reg.committed("g", "t", 1).unwrap(), None);
    assert_eq!(reg.owner("g", "t", 1), None, "no owner left behind");
    assert!(!reg.delete_offset("g", "t", 1).unwrap(), "none left");
    assert!(!reg.delete_offset("g", "t", 2).unwrap(), "never had one");
}

#[test]
fn the_first_placement_wins_and_listings_move_the_change_count() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/place-test"), open(&server, "/place-test"));
    let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let first = one.place_topic("t", 3, &ids(&["b2", "b1"])).unwrap();
    assert_eq!(first.brokers, ids(&["b1", "b2", "b1"]));
    assert_eq!(two.place_topic("t", 1, &ids(&["b9"])).unwrap(), first);
    let rival = Placement::new("t", vec![ids(&["b9"])]);
    assert!(!two.create_placement(&rival).unwrap());
    assert_eq!(one.placement("t").unwrap(), Some(first));

    // A listing arms a watch: another member joining moves the count.
    assert!(two.members("g").unwrap().is_empty());
    let before = two.changes();
    let _a = one.join("g", &member("a"), SESSION).unwrap();
    eventually("the watch on the group's members fires", || {
        two.changes() > before
    });
}

#[test]
fn a_read_only_registry_creates_nothing_and_refuses_changes() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let look = ZkRegistry::open_read_only(&server.address("/ro-test/none"), SESSION).unwrap();
    assert!(look.brokers().unwrap().is_empty());
    assert!(look.groups().unwrap().is_empty());
    let refused = look.register_broker(&broker("b1", 1)).unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");
    let above =
        klog::coord::zk::ZkSession::connect(&server.address("/ro-test"), SESSION, SESSION).unwrap();
    assert!(
        above.children("/", SESSION).unwrap().is_empty(),
        "nothing was created under /ro-test"
    );
}

#[test]
fn a_claim_whose_owner_znode_is_gone_cannot_commit() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let reg = open(&server, "/gone-test");
    let a = reg.claim("g", "t", 0, "a", SESSION).unwrap().unwrap();
    reg.commit("g", "t", 0, 5, &a).unwrap();
    // Someone (an operator's zkCli) removes the owner znode behind the
    // member's back: its session lives, but the claim is not its any more.
    let admin =
        klog::coord::zk::ZkSession::connect(&server.address("/gone-test"), SESSION, SESSION)
            .unwrap();
    admin.delete("/consumers/g/owners/t/0", 0, SESSION).unwrap();
    let refused = reg.commit("g", "t", 0, 9, &a).unwrap_err();
    assert!(matches!(refused, Error::Fenced { .. }), "{refused:?}");
    assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(5));
}

#[test]
fn a_create_whose_reply_was_lost_is_recognised_as_its_sessions_own() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (
        open(&server, "/lost-reply-test"),
        open(&server, "/lost-reply-test"),
    );
    one.lose_next_reply();
    let a = one
        .claim("g", "t", 0, "a", SESSION)
        .unwrap()
        .expect("adopted, not a conflict");
    let owner = two.owner("g", "t", 0).unwrap();
    assert_eq!(
        (owner.member.as_str(), owner.generation),
        ("a", a.generation())
    );
    one.commit("g", "t", 0, 4, &a).unwrap();
    assert!(two.claim("g", "t", 0, "b", SESSION).unwrap().is_none());
    one.lose_next_reply();
    let _b = one.register_broker(&broker("b1", 9001)).unwrap();
    one.lose_next_reply();
    let _m = one.join("g", &member("a"), SESSION).unwrap();
    assert_eq!(two.brokers().unwrap(), [broker("b1", 9001)]);
    assert_eq!(two.members("g").unwrap(), [member("a")]);
    // Another session's entry is never taken for one's own.
    two.lose_next_reply();
    let _held = two.claim("g", "t", 1, "b", SESSION).unwrap().unwrap();
    assert!(one.claim("g", "t", 1, "b", SESSION).unwrap().is_none());
}

#[test]
fn a_session_stopped_past_its_timeout_is_never_alive_when_it_runs_again() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let reg = open(&server, "/stopped-test");
    let _a = reg.claim("g", "t", 0, "a", SESSION).unwrap().unwrap();
    assert_eq!(reg.session(), SessionState::Alive);
    // The client's thread stops while the session expires on the server;
    // when it runs again, its connection still looks up for a moment.
    let stalled = Instant::now();
    reg.stall_session(SESSION * 2);
    std::thread::sleep(SESSION + SESSION / 2);
    let state = reg.session();
    assert!(
        stalled.elapsed() >= SESSION * 2,
        "the state was answered without asking the ensemble"
    );
    assert_ne!(state, SessionState::Alive);
    eventually("the session is known lost", || {
        reg.session() == SessionState::Lost
    });
}

fn online(leader: &str, epoch: u64) -> PartitionState {
    PartitionState {
        leader: Some(leader.into()),
        leader_epoch: epoch,
        isr: vec![leader.into()],
    }
}

/// Runs `writers` threads, each with its own session's registry, released
/// together, and returns which of them `attempt` says won.
fn race(
    registries: &[ZkRegistry],
    attempt: impl Fn(&ZkRegistry, usize) -> bool + Sync,
) -> Vec<usize> {
    let barrier = std::sync::Barrier::new(registries.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = registries
            .iter()
            .enumerate()
            .map(|(w, reg)| {
                let (barrier, attempt) = (&barrier, &attempt);
                s.spawn(move || {
                    barrier.wait();
                    attempt(reg, w)
                })
            })
            .collect();
        let won = handles.into_iter().map(|h| h.join().unwrap());
        won.enumerate()
            .filter(|(_, w)| *w)
            .map(|(i, _)| i)
            .collect()
    })
}

#[test]
fn a_partition_state_changes_only_by_compare_and_set_one_racer_winning() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let writers: Vec<ZkRegistry> = (0..3).map(|_| open(&server, "/state-test")).collect();
    let reg = &writers[0];
    let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let err = reg
        .create_partition_state("t", 0, &online("b1", 0))
        .unwrap_err();
    assert!(err.to_string().contains("not placed"), "{err}");
    assert_eq!(reg.topics().unwrap(), Vec::<String>::new(), "no znode made");
    reg.place_topic_replicated("t", 2, 2, &ids(&["b1", "b2"]))
        .unwrap();
    assert_eq!(reg.partition_state("t", 0).unwrap(), None);
    let err = reg
        .set_partition_state("t", 0, &online("b1", 1), 0)
        .unwrap_err();
    assert!(err.to_string().contains("no state"), "{err}");

    // Creates racing: one wins, and its state is version 0.
    let won = race(&writers, |r, w| {
        r.create_partition_state("t", 0, &online(&format!("b{w}"), 0))
            .unwrap()
    });
    assert_eq!(won.len(), 1, "{won:?}");
    let created = (online(&format!("b{}", won[0]), 0), 0);
    assert_eq!(reg.partition_state("t", 0).unwrap(), Some(created));

    // Changes racing from the same version: one wins each round, the
    // losers' states are never seen, and versions grow by one.
    for round in 0..10u64 {
        let won = race(&writers, |r, w| {
            let mine = online(&format!("b{w}"), round + 1);
            r.set_partition_state("t", 0, &mine, round).unwrap()
        });
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        let now = writers[2].partition_state("t", 0).unwrap();
        assert_eq!(
            now,
            Some((online(&format!("b{}", won[0]), round + 1), round + 1))
        );
        // A stale version (and one never reached) is refused.
        for stale in [round, round + 2, u64::MAX] {
            assert!(!reg
                .set_partition_state("t", 0, &online("late", 0), stale)
                .unwrap());
        }
        assert_eq!(writers[1].partition_state("t", 0).unwrap(), now);
    }

    // Kafka's znode, JSON in it.
    let admin =
        klog::coord::zk::ZkSession::connect(&server.address("/state-test"), SESSION, SESSION)
            .unwrap();
    let (bytes, stat) = admin
        .get("/brokers/topics/t/partitions/0/state", SESSION)
        .unwrap();
    assert_eq!(stat.version, 10);
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["leader_epoch"], 10, "{json}");
    // A state that does not parse is an error naming its znode.
    admin
        .set("/brokers/topics/t/partitions/0/state", b"{}", 10, SESSION)
        .unwrap();
    let err = reg.partition_state("t", 0).unwrap_err().to_string();
    assert!(
        err.contains("/state-test/brokers/topics/t/partitions/0/state"),
        "{err}"
    );
    // The placement still reads, the state's znode beneath it.
    assert_eq!(reg.topics().unwrap(), ["t"]);
    assert_eq!(reg.placement("t").unwrap().unwrap().replication_factor(), 2);
    let look = ZkRegistry::open_read_only(&server.address("/state-test"), SESSION).unwrap();
    assert!(look
        .create_partition_state("t", 1, &online("b1", 0))
        .is_err());
    assert!(look
        .set_partition_state("t", 0, &online("b1", 0), 11)
        .is_err());
}

#[test]
fn replicas_are_placed_round_robin_once_and_an_old_placement_reads_as_one_replica_each() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (
        open(&server, "/replicas-test"),
        open(&server, "/replicas-test"),
    );
    let brokers = |n: usize| (1..=n).rev().map(|i| format!("b{i}")).collect::<Vec<_>>();
    for n in 3..=5 {
        let topic = format!("t{n}");
        let placed = one
            .place_topic_replicated(&topic, 6, 3, &brokers(n))
            .unwrap();
        let read = two.placement(&topic).unwrap().unwrap();
        assert_eq!(read, placed);
        let sorted: Vec<String> = (1..=n).map(|i| format!("b{i}")).collect();
        for p in 0..6 {
            let want: Vec<String> = (0..3).map(|i| sorted[(p + i) % n].clone()).collect();
            assert_eq!(
                read.replicas_of(p as u32).unwrap(),
                want,
                "{n} brokers, [{p}]"
            );
            assert_eq!(
                read.brokers[p],
                sorted[p % n],
                "preferred leaders round robin"
            );
        }
        // Written once: a later placer, with another factor, reads it.
        let later = two
            .place_topic_replicated(&topic, 1, 1, &brokers(1))
            .unwrap();
        assert_eq!(later, placed);
    }
    // More replicas than live brokers: refused, and nothing is placed.
    let err = one
        .place_topic_replicated("r", 2, 3, &brokers(2))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "replication factor 3 needs 3 live brokers, 2 are registered"
    );
    assert_eq!(two.placement("r").unwrap(), None);
    // A placement stored before replication (no `replicas`).
    let admin =
        klog::coord::zk::ZkSession::connect(&server.address("/replicas-test"), SESSION, SESSION)
            .unwrap();
    common::registry::put_znode(
        &admin,
        "/brokers/topics/old",
        br#"{"topic":"old","brokers":["b2","b1"]}"#,
    );
    let old = two.placement("old").unwrap().unwrap();
    assert_eq!(old.brokers, ["b2", "b1"]);
    assert_eq!(old.replicas_of(0).unwrap(), ["b2"]);
    assert_eq!(old.replicas_of(1).unwrap(), ["b1"]);
    assert_eq!(old.replicas_of(2), None);
    assert_eq!(old.replication_factor(), 1);
}

/// Two registries (two brokers' sessions) changing one configuration entry
/// at once lose no change: each is a compare-and-set on the znode's
/// version, tried again on what the other wrote (ACL rules, users).
#[test]
fn configuration_changes_at_once_from_two_sessions_are_all_kept() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/config-test"), open(&server, "/config-test"));
    std::thread::scope(|scope| {
        for (who, registry) in [("a", &one), ("b", &two)] {
            scope.spawn(move || {
                for i in 0..40 {
                    registry
                        .update_config("acls", "shared", &mut |stored| {
                            let mut lines = stored.map(<[u8]>::to_vec).unwrap_or_default();
                            lines.extend_from_slice(format!("{who}{i}\n").as_bytes());
                            Ok(Some(lines))
                        })
                        .unwrap();
                }
            });
        }
    });
    let stored = one.config("acls", "shared").unwrap().unwrap();
    let lines: std::collections::BTreeSet<&[u8]> = stored
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 80);
    // Removing through it, as a last rule's removal does.
    two.update_config("acls", "shared", &mut |_| Ok(None))
        .unwrap();
    assert_eq!(one.config("acls", "shared").unwrap(), None);
}

/// Producer id blocks reserved by two registries (two brokers' sessions)
/// racing on one ZooKeeper never overlap: the compare-and-set on the
/// block's znode orders them.
#[test]
fn producer_id_blocks_from_racing_brokers_never_overlap() {
    use klog::coord::producer_ids::{reserve, BLOCK};
    let Some(server) = ZkServer::start() else {
        return;
    };
    let racers: Vec<_> = (0..3)
        .map(|_| {
            let registry = open(&server, "/pids");
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| reserve(&registry).unwrap().start)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut starts: Vec<i64> = racers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    starts.sort_unstable();
    let expected: Vec<i64> = (0..15).map(|i| i * BLOCK).collect();
    assert_eq!(starts, expected);
}

/// The cluster id is made once, by whichever process asks first, and
/// read back by every other; each chroot (a registry of its own) has its
/// own, kept as Kafka keeps `/cluster/id`.
#[test]
fn the_cluster_id_is_made_once_and_each_registry_has_its_own() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (one, two) = (open(&server, "/id-test"), open(&server, "/id-test"));
    let ids: Vec<String> = std::thread::scope(|s| {
        let asks: Vec<_> = [&one, &two, &one, &two]
            .into_iter()
            .map(|r| s.spawn(move || r.cluster_id().unwrap()))
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(ids[0].len(), 22, "{ids:?}");
    let other = open(&server, "/id-test-other").cluster_id().unwrap();
    assert_ne!(other, ids[0]);
    let read_only = ZkRegistry::open_read_only(&server.address("/id-test"), SESSION).unwrap();
    assert_eq!(read_only.cluster_id().unwrap(), ids[0]);
    let empty = ZkRegistry::open_read_only(&server.address("/id-test-none"), SESSION).unwrap();
    assert!(
        empty.cluster_id().is_err(),
        "a read-only registry makes none"
    );
}
