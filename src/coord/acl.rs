//! Access control lists, as Kafka's `kafka-acls` kept them in ZooKeeper:
//! who (a principal, `User:NAME` or `User:*`) may or may not do what (an
//! [`Operation`]) to which resource (a topic, a group, a transactional id
//! or the cluster, by literal name, `*`, or a prefix). A pattern's name
//! is a registry name (letters, digits, `.`, `_`, `-`): a transactional
//! id with other bytes is matched by `*` or a prefix.
//!
//! They live in the registry as configuration entries of kind `acls`
//! ([`ACLS`]), one per resource pattern, each a JSON list of its rules:
//!
//! ```text
//! acls/topic.literal.orders   [{"principal":"User:alice","operation":"write","permission":"allow"}, ...]
//! acls/group.prefixed.etl-    [...]
//! acls/transactional-id.prefixed.etl-
//! acls/cluster.literal.kafka-cluster
//! acls/topic.any              (the literal name *: every topic)
//! ```
//!
//! A request is allowed when no deny rule matches it and an allow rule
//! does ([`decide`]). Allowing read, write or alter allows describe too;
//! a deny denies only what it names (or all), as in Kafka.

use std::fmt;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use super::Registry;
use crate::error::{Error, Result};

/// The registry's kind of configuration entry that holds ACLs.
pub const ACLS: &str = "acls";

/// The cluster resource's one name (Kafka's).
pub const CLUSTER: &str = "kafka-cluster";

/// What a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster (creating topics, brokers' own requests).
    Cluster,
    /// A transactional producer's `transactional.id`.
    #[serde(rename = "transactional-id")]
    TransactionalId,
}

impl ResourceType {
    /// Its name in entries' keys and in what klog says.
    fn name(self) -> &'static str {
        match self {
            ResourceType::Topic => "topic",
            ResourceType::Group => "group",
            ResourceType::Cluster => "cluster",
            ResourceType::TransactionalId => "transactional-id",
        }
    }
}

/// How a rule's name matches a resource's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternType {
    /// The same name, or any name for `*`.
    Literal,
    /// Any name that starts with it.
    Prefixed,
}

/// An operation on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Every operation.
    All,
    /// Fetch from a topic; join, sync, commit in a group.
    Read,
    /// Produce to a topic.
    Write,
    /// Create topics.
    Create,
    /// See a topic's or group's metadata and offsets.
    Describe,
    /// Change a resource (users, ACLs on the cluster).
    Alter,
    /// Delete a group (its committed offsets) or a topic.
    Delete,
    /// A broker's own requests to another (follower fetches).
    ClusterAction,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Allows what matches.
    Allow,
    /// Denies what matches, whatever allows it.
    Deny,
}

/// A resource pattern: a type, a name and how the name matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pattern {
    /// The type.
    pub resource: ResourceType,
    /// The name (`*`: every one, when literal).
    pub name: String,
    /// How it matches.
    pub pattern: PatternType,
}

/// One rule of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rule {
    /// `User:NAME`, or `User:*` for everyone.
    pub principal: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

/// A pattern with its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// The resource pattern.
    pub pattern: Pattern,
    /// Its rules.
    pub rules: Vec<Rule>,
}

impl Operation {
    /// An operation by its name (`read`, `cluster_action`...), any case.
    pub fn parse(s: &str) -> std::result::Result<Operation, String> {
        let ops = [
            ("all", Operation::All),
            ("read", Operation::Read),
            ("write", Operation::Write),
            ("create", Operation::Create),
            ("describe", Operation::Describe),
            ("alter", Operation::Alter),
            ("delete", Operation::Delete),
            ("cluster_action", Operation::ClusterAction),
            ("clusteraction", Operation::ClusterAction),
        ];
        let lower = s.to_ascii_lowercase().replace('-', "_");
        ops.iter()
            .find(|(n, _)| *n == lower)
            .map(|(_, o)| *o)
            .ok_or_else(|| {
                format!("{s:?} is not an operation: all, read, write, create, describe, alter, delete or cluster_action")
            })
    }

    /// Whether a rule for `self` covers a request for `asked`.
    fn covers(self, asked: Operation) -> bool {
        self == Operation::All
            || self == asked
            || (asked == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Alter | Operation::Delete
                ))
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = serde_json::to_value(self).ok();
        f.write_str(name.as_ref().and_then(|v| v.as_str()).unwrap_or("?"))
    }
}

impl Pattern {
    /// The registry entry's name: `TYPE.PATTERN.NAME`.
    pub fn key(&self) -> String {
        let kind = self.resource.name();
        let how = match self.pattern {
            PatternType::Literal => "literal",
            PatternType::Prefixed => "prefixed",
        };
        // `*` is not a name's letter: every name's key is `TYPE.any`.
        if self.name == "*" && self.pattern == PatternType::Literal {
            return format!("{kind}.any");
        }
        format!("{kind}.{how}.{}", self.name)
    }

    /// Whether it matches the resource `(resource, name)`.
    pub fn matches(&self, resource: ResourceType, name: &str) -> bool {
        self.resource == resource
            && match self.pattern {
                PatternType::Literal => self.name == "*" || self.name == name,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.resource.name();
        let prefixed = if self.pattern == PatternType::Prefixed {
            " (prefixed)"
        } else {
            ""
        };
        write!(f, "{kind} {}{prefixed}", self.name)
    }
}

/// Whether `principal` may do `operation` to `(resource, name)` under
/// `acls`: no matching deny, and a matching allow.
pub fn decide(
    acls: &[Acl],
    principal: &str,
    operation: Operation,
    (resource, name): (ResourceType, &str),
) -> bool {
    let mut allowed = false;
    for acl in acls.iter().filter(|a| a.pattern.matches(resource, name)) {
        for rule in &acl.rules {
            let who = rule.principal == principal || rule.principal == "User:*";
            if !who {
                continue;
            }
            match rule.permission {
                // A deny is of what it names: denying read denies no
                // describe (as in Kafka).
                Permission::Deny
                    if matches!(rule.operation, Operation::All) || rule.operation == operation =>
                {
                    return false
                }
                Permission::Deny => {}
                Permission::Allow if rule.operation.covers(operation) => allowed = true,
                Permission::Allow => {}
            }
        }
    }
    allowed
}

/// ACLs as last loaded, shared by a broker's threads.
#[derive(Debug, Default)]
pub struct Cache {
    acls: RwLock<Arc<Vec<Acl>>>,
}

impl Cache {
    /// Replaces the ACLs.
    pub fn set(&self, acls: Vec<Acl>) {
        *self.acls.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(acls);
    }

    /// The ACLs now.
    pub fn current(&self) -> Arc<Vec<Acl>> {
        Arc::clone(&self.acls.read().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Every ACL of a registry. An entry that does not parse may have held a
/// deny, so it counts as a deny of everything to everyone (super users
/// aside) on its resource, which its name says: the registry fails closed
/// there, and only there, until `klog-broker acl clear` removes it. An
/// entry whose name says no resource is an error (a broker keeps the ACLs
/// it had). [`load_each`] says what is damaged.
pub fn load(registry: &dyn Registry) -> Result<Vec<Acl>> {
    load_reporting(registry).map(|(acls, _)| acls)
}

/// [`load`], and what is damaged (each entry that does not parse, with
/// its repair), from one read of the entries.
pub fn load_reporting(registry: &dyn Registry) -> Result<(Vec<Acl>, Vec<String>)> {
    let (mut out, mut damaged) = (Vec::new(), Vec::new());
    for (key, entry) in entries(registry)? {
        match entry {
            Ok(acl) => out.push(acl),
            Err(why) => {
                let pattern = pattern_of_key(&key).ok_or_else(|| Error::Config(why.clone()))?;
                out.push(Acl {
                    pattern,
                    rules: vec![Rule {
                        principal: "User:*".into(),
                        operation: Operation::All,
                        permission: Permission::Deny,
                    }],
                });
                damaged.push(why);
            }
        }
    }
    Ok((out, damaged))
}

/// The resource pattern an entry's name stands for (see [`Pattern::key`]).
fn pattern_of_key(key: &str) -> Option<Pattern> {
    let (kind, rest) = key.split_once('.')?;
    let resource = match kind {
        "topic" => ResourceType::Topic,
        "group" => ResourceType::Group,
        "cluster" => ResourceType::Cluster,
        "transactional-id" => ResourceType::TransactionalId,
        _ => return None,
    };
    let (pattern, name) = match rest.split_once('.') {
        Some(("literal", name)) => (PatternType::Literal, name),
        Some(("prefixed", name)) => (PatternType::Prefixed, name),
        None if rest == "any" => (PatternType::Literal, "*"),
        _ => return None,
    };
    Some(Pattern {
        resource,
        name: name.to_string(),
        pattern,
    })
}

/// Every ACL entry of a registry, each parsed or why not (with the command
/// that removes it).
pub fn load_each(registry: &dyn Registry) -> Result<Vec<std::result::Result<Acl, String>>> {
    Ok(entries(registry)?.into_iter().map(|(_, e)| e).collect())
}

/// Every ACL entry with its name, parsed or why not.
fn entries(registry: &dyn Registry) -> Result<Vec<(String, std::result::Result<Acl, String>)>> {
    let mut out = Vec::new();
    for key in registry.configs(ACLS)? {
        let Some(bytes) = registry.config(ACLS, &key)? else {
            continue;
        };
        let parsed = parse(&bytes).map_err(|e| {
            format!(
                "the ACL entry {ACLS}/{key} does not parse ({e}), and counts as a deny of all to \
                 everyone on its resource: `klog-broker acl clear {}` removes it, and every rule \
                 it held, deny rules too (it prints them as they were): add back those the \
                 resource needs with `klog-broker acl add`",
                clear_args(&key)
            )
        });
        out.push((key, parsed));
    }
    Ok(out)
}

/// `klog-broker acl clear`'s arguments for the entry `key`.
fn clear_args(key: &str) -> String {
    let (kind, rest) = key.split_once('.').unwrap_or((key, ""));
    let flag = match kind {
        "cluster" => return "--cluster".to_string(),
        "group" => "--group",
        "transactional-id" => "--transactional-id",
        _ => "--topic",
    };
    match rest.split_once('.') {
        Some(("prefixed", name)) => format!("{flag} '{name}' --prefixed"),
        Some((_, name)) => format!("{flag} '{name}'"),
        None => format!("{flag} '*'"),
    }
}

/// An ACL entry as stored: its pattern and its rules.
pub fn parse(bytes: &[u8]) -> std::result::Result<Acl, serde_json::Error> {
    let stored: Stored = serde_json::from_slice(bytes)?;
    Ok(Acl {
        pattern: stored.pattern,
        rules: stored.rules,
    })
}

/// A pattern's entry as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    pattern: Pattern,
    rules: Vec<Rule>,
}

/// Adds a rule to a pattern's entry (a rule already there is kept once),
/// with no other change of the entry in between, from any host.
pub fn add(registry: &dyn Registry, pattern: &Pattern, rule: Rule) -> Result<()> {
    check(pattern)?;
    update(registry, pattern, &mut |rules| {
        if !rules.contains(&rule) {
            rules.push(rule.clone());
        }
    })
    .map(drop)
}

/// Removes a rule from a pattern's entry (the entry goes with its last
/// rule); whether it was there.
pub fn remove(registry: &dyn Registry, pattern: &Pattern, rule: &Rule) -> Result<bool> {
    check(pattern)?;
    let mut removed = false;
    update(registry, pattern, &mut |rules| {
        let before = rules.len();
        rules.retain(|r| r != rule);
        removed = rules.len() != before;
    })?;
    Ok(removed)
}

/// Changes a pattern's rules in one [`Registry::update_config`]; an entry
/// left with no rule is removed.
fn update(
    registry: &dyn Registry,
    pattern: &Pattern,
    change: &mut dyn FnMut(&mut Vec<Rule>),
) -> Result<()> {
    registry.update_config(ACLS, &pattern.key(), &mut |stored| {
        let mut rules = match stored {
            None => Vec::new(),
            Some(bytes) => {
                let stored: Stored = serde_json::from_slice(bytes).map_err(|e| {
                    Error::Config(format!(
                        "the ACLs of {pattern} do not parse ({e}): `klog-broker acl clear` \
                         of that resource removes the damaged entry"
                    ))
                })?;
                stored.rules
            }
        };
        change(&mut rules);
        if rules.is_empty() {
            return Ok(None);
        }
        let stored = Stored {
            pattern: pattern.clone(),
            rules,
        };
        serde_json::to_vec(&stored)
            .map(Some)
            .map_err(|e| Error::Config(e.to_string()))
    })
}

/// Removes a pattern's entry whatever it holds, damaged or not; what it
/// held, if there was one.
pub fn remove_all(registry: &dyn Registry, pattern: &Pattern) -> Result<Option<Vec<u8>>> {
    check(pattern)?;
    let mut removed = None;
    registry.update_config(ACLS, &pattern.key(), &mut |stored| {
        removed = stored.map(<[u8]>::to_vec);
        Ok(None)
    })?;
    Ok(removed)
}

/// A principal as rules name it: `User:NAME`, `User:CN=...` or `User:*`.
pub fn check_principal(s: &str) -> std::result::Result<(), String> {
    match s.strip_prefix("User:") {
        Some(name) if !name.is_empty() => Ok(()),
        _ => Err(format!(
            "{s:?} is not a principal: User:NAME, User:CN=..., or User:*"
        )),
    }
}

/// A pattern's name must be a resource's name (or `*`); the cluster's is
/// Kafka's one name.
fn check(pattern: &Pattern) -> Result<()> {
    if pattern.resource == ResourceType::Cluster && pattern.name != CLUSTER {
        return Err(Error::Config(format!(
            "the cluster resource is named {CLUSTER}, not {:?}",
            pattern.name
        )));
    }
    if pattern.name == "*" && pattern.pattern == PatternType::Literal {
        return Ok(());
    }
    super::registry::check_name("resource", &pattern.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        resource: ResourceType,
        name: &str,
        pattern: PatternType,
        rules: &[(&str, Operation, Permission)],
    ) -> Acl {
        Acl {
            pattern: Pattern {
                resource,
                name: name.into(),
                pattern,
            },
            rules: rules
                .iter()
                .map(|(p, o, a)| Rule {
                    principal: p.to_string(),
                    operation: *o,
                    permission: *a,
                })
                .collect(),
        }
    }

    #[test]
    fn deny_beats_allow_and_nothing_is_allowed_unless_a_rule_says_so() {
        use Operation::*;
        use Permission::*;
        use ResourceType::*;
        let acls = vec![
            acl(
                Topic,
                "orders",
                PatternType::Literal,
                &[("User:alice", Write, Allow)],
            ),
            acl(
                Topic,
                "logs-",
                PatternType::Prefixed,
                &[("User:*", Read, Allow), ("User:mallory", All, Deny)],
            ),
            acl(
                Group,
                "*",
                PatternType::Literal,
                &[("User:bob", Read, Allow)],
            ),
        ];
        assert!(decide(&acls, "User:alice", Write, (Topic, "orders")));
        assert!(
            decide(&acls, "User:alice", Describe, (Topic, "orders")),
            "write implies describe"
        );
        assert!(!decide(&acls, "User:alice", Read, (Topic, "orders")));
        assert!(!decide(&acls, "User:bob", Write, (Topic, "orders")));
        assert!(decide(&acls, "User:bob", Read, (Topic, "logs-web")));
        assert!(
            !decide(&acls, "User:bob", Read, (Topic, "logs")),
            "a prefix is a prefix"
        );
        assert!(
            !decide(&acls, "User:mallory", Read, (Topic, "logs-web")),
            "deny beats allow"
        );
        assert!(decide(&acls, "User:bob", Read, (Group, "any")));
        assert!(
            !decide(&acls, "User:bob", Read, (Topic, "any")),
            "a group's rule is not a topic's"
        );
        assert!(!decide(&acls, "User:alice", Create, (Cluster, CLUSTER)));
        // A deny of read leaves the describe a write implies.
        let acls = vec![acl(
            Topic,
            "o",
            PatternType::Literal,
            &[("User:a", Write, Allow), ("User:a", Read, Deny)],
        )];
        assert!(decide(&acls, "User:a", Describe, (Topic, "o")));
        assert!(decide(&acls, "User:a", Write, (Topic, "o")));
        assert!(!decide(&acls, "User:a", Read, (Topic, "o")));
    }

    #[test]
    fn rules_are_added_once_removed_and_loaded() {
        let registry = crate::coord::mem::MemRegistry::default();
        let pattern = Pattern {
            resource: ResourceType::Topic,
            name: "t".into(),
            pattern: PatternType::Literal,
        };
        let rule = Rule {
            principal: "User:alice".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        add(&registry, &pattern, rule.clone()).unwrap();
        add(&registry, &pattern, rule.clone()).unwrap();
        let acls = load(&registry).unwrap();
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].rules, vec![rule.clone()]);
        assert!(remove(&registry, &pattern, &rule).unwrap());
        assert!(!remove(&registry, &pattern, &rule).unwrap());
        assert!(load(&registry).unwrap().is_empty());
        let cluster = Pattern {
            resource: ResourceType::Cluster,
            name: "mine".into(),
            pattern: PatternType::Literal,
        };
        assert!(add(&registry, &cluster, rule).is_err());
    }

    fn rule_of(principal: &str) -> Rule {
        Rule {
            principal: principal.into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    /// Two brokers adding rules to one pattern at once (two handles on one
    /// directory registry, each with its own lock file description) lose
    /// none: each change reads, changes and writes under the kind's lock.
    #[test]
    fn rules_added_at_once_through_two_handles_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = Pattern {
            resource: ResourceType::Topic,
            name: "shared".into(),
            pattern: PatternType::Literal,
        };
        std::thread::scope(|scope| {
            for who in ["a", "b"] {
                let registry = crate::coord::dir::DirRegistry::open(dir.path()).unwrap();
                let pattern = &pattern;
                scope.spawn(move || {
                    for i in 0..60 {
                        add(&registry, pattern, rule_of(&format!("User:{who}{i}"))).unwrap();
                    }
                });
            }
        });
        let registry = crate::coord::dir::DirRegistry::open(dir.path()).unwrap();
        let acls = load(&registry).unwrap();
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].rules.len(), 120);
    }

    /// An entry that does not parse denies all on its resource (the lost
    /// rule may have been a deny), names its repair, and `clear`
    /// (remove_all) is that repair.
    #[test]
    fn a_damaged_entry_fails_the_load_and_names_its_repair() {
        let registry = crate::coord::mem::MemRegistry::default();
        let secret = Pattern {
            resource: ResourceType::Topic,
            name: "secret".into(),
            pattern: PatternType::Prefixed,
        };
        add(&registry, &secret, rule_of("User:a")).unwrap();
        registry
            .set_config(ACLS, &secret.key(), b"{\"pattern\":")
            .unwrap();
        let e = load_each(&registry).unwrap().remove(0).unwrap_err();
        assert!(
            e.contains("klog-broker acl clear --topic 'secret' --prefixed"),
            "{e}"
        );
        // It fails closed on its resource, and there only.
        let acls = load(&registry).unwrap();
        assert!(!decide(
            &acls,
            "User:a",
            Operation::Read,
            (ResourceType::Topic, "secret-x")
        ));
        let open = Pattern {
            resource: ResourceType::Topic,
            name: "open".into(),
            pattern: PatternType::Literal,
        };
        add(&registry, &open, rule_of("User:a")).unwrap();
        let acls = load(&registry).unwrap();
        assert!(decide(
            &acls,
            "User:a",
            Operation::Read,
            (ResourceType::Topic, "open")
        ));
        assert_eq!(pattern_of_key("group.any").unwrap().name, "*");
        let etl = Pattern {
            resource: ResourceType::TransactionalId,
            name: "etl-".into(),
            pattern: PatternType::Prefixed,
        };
        assert_eq!(etl.key(), "transactional-id.prefixed.etl-");
        assert_eq!(pattern_of_key(&etl.key()), Some(etl.clone()));
        assert_eq!(
            clear_args(&etl.key()),
            "--transactional-id 'etl-' --prefixed"
        );
        add(&registry, &etl, rule_of("User:a")).unwrap();
        let acls = load(&registry).unwrap();
        let txn = |id| (ResourceType::TransactionalId, id);
        assert!(decide(&acls, "User:a", Operation::Read, txn("etl-1")));
        assert!(!decide(&acls, "User:a", Operation::Read, txn("app-1")));
        assert!(!decide(
            &acls,
            "User:a",
            Operation::Read,
            (ResourceType::Topic, "etl-1")
        ));
        assert!(pattern_of_key("stray").is_none());
        assert!(add(&registry, &secret, rule_of("User:b")).is_err());
        assert!(remove_all(&registry, &secret).unwrap().is_some());
        let acls = load(&registry).unwrap();
        assert!(acls.iter().all(|a| a.pattern != secret), "{acls:?}");
        assert!(load_each(&registry).unwrap().iter().all(Result::is_ok));
        assert_eq!(clear_args("cluster.literal.kafka-cluster"), "--cluster");
        assert_eq!(clear_args("group.any"), "--group '*'");
    }
}
