//! Kafka's SCRAM user admin APIs (DescribeUserScramCredentials,
//! AlterUserScramCredentials) on the registry's users, the ones
//! `klog-broker user` manages and every broker checks logins against.
//!
//! As the ACL APIs, they answer SECURITY_DISABLED on a broker without
//! `--authorize`: one that checks nothing must not show or change the
//! logins the others check. Describing needs describe on the cluster,
//! altering alter on it. A
//! client alters with a SaltedPassword it computed itself: the broker
//! stores the StoredKey and ServerKey derived from it, never the password.
//! Kafka's rules: a user's changes in one request apply together or not at
//! all; a user named twice for one mechanism is DUPLICATE_RESOURCE; an
//! empty name or iterations outside 4096–16384 UNACCEPTABLE_CREDENTIAL; a
//! mechanism other than SCRAM-SHA-256 and -512 UNSUPPORTED_SASL_MECHANISM;
//! deleting a credential that is not there RESOURCE_NOT_FOUND.

use std::collections::BTreeMap;

use super::access::Access;
use crate::broker::auth::{UserEntry, USERS};
use crate::coord::acl::Operation;
use crate::coord::Registry;
use crate::kafka::admin::{self as msg, code};
use crate::kafka::{
    DUPLICATE_RESOURCE, NONE, RESOURCE_NOT_FOUND, SECURITY_DISABLED, UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR, UNSUPPORTED_SASL_MECHANISM,
};
use crate::net::sasl::scram::Hash;
use crate::net::sasl::Credential;

type Refusal = (i16, String);

/// The registry to use, or why not: as for the ACL APIs, a broker without
/// `--authorize` (which checks nothing) changes and shows no user
/// (SECURITY_DISABLED), nor one without a registry; and `operation` on the
/// cluster must be allowed.
fn registry<'a>(access: &Access<'a>, operation: Operation) -> Result<&'a dyn Registry, Refusal> {
    if let Some(refused) = super::acls::refusal(access, operation) {
        return Err(refused);
    }
    access.registry().ok_or_else(|| {
        (
            SECURITY_DISABLED,
            "this broker runs without --registry, where users live".to_string(),
        )
    })
}

fn mechanism_code(hash: Hash) -> i8 {
    match hash {
        Hash::Sha256 => code::SCRAM_SHA_256,
        Hash::Sha512 => code::SCRAM_SHA_512,
    }
}

fn hash_of(mechanism: i8) -> Result<Hash, Refusal> {
    match mechanism {
        code::SCRAM_SHA_256 => Ok(Hash::Sha256),
        code::SCRAM_SHA_512 => Ok(Hash::Sha512),
        other => Err((
            UNSUPPORTED_SASL_MECHANISM,
            format!("SCRAM mechanism {other} is neither SCRAM-SHA-256 (1) nor SCRAM-SHA-512 (2)"),
        )),
    }
}

/// A user's entry, `None` when there is none.
fn entry(registry: &dyn Registry, name: &str) -> Result<Option<UserEntry>, Refusal> {
    let unreadable = |m: String| (UNKNOWN_SERVER_ERROR, m);
    match registry.config(USERS, name) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            (
                UNACCEPTABLE_CREDENTIAL,
                format!(
                    "user {name:?}'s entry does not parse ({e}): `klog-broker user add {name}` \
                     or an upsertion of every mechanism replaces it"
                ),
            )
        }),
        Ok(None) => Ok(None),
        Err(crate::error::Error::Config(m)) => Err((UNACCEPTABLE_CREDENTIAL, m)),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

/// DescribeUserScramCredentials: each user's mechanisms and iterations.
pub(super) fn describe(
    access: &Access<'_>,
    request: &msg::DescribeUserScramCredentialsRequest<'_>,
) -> msg::DescribeUserScramCredentialsResponse {
    let mut response = msg::DescribeUserScramCredentialsResponse {
        throttle_time_ms: 0,
        error_code: NONE,
        error_message: None,
        results: Vec::new(),
    };
    // Null or empty: every user (Kafka's rule; librdkafka sends empty).
    let asked: Option<Vec<String>> = match &request.users {
        Some(users) if !users.is_empty() => {
            Some(users.iter().map(|u| u.name.to_string()).collect())
        }
        _ => None,
    };
    let names = registry(access, Operation::Describe).and_then(|registry| {
        let names = match &asked {
            Some(names) => names.clone(),
            None => registry
                .configs(USERS)
                .map_err(|e| (UNKNOWN_SERVER_ERROR, e.to_string()))?,
        };
        Ok((registry, names))
    });
    let (registry, names) = match names {
        Ok(found) => found,
        Err((code, message)) => {
            // Each user named gets the error; the whole answer only when
            // none was named (librdkafka 2.16 aborts on a top-level error
            // beside per-user results, which Kafka sends both of).
            for name in asked.iter().flatten() {
                response
                    .results
                    .push(described(name, Err((code, message.clone()))));
            }
            if asked.is_none() {
                response.error_code = code;
                response.error_message = Some(message);
            }
            return response;
        }
    };
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &names {
        *seen.entry(name).or_default() += 1;
    }
    for name in &names {
        let found = if seen[name.as_str()] > 1 {
            Err((
                DUPLICATE_RESOURCE,
                "a user is described once per request".to_string(),
            ))
        } else {
            entry(registry, name)
                .and_then(|e| e.ok_or_else(|| (RESOURCE_NOT_FOUND, format!("no user {name:?}"))))
        };
        response.results.push(described(name, found));
    }
    response
}

fn described(
    name: &str,
    found: Result<UserEntry, Refusal>,
) -> msg::DescribeUserScramCredentialsResult {
    let (error_code, error_message, credential_infos) = match found {
        Ok(entry) => {
            let infos = entry
                .credentials
                .iter()
                .map(|c| msg::CredentialInfo {
                    mechanism: mechanism_code(c.hash),
                    iterations: i32::try_from(c.iterations).unwrap_or(i32::MAX),
                })
                .collect();
            (NONE, None, infos)
        }
        Err((code, message)) => (code, Some(message), Vec::new()),
    };
    msg::DescribeUserScramCredentialsResult {
        user: name.to_string(),
        error_code,
        error_message,
        credential_infos,
    }
}

/// One user's changes in a request.
#[derive(Default)]
struct Changes {
    deletions: Vec<Hash>,
    upsertions: Vec<Credential>,
    refused: Option<Refusal>,
    /// Mechanisms named so far.
    named: Vec<i8>,
}

impl Changes {
    fn refuse(&mut self, refusal: Refusal) {
        self.refused.get_or_insert(refusal);
    }

    /// Notes `mechanism` named; a second time refuses the user's changes.
    fn name(&mut self, mechanism: i8) {
        if self.named.contains(&mechanism) {
            self.refuse((
                DUPLICATE_RESOURCE,
                "a credential is altered once per request".to_string(),
            ));
        }
        self.named.push(mechanism);
    }
}

/// AlterUserScramCredentials: each user's deletions and upsertions applied
/// together, or refused with the first reason.
pub(super) fn alter(
    access: &Access<'_>,
    request: &msg::AlterUserScramCredentialsRequest<'_>,
) -> msg::AlterUserScramCredentialsResponse {
    let allowed = registry(access, Operation::Alter);
    let mut users: BTreeMap<&str, Changes> = BTreeMap::new();
    for d in &request.deletions {
        let changes = users.entry(d.name).or_default();
        changes.name(d.mechanism);
        match hash_of(d.mechanism) {
            Ok(hash) => changes.deletions.push(hash),
            Err(refusal) => changes.refuse(refusal),
        }
    }
    for u in &request.upsertions {
        let changes = users.entry(u.name).or_default();
        changes.name(u.mechanism);
        let credential = hash_of(u.mechanism).and_then(|hash| {
            let iterations = u32::try_from(u.iterations).unwrap_or(0);
            Credential::from_salted(hash, u.salt, iterations, u.salted_password)
                .map_err(|e| (UNACCEPTABLE_CREDENTIAL, e.to_string()))
        });
        match credential {
            Ok(c) => changes.upsertions.push(c),
            Err(refusal) => changes.refuse(refusal),
        }
    }
    let results = users
        .into_iter()
        .map(|(name, changes)| {
            let done = match &allowed {
                Err(refusal) => Err(refusal.clone()),
                Ok(_) if name.is_empty() => Err((
                    UNACCEPTABLE_CREDENTIAL,
                    "a user's name cannot be empty".to_string(),
                )),
                Ok(registry) => apply(*registry, name, changes),
            };
            let (error_code, error_message) = match done {
                Ok(()) => (NONE, None),
                Err((code, message)) => (code, Some(message)),
            };
            msg::AlterUserScramCredentialsResult {
                user: name.to_string(),
                error_code,
                error_message,
            }
        })
        .collect();
    msg::AlterUserScramCredentialsResponse {
        throttle_time_ms: 0,
        results,
    }
}

/// Applies one user's changes in one [`Registry::update_config`] (no
/// other change of the user in between, from any broker): the entry
/// rewritten, or removed when no credential is left.
fn apply(registry: &dyn Registry, name: &str, changes: Changes) -> Result<(), Refusal> {
    if let Some(refusal) = changes.refused {
        return Err(refusal);
    }
    let mut refused: Option<Refusal> = None;
    let stored = registry.update_config(USERS, name, &mut |stored| {
        refused = None;
        let entry = match stored.map(serde_json::from_slice::<UserEntry>) {
            None => None,
            Some(Ok(entry)) => Some(entry),
            // A damaged entry is replaced by upsertions of every mechanism.
            Some(Err(_)) if changes.deletions.is_empty() => None,
            Some(Err(e)) => {
                refused = Some((
                    UNACCEPTABLE_CREDENTIAL,
                    format!("user {name:?}'s entry does not parse ({e})"),
                ));
                return Ok(stored.map(<[u8]>::to_vec));
            }
        };
        let mut credentials = entry.map(|e| e.credentials).unwrap_or_default();
        for hash in &changes.deletions {
            if !credentials.iter().any(|c| c.hash == *hash) {
                refused = Some((
                    RESOURCE_NOT_FOUND,
                    format!("user {name:?} has no {} credential", hash.mechanism()),
                ));
                return Ok(stored.map(<[u8]>::to_vec));
            }
            credentials.retain(|c| c.hash != *hash);
        }
        for credential in &changes.upsertions {
            credentials.retain(|c| c.hash != credential.hash);
            credentials.push(credential.clone());
        }
        if credentials.is_empty() {
            return Ok(None);
        }
        let entry = UserEntry { credentials };
        serde_json::to_vec(&entry)
            .map(Some)
            .map_err(|e| crate::error::Error::Config(e.to_string()))
    });
    if let Some(refusal) = refused {
        return Err(refusal);
    }
    stored.map_err(|e| match e {
        crate::error::Error::Config(m) => (UNACCEPTABLE_CREDENTIAL, m),
        other => (UNKNOWN_SERVER_ERROR, other.to_string()),
    })
}
