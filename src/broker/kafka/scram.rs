//! Kafka's SCRAM user admin APIs (DescribeUserScramCredentials,
//! AlterUserScramCredentials) on the registry's users, the ones
//! `klog-broker user` manages and every broker checks logins against.
//!
//! Describing needs describe on the cluster, altering alter on it. A
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
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::coord::Registry;
use crate::kafka::admin::{self as msg, code};
use crate::kafka::{
    CLUSTER_AUTHORIZATION_FAILED, NONE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR, UNSUPPORTED_SASL_MECHANISM,
};
use crate::net::sasl::scram::Hash;
use crate::net::sasl::Credential;

/// A credential already named for the same user and mechanism.
const DUPLICATE_RESOURCE: i16 = 92;

type Refusal = (i16, String);

/// The registry to use, or why not: `operation` on the cluster must be
/// allowed, and there must be a registry.
fn registry<'a>(access: &Access<'a>, operation: Operation) -> Result<&'a dyn Registry, Refusal> {
    if !access.allows(operation, ResourceType::Cluster, CLUSTER) {
        return Err((
            CLUSTER_AUTHORIZATION_FAILED,
            format!("{operation} on the cluster is not allowed"),
        ));
    }
    access.registry().ok_or_else(|| {
        (
            UNKNOWN_SERVER_ERROR,
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
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| unreadable(format!("user {name:?} does not parse: {e}"))),
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
    let names = registry(access, Operation::Describe).and_then(|registry| {
        let names = match &request.users {
            Some(users) => users.iter().map(|u| u.name.to_string()).collect(),
            None => registry
                .configs(USERS)
                .map_err(|e| (UNKNOWN_SERVER_ERROR, e.to_string()))?,
        };
        Ok((registry, names))
    });
    let (registry, names) = match names {
        Ok(found) => found,
        Err((code, message)) => {
            response.error_code = code;
            response.error_message = Some(message);
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

/// Applies one user's changes: the entry rewritten, or removed when no
/// credential is left.
fn apply(registry: &dyn Registry, name: &str, changes: Changes) -> Result<(), Refusal> {
    if let Some(refusal) = changes.refused {
        return Err(refusal);
    }
    let mut credentials = entry(registry, name)?
        .map(|e| e.credentials)
        .unwrap_or_default();
    for hash in &changes.deletions {
        if !credentials.iter().any(|c| c.hash == *hash) {
            return Err((
                RESOURCE_NOT_FOUND,
                format!("user {name:?} has no {} credential", hash.mechanism()),
            ));
        }
        credentials.retain(|c| c.hash != *hash);
    }
    for credential in changes.upsertions {
        credentials.retain(|c| c.hash != credential.hash);
        credentials.push(credential);
    }
    let stored = if credentials.is_empty() {
        registry.remove_config(USERS, name).map(|_| ())
    } else {
        let entry = UserEntry { credentials };
        let bytes =
            serde_json::to_vec(&entry).map_err(|e| (UNKNOWN_SERVER_ERROR, e.to_string()))?;
        registry.set_config(USERS, name, &bytes)
    };
    stored.map_err(|e| match e {
        crate::error::Error::Config(m) => (UNACCEPTABLE_CREDENTIAL, m),
        other => (UNKNOWN_SERVER_ERROR, other.to_string()),
    })
}
