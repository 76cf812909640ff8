//! A registry in memory, for unit tests of what sits on the registry
//! (the trait's provided methods, a group member's rebalance) without a
//! directory, a broker or a second process. Clones share one registry, as
//! processes share a directory; dropping a handle is its process dying.
//!
//! Leases do not age by themselves: [`MemRegistry::silence`] makes an
//! entry's holder silent past its timeout, as a stopped process would be.
//!
//! It is stricter than a real backend where that finds bugs: a commit
//! whose handle is a claim of another partition panics, so a test fails on
//! a member that commits what it does not own. A claim taken over by a
//! later generation is refused, as every backend refuses it.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;

use crate::coord::registry::{
    check_name, encode_state, placed_partition, to_json, BrokerInfo, Ephemeral, Held, Lease,
    MemberInfo, Owner, PartitionState, Placement, Registry, SessionState,
};
use crate::error::{Error, Result};

/// A registry in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemRegistry {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// The cluster's id, made at the first ask.
    cluster_id: Option<String>,
    /// Handles given out, to tell a claim from a later one of the same key.
    handles_given: u64,
    /// Live ephemeral entries by key (`brokers/b1`, `consumers/g/m`,
    /// `owners/g/t-0`).
    live: BTreeMap<String, Live>,
    /// The last generation claimed of each owner key.
    generations: BTreeMap<String, u64>,
    offsets: BTreeMap<(String, String, u32), u64>,
    /// Offsets stored, lower ones included.
    stores: u64,
    /// Leases renewed (entries and claims).
    renewals: u64,
    placements: BTreeMap<String, Placement>,
    /// Each partition's state and its version.
    states: BTreeMap<(String, u32), (PartitionState, u64)>,
    /// A placement that wins the next race (see `lose_next_placement`).
    rival: Option<Placement>,
    /// Configuration entries by kind and name.
    configs: BTreeMap<(String, String), Vec<u8>>,
    /// Configuration entries written or removed through `update_config`.
    config_writes: u64,
    /// The process's session ended (see `end_session`).
    session_ended: bool,
}

/// A live entry.
#[derive(Debug)]
struct Live {
    /// The handle that holds it.
    handle: u64,
    /// Its description (an owner's: the member).
    json: Vec<u8>,
    /// Its lease's timeout; `None`: no lease.
    timeout: Option<Duration>,
    /// Its holder has been silent past the timeout.
    silent: bool,
    /// An owner's generation; 0 for other entries.
    generation: u64,
}

impl Live {
    fn lease(&self) -> Lease {
        let timeout = self.timeout.unwrap_or(Duration::MAX);
        let age = if self.silent {
            timeout.saturating_add(Duration::from_millis(1))
        } else {
            Duration::ZERO
        };
        Lease { timeout, age }
    }
}

/// A held entry: its key, and which handle of that key it is.
#[derive(Debug)]
struct Hold {
    key: String,
    handle: u64,
    generation: u64,
    state: Arc<Mutex<State>>,
}

impl Hold {
    /// Whether this handle's entry is live and not silent: else the error
    /// every backend gives.
    fn check(&self, state: &State) -> Result<()> {
        match state.live.get(&self.key) {
            Some(live) if live.handle == self.handle && !live.silent => Ok(()),
            Some(live) if live.handle == self.handle => Err(Error::Expired {
                what: self.key.clone(),
                silent_ms: live.lease().age.as_millis() as u64,
                timeout_ms: live.lease().timeout.as_millis() as u64,
            }),
            _ if self.generation > 0 => Err(Error::Fenced {
                what: self.key.clone(),
                generation: self.generation,
                current: state.generations.get(&self.key).copied().unwrap_or(0),
            }),
            _ => Err(Error::NotInGroup {
                member: self.key.clone(),
                group: "the memory registry".into(),
            }),
        }
    }
}

impl Held for Hold {
    fn update(&self, json: &[u8]) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        if let Some(live) = state.live.get_mut(&self.key) {
            if live.handle == self.handle && !self.key.starts_with("owners/") {
                live.json = json.to_vec();
            }
        }
        Ok(())
    }

    fn renew(&self) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        state.renewals += 1;
        self.check(&state)
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut state = crate::sync::lock(&self.state);
        if state
            .live
            .get(&self.key)
            .is_some_and(|live| live.handle == self.handle)
        {
            state.live.remove(&self.key);
        }
    }
}

fn owner_key(group: &str, topic: &str, partition: u32) -> String {
    format!("owners/{group}/{topic}-{partition}")
}

/// A broker's registry entry with id `id` and nothing else of note.
pub(crate) fn broker_info(id: &str) -> crate::coord::BrokerInfo {
    crate::coord::BrokerInfo {
        id: id.to_string(),
        host: "h".into(),
        port: 1,
        pid: 1,
        topics: Default::default(),
        kafka: None,
        principal: None,
    }
}

impl MemRegistry {
    /// Leases renewed so far, of entries and claims.
    pub(crate) fn renewals(&self) -> u64 {
        crate::sync::lock(&self.state).renewals
    }

    /// Configuration entries changed so far through `update_config`.
    pub(crate) fn config_writes(&self) -> u64 {
        crate::sync::lock(&self.state).config_writes
    }

    /// Offsets stored so far (a commit that would lower one stores none).
    pub(crate) fn stores(&self) -> u64 {
        crate::sync::lock(&self.state).stores
    }

    /// Makes the next placement lose its race to `rival`, as if another
    /// broker had placed the topic between the read and the write.
    pub(crate) fn lose_next_placement(&self, rival: Placement) {
        crate::sync::lock(&self.state).rival = Some(rival);
    }

    /// Removes the live entry `key` behind its holder's back, as a
    /// backend does with the entries of a process it takes for dead.
    pub(crate) fn expire(&self, key: &str) {
        crate::sync::lock(&self.state).live.remove(key);
    }

    /// Ends the session of every handle of this registry (clones share
    /// it), as a ZooKeeper session expires while its process is stopped:
    /// every entry is silent past its lease, and [`Registry::session`]
    /// says it was lost until the next join, which starts a new one.
    pub(crate) fn end_session(&self) {
        let mut state = crate::sync::lock(&self.state);
        state.session_ended = true;
        for live in state.live.values_mut() {
            live.silent = true;
        }
    }

    /// Makes the holder of the live entry `key` silent past its lease's
    /// timeout, as if its process had been stopped.
    pub(crate) fn silence(&self, key: &str) {
        if let Some(live) = crate::sync::lock(&self.state).live.get_mut(key) {
            live.silent = true;
        }
    }

    /// Takes `key` unless it is held (a silent owner's claim is taken
    /// over, with the next generation): the entry's handle.
    fn hold(&self, key: String, json: Vec<u8>, timeout: Option<Duration>) -> Option<Ephemeral> {
        let mut state = crate::sync::lock(&self.state);
        let owner = key.starts_with("owners/");
        if let Some(live) = state.live.get(&key) {
            if !(owner && live.silent) {
                return None;
            }
        }
        state.handles_given += 1;
        let handle = state.handles_given;
        let generation = if owner {
            let g = state.generations.entry(key.clone()).or_insert(0);
            *g += 1;
            *g
        } else {
            0
        };
        let live = Live {
            handle,
            json,
            timeout,
            silent: false,
            generation,
        };
        state.live.insert(key.clone(), live);
        Some(Ephemeral::new(Hold {
            key,
            handle,
            generation,
            state: Arc::clone(&self.state),
        }))
    }

    /// The descriptions of the live entries under `prefix` that parse,
    /// with their leases.
    fn live<T: for<'de> Deserialize<'de>>(&self, prefix: &str) -> Vec<(T, Lease)> {
        let state = crate::sync::lock(&self.state);
        let under = state.live.iter().filter(|(k, _)| k.starts_with(prefix));
        under
            .filter_map(|(_, live)| Some((serde_json::from_slice(&live.json).ok()?, live.lease())))
            .collect()
    }
}

impl Registry for MemRegistry {
    fn location(&self) -> String {
        "memory".into()
    }

    fn cluster_id(&self) -> Result<String> {
        let mut state = crate::sync::lock(&self.state);
        Ok(state
            .cluster_id
            .get_or_insert_with(crate::coord::cluster_id::new)
            .clone())
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        check_name("broker", &info.id)?;
        let key = format!("brokers/{}", info.id);
        self.hold(key.clone(), to_json(info)?, None)
            .ok_or_else(|| Error::InUse { path: key.into() })
    }

    fn session(&self) -> SessionState {
        match crate::sync::lock(&self.state).session_ended {
            true => SessionState::Lost,
            false => SessionState::Alive,
        }
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        Ok(self.live("brokers/").into_iter().map(|(b, _)| b).collect())
    }

    fn join(&self, group: &str, info: &MemberInfo, session_timeout: Duration) -> Result<Ephemeral> {
        check_name("group", group)?;
        check_name("member", &info.member)?;
        let key = format!("consumers/{group}/{}", info.member);
        crate::sync::lock(&self.state).session_ended = false;
        self.hold(key.clone(), to_json(info)?, Some(session_timeout))
            .ok_or_else(|| Error::InUse { path: key.into() })
    }

    fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>> {
        check_name("group", group)?;
        // Keys sort by member id.
        Ok(self.live(&format!("consumers/{group}/")))
    }

    fn groups(&self) -> Result<Vec<String>> {
        let state = crate::sync::lock(&self.state);
        let mut groups: Vec<String> = state
            .live
            .keys()
            .filter(|k| !k.starts_with("brokers/"))
            .filter_map(|k| k.split('/').nth(1).map(String::from))
            .chain(state.offsets.keys().map(|(g, _, _)| g.clone()))
            .collect();
        groups.sort();
        groups.dedup();
        Ok(groups)
    }

    fn claim(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        member: &str,
        session_timeout: Duration,
    ) -> Result<Option<Ephemeral>> {
        check_name("group", group)?;
        check_name("topic", topic)?;
        Ok(self.hold(
            owner_key(group, topic, partition),
            member.as_bytes().to_vec(),
            Some(session_timeout),
        ))
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner> {
        let state = crate::sync::lock(&self.state);
        let live = state.live.get(&owner_key(group, topic, partition))?;
        Some(Owner {
            member: String::from_utf8_lossy(&live.json).into_owned(),
            generation: live.generation,
            lease: live.lease(),
        })
    }

    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        check_name("group", group)?;
        let state = crate::sync::lock(&self.state);
        Ok(state
            .offsets
            .get(&(group.into(), topic.into(), partition))
            .copied())
    }

    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        let key = owner_key(group, topic, partition);
        let hold = owner
            .held()
            .as_any()
            .downcast_ref::<Hold>()
            .expect("a handle of this registry");
        let mut state = crate::sync::lock(&self.state);
        assert!(
            hold.key == key,
            "{key} committed with the handle of {} (handle {}), not its owner's",
            hold.key,
            hold.handle
        );
        hold.check(&state)?;
        state.stores += 1;
        state
            .offsets
            .insert((group.into(), topic.into(), partition), offset);
        Ok(())
    }

    fn reset_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        if let Some(live) = state.live.get(&owner_key(group, topic, partition)) {
            return Err(Error::GroupActive {
                group: group.into(),
                members: String::from_utf8_lossy(&live.json).into_owned(),
            });
        }
        state
            .offsets
            .insert((group.into(), topic.into(), partition), offset);
        Ok(())
    }

    fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool> {
        let mut state = crate::sync::lock(&self.state);
        if let Some(live) = state.live.get(&owner_key(group, topic, partition)) {
            return Err(Error::GroupActive {
                group: group.into(),
                members: String::from_utf8_lossy(&live.json).into_owned(),
            });
        }
        let key = (group.to_string(), topic.to_string(), partition);
        Ok(state.offsets.remove(&key).is_some())
    }

    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        let state = crate::sync::lock(&self.state);
        let of_group = state.offsets.iter().filter(|((g, _, _), _)| g == group);
        Ok(of_group
            .map(|((_, t, p), o)| (t.clone(), *p, Ok(*o)))
            .collect())
    }

    fn placement(&self, topic: &str) -> Result<Option<Placement>> {
        check_name("topic", topic)?;
        Ok(crate::sync::lock(&self.state)
            .placements
            .get(topic)
            .cloned())
    }

    fn create_placement(&self, placement: &Placement) -> Result<bool> {
        let mut state = crate::sync::lock(&self.state);
        if let Some(rival) = state.rival.take() {
            state.placements.insert(rival.topic.clone(), rival);
        }
        if state.placements.contains_key(&placement.topic) {
            return Ok(false);
        }
        state
            .placements
            .insert(placement.topic.clone(), placement.clone());
        Ok(true)
    }

    fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool> {
        let mut state = crate::sync::lock(&self.state);
        match state.placements.get_mut(&old.topic) {
            Some(stored) if stored == old && new.topic == old.topic => {
                *stored = new.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
        let key = (kind.to_string(), name.to_string());
        Ok(crate::sync::lock(&self.state).configs.get(&key).cloned())
    }

    fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()> {
        let key = (kind.to_string(), name.to_string());
        crate::sync::lock(&self.state)
            .configs
            .insert(key, bytes.to_vec());
        Ok(())
    }

    fn update_config(
        &self,
        kind: &str,
        name: &str,
        change: crate::coord::registry::ConfigChange<'_>,
    ) -> Result<()> {
        let key = (kind.to_string(), name.to_string());
        let mut state = crate::sync::lock(&self.state);
        match change(state.configs.get(&key).map(Vec::as_slice))? {
            Some(bytes) => state.configs.insert(key, bytes),
            None => state.configs.remove(&key),
        };
        state.config_writes += 1;
        Ok(())
    }

    fn remove_config(&self, kind: &str, name: &str) -> Result<bool> {
        let key = (kind.to_string(), name.to_string());
        Ok(crate::sync::lock(&self.state)
            .configs
            .remove(&key)
            .is_some())
    }

    fn configs(&self, kind: &str) -> Result<Vec<String>> {
        let state = crate::sync::lock(&self.state);
        let names = state.configs.keys().filter(|(k, _)| k == kind);
        Ok(names.map(|(_, n)| n.clone()).collect())
    }

    fn topics(&self) -> Result<Vec<String>> {
        Ok(crate::sync::lock(&self.state)
            .placements
            .keys()
            .cloned()
            .collect())
    }

    fn remove_topic(&self, topic: &str) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        state.placements.remove(topic);
        state.states.retain(|(t, _), _| t != topic);
        drop(state);
        self.remove_config(crate::coord::topic_config::KIND, topic)?;
        Ok(())
    }

    fn partition_state(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Option<(PartitionState, u64)>> {
        let state = crate::sync::lock(&self.state);
        Ok(state.states.get(&(topic.to_string(), partition)).cloned())
    }

    fn create_partition_state(
        &self,
        topic: &str,
        partition: u32,
        new: &PartitionState,
    ) -> Result<bool> {
        encode_state(new)?;
        placed_partition(self, topic, partition)?;
        let mut state = crate::sync::lock(&self.state);
        let key = (topic.to_string(), partition);
        if state.states.contains_key(&key) {
            return Ok(false);
        }
        state.states.insert(key, (new.clone(), 0));
        Ok(true)
    }

    fn set_partition_state(
        &self,
        topic: &str,
        partition: u32,
        new: &PartitionState,
        expected_version: u64,
    ) -> Result<bool> {
        encode_state(new)?;
        let mut state = crate::sync::lock(&self.state);
        let Some((current, version)) = state.states.get_mut(&(topic.to_string(), partition)) else {
            return Err(Error::Config(format!("{topic} [{partition}] has no state")));
        };
        if *version != expected_version {
            return Ok(false);
        }
        *current = new.clone();
        *version += 1;
        Ok(true)
    }
}
