//! The coordinator driven from threads as Kafka clients drive it, over
//! the memory registry and the directory registry, beside klog members
//! that act on the registry as `klog-consume -G` does.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::coord::dir::DirRegistry;
use crate::coord::mem::MemRegistry;
use crate::coord::{assign, Ephemeral};

/// A long session timeout: its holder never falls silent in a test.
const LONG: Duration = Duration::from_secs(30);

/// Topic `t` has this many partitions.
const PARTITIONS: u32 = 4;

/// A coordinator that is shut down when the test ends, failed or not.
struct Running(Arc<Coordinator>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

impl std::ops::Deref for Running {
    type Target = Coordinator;
    fn deref(&self) -> &Coordinator {
        &self.0
    }
}

fn start(registry: Arc<dyn Registry>) -> Running {
    let config = CoordinatorConfig {
        tick: Duration::from_millis(20),
        session_timeout_min: Duration::from_millis(10),
        ..CoordinatorConfig::default()
    };
    let count = |topic: &str| (topic == "t").then_some(PARTITIONS);
    Running(Coordinator::start(registry, count, || false, |_| {}, config).unwrap())
}

/// The two registries every scenario runs on (the directory's temporary
/// directory lives as long as the registry is used).
fn registries() -> Vec<(Arc<dyn Registry>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let on_disk = Arc::new(DirRegistry::open(dir.path()).unwrap());
    vec![
        (Arc::new(MemRegistry::default()), None),
        (on_disk, Some(dir)),
    ]
}

fn join_as(c: &Coordinator, member_id: &str, session: Duration, rebalance: Duration) -> Joined {
    c.join(Join {
        group: "g".into(),
        member_id: member_id.into(),
        client_id: "rdkafka".into(),
        session_timeout: session,
        rebalance_timeout: Some(rebalance),
        topics: vec!["t".into()],
        member_id_required: false,
        protocols: vec![("range".into(), Vec::new())],
        leader_assigns: false,
        owned: Vec::new(),
    })
}

fn join(c: &Coordinator, member_id: &str) -> Joined {
    join_as(c, member_id, LONG, LONG)
}

fn sync(c: &Coordinator, joined: &Joined) -> Synced {
    c.sync(&Sync {
        group: "g".into(),
        member_id: joined.member_id.clone(),
        generation: joined.generation,
        assignments: Vec::new(),
    })
}

/// The partitions of `t` in an assignment.
fn partitions(synced: &Synced) -> Vec<u32> {
    assert_eq!(synced.error, NONE, "{synced:?}");
    let of_t = synced.assignment.iter().filter(|(t, _)| t == "t");
    of_t.flat_map(|(_, ps)| ps.iter().map(|&p| p as u32))
        .collect()
}

fn owners(registry: &dyn Registry) -> Vec<Option<String>> {
    (0..PARTITIONS)
        .map(|p| registry.owner("g", "t", p).map(|o| o.member))
        .collect()
}

/// Heartbeats as `joined` until the answer is not 0, for at most `limit`.
fn heartbeat_until_told(c: &Coordinator, joined: &Joined, limit: Duration) -> i16 {
    let start = Instant::now();
    loop {
        let error = c.heartbeat("g", &joined.member_id, joined.generation);
        if error != NONE || start.elapsed() > limit {
            return error;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What each client thread holds: its generation and partitions, by
/// member id, while it heartbeats in that generation.
type Board = std::sync::Mutex<std::collections::BTreeMap<String, (i32, Vec<u32>)>>;

/// A Kafka client's group loop: join, sync, heartbeat; rejoin when told;
/// leave when `stop` is set. What it holds is on `board` while it holds it.
fn client(c: &Coordinator, board: &Board, stop: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    let mut id = String::new();
    while !stop.load(Ordering::Relaxed) {
        let joined = join(c, &id);
        id = if joined.error == UNKNOWN_MEMBER_ID {
            String::new()
        } else {
            joined.member_id.clone()
        };
        let synced = sync(c, &joined);
        if joined.error != NONE || synced.error != NONE {
            continue;
        }
        crate::sync::lock(board).insert(id.clone(), (joined.generation, partitions(&synced)));
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
            if c.heartbeat("g", &id, joined.generation) != NONE {
                break;
            }
        }
        crate::sync::lock(board).remove(&id);
    }
    c.leave("g", &id);
}

/// Sets its flag when dropped, so that threads watching it end even when
/// an assertion fails.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Members that join at once (three clients, started together) end in one
/// generation, are told that none leads, and share every partition once,
/// each claimed in the registry for the member it is given to.
#[test]
fn members_joining_at_once_share_every_partition_once() {
    use std::sync::atomic::AtomicBool;
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let (board, stop) = (Board::default(), AtomicBool::new(false));
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| client(&c, &board, &stop));
            }
            // The clients stop when the test ends, failed or not.
            let _stop = StopOnDrop(&stop);
            let started = Instant::now();
            let settled = loop {
                let held = crate::sync::lock(&board).clone();
                let generations: BTreeSet<i32> = held.values().map(|(g, _)| *g).collect();
                if held.len() == 3 && generations.len() == 1 {
                    break held;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "{held:?}");
                std::thread::sleep(Duration::from_millis(10));
            };
            let mut given: Vec<u32> = Vec::new();
            for (id, (_, ps)) in &settled {
                assert!(id.starts_with("rdkafka-"), "{id}");
                for &p in ps {
                    assert_eq!(registry.owner("g", "t", p).unwrap().member, *id);
                }
                given.extend(ps.iter().copied());
            }
            given.sort();
            assert_eq!(given, [0, 1, 2, 3], "every partition once: {settled:?}");
        });
        assert!(registry.members("g").unwrap().is_empty());
    }
}

/// Every answer names the coordinator as the leader, and no member list.
#[test]
fn no_member_is_told_it_leads() {
    let c = start(Arc::new(MemRegistry::default()));
    let j = join(&c, "");
    assert_eq!((j.error, j.generation), (NONE, 1));
    assert_eq!(j.leader_id, LEADER_ID);
    assert_ne!(j.member_id, LEADER_ID);
    assert!(j.members.is_empty());
}

/// A member that leaves gives its partitions up: the other is told to
/// rebalance and takes them; the one that left is unknown.
#[test]
fn a_member_that_leaves_hands_its_partitions_over() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let members = add_member(&c, &[]);
        let members = add_member(&c, &members);
        let (a, b) = (members[0].clone(), members[1].clone());
        assert_eq!(partitions(&sync(&c, &a)).len(), 2);
        assert_eq!(partitions(&sync(&c, &b)).len(), 2);
        assert_eq!(c.leave("g", &b.member_id), NONE);
        let names: Vec<_> = registry.members("g").unwrap();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(
            c.heartbeat("g", &b.member_id, b.generation),
            UNKNOWN_MEMBER_ID
        );
        assert_eq!(
            c.heartbeat("g", &a.member_id, a.generation),
            REBALANCE_IN_PROGRESS
        );
        let a = join(&c, &a.member_id);
        assert_eq!(partitions(&sync(&c, &a)), [0, 1, 2, 3]);
        assert!(owners(&*registry)
            .iter()
            .all(|o| o.as_deref() == Some(&*a.member_id)));
    }
}

/// Joins a new member to a group whose `members` are settled, as Kafka
/// clients do: they are told to rebalance by their heartbeats and rejoin,
/// and the new one's answer waits for them. All of them, one generation.
fn add_member(c: &Coordinator, members: &[Joined]) -> Vec<Joined> {
    add_member_with(c, members, LONG)
}

/// [`add_member`], the new member with a session timeout of `session`.
fn add_member_with(c: &Coordinator, members: &[Joined], session: Duration) -> Vec<Joined> {
    std::thread::scope(|scope| {
        let new = scope.spawn(|| join_as(c, "", session, LONG));
        let rejoined: Vec<_> = members
            .iter()
            .map(|m| {
                let told = heartbeat_until_told(c, m, Duration::from_secs(5));
                assert_eq!(told, REBALANCE_IN_PROGRESS);
                scope.spawn(|| join(c, &m.member_id))
            })
            .collect();
        let mut all: Vec<Joined> = rejoined.into_iter().map(|j| j.join().unwrap()).collect();
        all.push(new.join().unwrap());
        for j in &all {
            assert_eq!(j.error, NONE, "{j:?}");
            assert_eq!(j.generation, all[0].generation, "{all:?}");
        }
        all
    })
}

/// A `klog-consume -G` member as the registry sees it: it joins the
/// group, and claims the range Algorithm 1 gives it among the subscribers
/// sorted as it sorts them (its broker connections play no part here).
struct KlogMember {
    registry: Arc<dyn Registry>,
    name: String,
    _entry: Ephemeral,
    owned: Vec<(u32, Ephemeral)>,
}

impl KlogMember {
    fn join(registry: &Arc<dyn Registry>, name: &str) -> KlogMember {
        let info = MemberInfo {
            member: name.into(),
            pid: std::process::id(),
            topics: vec!["t".into()],
            coordinator: None,
        };
        KlogMember {
            registry: Arc::clone(registry),
            name: name.into(),
            _entry: registry.join("g", &info, LONG).unwrap(),
            owned: Vec::new(),
        }
    }

    /// Releases everything and claims its share: `false` on a conflict
    /// (then it holds nothing).
    fn rebalance(&mut self) -> bool {
        self.owned.clear();
        let members = crate::coord::group::subscribers(&*self.registry, "g", "t").unwrap();
        let index = members.iter().position(|m| *m == self.name).unwrap();
        for p in assign(PARTITIONS, members.len(), index) {
            match self.registry.claim("g", "t", p, &self.name, LONG).unwrap() {
                Some(owner) => self.owned.push((p, owner)),
                None => {
                    self.owned.clear();
                    return false;
                }
            }
        }
        true
    }

    fn partitions(&self) -> Vec<u32> {
        self.owned.iter().map(|(p, _)| *p).collect()
    }
}

/// A klog member that joins the group makes the Kafka members rebalance;
/// the Kafka member's sync waits for the partitions the klog member still
/// holds from before (it has not noticed yet) and never takes one while it
/// is held; once both settled, every partition has exactly one owner.
#[test]
fn a_klog_member_joining_makes_kafka_members_rebalance_and_share_without_overlap() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        // The klog member was there first, and holds everything.
        let mut klog = KlogMember::join(&registry, "zz-klog");
        assert!(klog.rebalance());
        assert_eq!(klog.partitions(), [0, 1, 2, 3]);
        let a = join(&c, "");
        let (synced, held_at_sync) = std::thread::scope(|scope| {
            let waiting = scope.spawn(|| {
                let s = sync(&c, &a);
                let held = owners(&*registry);
                (s, held)
            });
            // The klog member notices late, and takes its new share.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !waiting.is_finished(),
                "the sync did not wait for the klog member"
            );
            let mut tries = 0;
            while !klog.rebalance() {
                tries += 1;
                assert!(tries < 100, "the klog member never settled");
                std::thread::sleep(Duration::from_millis(20));
            }
            waiting.join().unwrap()
        });
        // Sorted by id: the Kafka member first, the klog member second.
        assert_eq!(partitions(&synced), [0, 1]);
        assert_eq!(klog.partitions(), [2, 3]);
        let want: Vec<_> = [&*a.member_id, &*a.member_id, "zz-klog", "zz-klog"]
            .map(|m| Some(m.to_string()))
            .into();
        assert_eq!(held_at_sync[..2], want[..2]);
        assert_eq!(owners(&*registry), want);
        // A second klog member joins: the Kafka member is told.
        let _late = KlogMember::join(&registry, "aa-klog");
        let told = heartbeat_until_told(&c, &a, Duration::from_secs(5));
        assert_eq!(told, REBALANCE_IN_PROGRESS);
    }
}

/// A partition another member never lets go: the sync gives up at the
/// rebalance timeout with REBALANCE_IN_PROGRESS, holding nothing.
#[test]
fn a_claim_never_let_go_sends_the_member_back_to_rejoin() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let mut klog = KlogMember::join(&registry, "zz-klog");
        assert!(klog.rebalance());
        let a = join_as(&c, "", LONG, Duration::from_millis(400));
        let started = Instant::now();
        let synced = sync(&c, &a);
        assert_eq!(synced.error, REBALANCE_IN_PROGRESS, "{synced:?}");
        assert!(synced.assignment.is_empty());
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(owners(&*registry)
            .iter()
            .all(|o| o.as_deref() == Some("zz-klog")));
    }
}

/// A member silent past its session timeout is dropped: its registry
/// entry and claims go, the other is told to rebalance and takes its
/// partitions, and the silent one is unknown when it comes back.
#[test]
fn a_silent_member_is_dropped_after_its_session_timeout() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let short = Duration::from_millis(300);
        let busy = join(&c, "");
        assert_eq!(partitions(&sync(&c, &busy)), [0, 1, 2, 3]);
        let members = add_member_with(&c, &[busy], short);
        let (busy, quiet) = (members[0].clone(), members[1].clone());
        let mut given = partitions(&sync(&c, &quiet));
        given.extend(partitions(&sync(&c, &busy)));
        given.sort();
        assert_eq!(given, [0, 1, 2, 3]);
        // `quiet` stops calling; `busy` keeps heartbeating.
        let told = heartbeat_until_told(&c, &busy, Duration::from_secs(5));
        assert_eq!(told, REBALANCE_IN_PROGRESS);
        let listed: Vec<_> = registry.members("g").unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].member, busy.member_id);
        let busy = join(&c, &busy.member_id);
        assert_eq!(partitions(&sync(&c, &busy)), [0, 1, 2, 3]);
        let code = c.heartbeat("g", &quiet.member_id, quiet.generation);
        assert_eq!(code, UNKNOWN_MEMBER_ID);
        let late = c.commit(
            "g",
            &quiet.member_id,
            quiet.generation,
            &[("t".into(), 0, 5)],
        );
        assert_eq!(late, [UNKNOWN_MEMBER_ID]);
        assert_eq!(registry.committed("g", "t", 0).unwrap(), None);
    }
}

/// Offsets are the registry's: a Kafka member's commit is what a klog
/// member resumes from, and the other way round; a commit after another
/// member took the partition over is refused; a commit from outside the
/// group is refused while a member holds the partition.
#[test]
fn commits_are_fenced_and_offsets_shared_with_klog_members() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let a = join(&c, "");
        assert_eq!(partitions(&sync(&c, &a)), [0, 1, 2, 3]);
        let offsets = [("t".to_string(), 0, 10), ("t".to_string(), 1, 11)];
        assert_eq!(
            c.commit("g", &a.member_id, a.generation, &offsets),
            [NONE, NONE]
        );
        assert_eq!(registry.committed("g", "t", 0).unwrap(), Some(10));
        // A stale generation is refused.
        let stale = c.commit("g", &a.member_id, a.generation - 1, &offsets[..1]);
        assert_eq!(stale, [ILLEGAL_GENERATION]);
        // From outside the group, while a holds the partition: refused.
        let outside = c.commit("g", "", -1, &[("t".to_string(), 2, 5)]);
        assert_eq!(outside, [REBALANCE_IN_PROGRESS]);
        // a leaves; a klog member takes over and commits 2 further.
        assert_eq!(c.leave("g", &a.member_id), NONE);
        let mut klog = KlogMember::join(&registry, "klog");
        assert!(klog.rebalance());
        let owner = &klog.owned[0].1;
        registry.commit("g", "t", 0, 12, owner).unwrap();
        let fetched = c.fetch_offsets(
            "g",
            &[("t".into(), 0), ("t".into(), 3), ("t".into(), -1)],
            false,
        );
        assert_eq!(
            fetched,
            [(12, NONE), (-1, NONE), (-1, UNKNOWN_TOPIC_OR_PARTITION)]
        );
        // a's late commit, after the takeover: refused, nothing stored.
        let late = c.commit("g", &a.member_id, a.generation, &offsets[..1]);
        assert_eq!(late, [UNKNOWN_MEMBER_ID]);
        drop(klog);
        let outside = c.commit("g", "", -1, &[("t".to_string(), 2, 5)]);
        assert_eq!(outside, [NONE]);
        assert_eq!(c.fetch_offsets("g", &[("t".into(), 2)], false), [(5, NONE)]);
        // Outside a group, only partitions that exist: nothing is made in
        // the registry for a topic or partition made up.
        let made_up = [
            ("t".to_string(), PARTITIONS as i32, 5),
            ("nope".to_string(), 0, 5),
        ];
        let refused = c.commit("other", "", -1, &made_up);
        assert_eq!(refused, [UNKNOWN_TOPIC_OR_PARTITION; 2]);
        assert_eq!(c.fetch_all_offsets("other").unwrap(), []);
        assert_eq!(registry.committed("g", "t", 0).unwrap(), Some(12));
        let all = c.fetch_all_offsets("g").unwrap();
        let want = [("t", 0, 12), ("t", 1, 11), ("t", 2, 5)].map(|(t, p, o)| (t.into(), p, o));
        assert_eq!(all, want);
    }
}

/// Kafka's OffsetCommit stores the offset it is given, lower or higher
/// (a consumer that seeks back, `kafka-consumer-groups --reset-offsets`):
/// a commit answered NONE must be what OffsetFetch returns next, from a
/// member and from outside the group alike.
#[test]
fn a_lower_offset_committed_is_stored() {
    for (registry, _dir) in registries() {
        let c = start(Arc::clone(&registry));
        let a = join(&c, "");
        assert_eq!(partitions(&sync(&c, &a)), [0, 1, 2, 3]);
        let at = |offset| [("t".to_string(), 0, offset)];
        assert_eq!(c.commit("g", &a.member_id, a.generation, &at(50)), [NONE]);
        assert_eq!(c.commit("g", &a.member_id, a.generation, &at(20)), [NONE]);
        assert_eq!(
            c.fetch_offsets("g", &[("t".into(), 0)], false),
            [(20, NONE)]
        );
        assert_eq!(c.leave("g", &a.member_id), NONE);
        assert_eq!(c.commit("g", "", -1, &at(5)), [NONE]);
        assert_eq!(c.fetch_offsets("g", &[("t".into(), 0)], false), [(5, NONE)]);
    }
}

/// A member whose claim was taken over behind its back (its broker was
/// stopped past the lease): its commit is fenced, and it is told to
/// rebalance.
#[test]
fn a_commit_after_a_takeover_is_fenced() {
    let mem = MemRegistry::default();
    let registry: Arc<dyn Registry> = Arc::new(mem.clone());
    let c = start(Arc::clone(&registry));
    let a = join(&c, "");
    assert_eq!(partitions(&sync(&c, &a)), [0, 1, 2, 3]);
    mem.silence("owners/g/t-0");
    let thief = registry.claim("g", "t", 0, "thief", LONG).unwrap().unwrap();
    registry.commit("g", "t", 0, 7, &thief).unwrap();
    let late = c.commit("g", &a.member_id, a.generation, &[("t".to_string(), 0, 99)]);
    assert_eq!(late, [ILLEGAL_GENERATION]);
    assert_eq!(registry.committed("g", "t", 0).unwrap(), Some(7));
    let told = heartbeat_until_told(&c, &a, Duration::from_secs(5));
    assert_eq!(told, REBALANCE_IN_PROGRESS);
}

/// A join waiting for members that never rejoin ends at once when the
/// broker stops, and everything the coordinator held is let go.
#[test]
fn a_stop_ends_a_waiting_join() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(Arc::clone(&registry));
    let a = join(&c, "");
    assert_eq!(partitions(&sync(&c, &a)), [0, 1, 2, 3]);
    let started = Instant::now();
    let waiting = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| join(&c, ""));
        std::thread::sleep(Duration::from_millis(100));
        c.shutdown();
        waiting.join().unwrap()
    });
    assert_eq!(waiting.error, COORDINATOR_NOT_AVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(registry.members("g").unwrap().is_empty());
    assert_eq!(owners(&*registry), [None, None, None, None]);
}

/// Bad requests get their Kafka error, and leave nothing behind.
#[test]
fn bad_joins_get_their_errors() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(Arc::clone(&registry));
    let bad = |change: &dyn Fn(&mut Join)| {
        let mut j = Join {
            group: "g".into(),
            member_id: String::new(),
            client_id: "x".into(),
            session_timeout: LONG,
            rebalance_timeout: None,
            topics: vec!["t".into()],
            member_id_required: false,
            protocols: vec![("range".into(), Vec::new())],
            leader_assigns: false,
            owned: Vec::new(),
        };
        change(&mut j);
        c.join(j).error
    };
    assert_eq!(bad(&|j| j.group = "a/b".into()), INVALID_GROUP_ID);
    assert_eq!(bad(&|j| j.group = String::new()), INVALID_GROUP_ID);
    assert_eq!(
        bad(&|j| j.session_timeout = Duration::ZERO),
        INVALID_SESSION_TIMEOUT
    );
    assert_eq!(bad(&|j| j.member_id = "nobody".into()), UNKNOWN_MEMBER_ID);
    assert!(registry.members("g").unwrap().is_empty());
    // A client id outside the registry's alphabet is made one.
    assert_eq!(bad(&|j| j.client_id = "a b/c".into()), NONE);
    let names = registry.members("g").unwrap();
    assert!(names[0].member.starts_with("a_b_c-"), "{names:?}");
    assert_eq!(
        eager_protocol(&["cooperative-sticky", "range"]),
        Some("range")
    );
    let chosen =
        eager_protocol(&["cooperative-sticky"]).ok_or(crate::kafka::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(chosen, Err(crate::kafka::INCONSISTENT_GROUP_PROTOCOL));
}

/// New members past the broker's bounds are refused: a group past the
/// number of groups, a member past the members of all groups; members of
/// the groups there are still join.
#[test]
fn joins_past_the_brokers_groups_or_members_are_refused() {
    let joined = |c: &Coordinator, group: &str| {
        c.join(Join {
            group: group.into(),
            member_id: String::new(),
            client_id: "x".into(),
            session_timeout: LONG,
            rebalance_timeout: Some(LONG),
            topics: vec!["t".into()],
            member_id_required: false,
            protocols: vec![("range".into(), Vec::new())],
            leader_assigns: false,
            owned: Vec::new(),
        })
        .error
    };
    for (groups_max, members_total_max) in [(2, 10), (10, 2)] {
        let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
        let config = CoordinatorConfig {
            tick: Duration::from_millis(20),
            session_timeout_min: Duration::from_millis(10),
            groups_max,
            members_total_max,
            ..CoordinatorConfig::default()
        };
        let count = |topic: &str| (topic == "t").then_some(PARTITIONS);
        let c = Running(
            Coordinator::start(Arc::clone(&registry), count, || false, |_| {}, config).unwrap(),
        );
        assert_eq!(joined(&c, "g1"), NONE);
        assert_eq!(joined(&c, "g2"), NONE);
        assert_eq!(
            joined(&c, "g3"),
            GROUP_MAX_SIZE_REACHED,
            "{groups_max} {members_total_max}"
        );
        assert!(registry.members("g3").unwrap().is_empty());
    }
}

/// From JoinGroup v4 on, a new member is given its id with
/// MEMBER_ID_REQUIRED and enters only when it joins with it (KIP-394): a
/// client retrying a first join whose answer it lost leaves no phantom
/// member. An id not given, or given and lapsed after its session
/// timeout, is unknown; ids given count against the group's bound.
#[test]
fn a_new_member_joins_again_with_the_id_it_is_given() {
    let registry: Arc<dyn Registry> = Arc::new(MemRegistry::default());
    let c = start(Arc::clone(&registry));
    let first = |session: Duration| {
        c.join(Join {
            group: "g".into(),
            member_id: String::new(),
            client_id: "rdkafka".into(),
            session_timeout: session,
            rebalance_timeout: Some(LONG),
            topics: vec!["t".into()],
            member_id_required: true,
            protocols: vec![("range".into(), Vec::new())],
            leader_assigns: false,
            owned: Vec::new(),
        })
    };
    let given = first(LONG);
    assert_eq!(given.error, MEMBER_ID_REQUIRED);
    assert!(given.member_id.starts_with("rdkafka-"), "{given:?}");
    assert!(registry.members("g").unwrap().is_empty(), "not entered yet");
    // Lost answers, retried: more ids, no more members.
    let lost = [first(LONG), first(LONG)];
    assert!(lost.iter().all(|j| j.error == MEMBER_ID_REQUIRED));
    let joined = join(&c, &given.member_id);
    assert_eq!((joined.error, &joined.member_id), (NONE, &given.member_id));
    let members = registry.members("g").unwrap();
    assert_eq!(members.len(), 1, "{members:?}");
    assert_eq!(join(&c, "rdkafka-not-given").error, UNKNOWN_MEMBER_ID);
    // Ids given count against the group's bound, and one that leaves
    // gives its place back.
    assert_eq!(
        c.room_for_a_member(&c.groups(), "g"),
        Ok(()),
        "1 member and 2 ids of 1000"
    );
    assert_eq!(c.groups().get("g").map(|g| g.size()), Some(3));
    assert_eq!(c.leave("g", &lost[0].member_id), NONE);
    assert_eq!(c.groups().get("g").map(|g| g.size()), Some(2));
    assert_eq!(join(&c, &lost[0].member_id).error, UNKNOWN_MEMBER_ID);
    // The last member leaving keeps the ids given: the group is not
    // dropped under a member on its way in.
    let on_its_way = first(LONG);
    assert_eq!(c.leave("g", &joined.member_id), NONE);
    assert_eq!(join(&c, &on_its_way.member_id).error, NONE);
    // An id not joined with within its session timeout lapses.
    let brief = first(Duration::from_millis(30));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(join(&c, &brief.member_id).error, UNKNOWN_MEMBER_ID);
}

/// The tick renews a member's lease and its claims a few times a session
/// timeout (a third of it, as a ZooKeeper client pings), not at every tick:
/// 2,000 members cost no registry round trip each per tick.
#[test]
fn leases_are_renewed_a_few_times_a_session_not_every_tick() {
    let registry = Arc::new(MemRegistry::default());
    let c = start(registry.clone());
    let a = join(&c, "");
    let synced = sync(&c, &a);
    assert_eq!(partitions(&synced).len(), PARTITIONS as usize);
    let before = registry.renewals();
    // 25 ticks of 20 ms within a third of the 30 s session.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(registry.renewals(), before, "renewed at a tick");
    // A short session is renewed in time: its member, heartbeating, keeps
    // its entry through many thirds of it.
    let registry = Arc::new(MemRegistry::default());
    let c = start(registry.clone());
    let session = Duration::from_millis(150);
    let b = join_as(&c, "", session, LONG);
    sync(&c, &b);
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        let beat = c.heartbeat("g", &b.member_id, b.generation);
        assert_eq!(beat, crate::kafka::NONE);
        std::thread::sleep(Duration::from_millis(30));
    }
    let renewed = registry.renewals();
    // Each renewal is the entry's and its 4 claims': every 50 ms (a third
    // of 150) at 20 ms ticks, 15 to 18 times; at every tick, 45.
    assert!(
        (3 * 5..=20 * 5).contains(&renewed),
        "{renewed} renewals in 900 ms"
    );
}
