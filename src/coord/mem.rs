//! A registry in memory, for unit tests of what sits on the registry
//! (the trait's provided methods, a group member's rebalance) without a
//! directory, a broker or a second process. Clones share one registry, as
//! processes share a directory; dropping a handle is its process dying.
//!
//! It is stricter than a real backend where that finds bugs: a commit
//! whose handle is not the current claim of that very partition panics,
//! so a test fails on a member that commits what it does not own.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::coord::registry::{
    check_name, to_json, BrokerInfo, Ephemeral, Held, MemberInfo, Placement, Registry,
};
use crate::error::{Error, Result};

/// A registry in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemRegistry {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Handles given out, to tell a claim from a later one of the same key.
    handles_given: u64,
    /// Live ephemeral entries by key (`brokers/b1`, `consumers/g/m`,
    /// `owners/g/t-0`): the handle that holds each, and its description.
    live: BTreeMap<String, (u64, Vec<u8>)>,
    offsets: BTreeMap<(String, String, u32), u64>,
    /// Offsets stored, lower ones included.
    stores: u64,
    placements: BTreeMap<String, Placement>,
    /// A placement that wins the next race (see `lose_next_placement`).
    rival: Option<Placement>,
}

/// A held entry: its key, and which handle of that key it is.
#[derive(Debug)]
struct Hold {
    key: String,
    handle: u64,
    state: Arc<Mutex<State>>,
}

impl Held for Hold {
    fn update(&self, json: &[u8]) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        if let Some((h, info)) = state.live.get_mut(&self.key) {
            if *h == self.handle && !self.key.starts_with("owners/") {
                *info = json.to_vec();
            }
        }
        Ok(())
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
            .is_some_and(|(h, _)| *h == self.handle)
        {
            state.live.remove(&self.key);
        }
    }
}

fn owner_key(group: &str, topic: &str, partition: u32) -> String {
    format!("owners/{group}/{topic}-{partition}")
}

impl MemRegistry {
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

    /// Takes `key` unless it is held: the entry's handle.
    fn hold(&self, key: String, json: Vec<u8>) -> Option<Ephemeral> {
        let mut state = crate::sync::lock(&self.state);
        if state.live.contains_key(&key) {
            return None;
        }
        state.handles_given += 1;
        let handle = state.handles_given;
        state.live.insert(key.clone(), (handle, json));
        Some(Ephemeral::new(Hold {
            key,
            handle,
            state: Arc::clone(&self.state),
        }))
    }

    /// The descriptions of the live entries under `prefix` that parse.
    fn live<T: for<'de> Deserialize<'de>>(&self, prefix: &str) -> Vec<T> {
        let state = crate::sync::lock(&self.state);
        let under = state.live.iter().filter(|(k, _)| k.starts_with(prefix));
        under
            .filter_map(|(_, (_, json))| serde_json::from_slice(json).ok())
            .collect()
    }
}

impl Registry for MemRegistry {
    fn location(&self) -> String {
        "memory".into()
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        check_name("broker", &info.id)?;
        let key = format!("brokers/{}", info.id);
        self.hold(key.clone(), to_json(info)?)
            .ok_or_else(|| Error::InUse { path: key.into() })
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        Ok(self.live("brokers/"))
    }

    fn join(&self, group: &str, info: &MemberInfo) -> Result<Ephemeral> {
        check_name("group", group)?;
        check_name("member", &info.member)?;
        let key = format!("consumers/{group}/{}", info.member);
        self.hold(key.clone(), to_json(info)?)
            .ok_or_else(|| Error::InUse { path: key.into() })
    }

    fn members(&self, group: &str) -> Result<Vec<MemberInfo>> {
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
    ) -> Result<Option<Ephemeral>> {
        check_name("group", group)?;
        check_name("topic", topic)?;
        Ok(self.hold(
            owner_key(group, topic, partition),
            member.as_bytes().to_vec(),
        ))
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<String> {
        let state = crate::sync::lock(&self.state);
        let (_, member) = state.live.get(&owner_key(group, topic, partition))?;
        Some(String::from_utf8_lossy(member).into_owned())
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
        let current = state.live.get(&key).map(|(h, _)| *h);
        assert!(
            hold.key == key && current == Some(hold.handle),
            "{key} committed with the handle of {} (handle {}), not its owner's",
            hold.key,
            hold.handle
        );
        state.stores += 1;
        state
            .offsets
            .insert((group.into(), topic.into(), partition), offset);
        Ok(())
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
}
