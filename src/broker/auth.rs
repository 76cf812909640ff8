//! Who is on a connection: its TLS client certificate's subject, or the
//! user it logged in as with SASL ([`crate::net::sasl`]), checked against
//! the users of the registry (`klog-broker user add`).
//!
//! A broker with `--sasl-mechanisms` serves nothing but the SASL exchange
//! to a connection until it has logged in; one refused login closes the
//! connection. Users' credentials are read from the registry at each
//! login, so a user added or removed on any host counts at the next login.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::shared::Shared;
use crate::coord::acl::{self, Operation, ResourceType};
use crate::coord::Registry;
use crate::error::ErrorCode;
use crate::net::sasl::scram::Hash;
use crate::net::sasl::{Credential, Mechanism, ServerExchange, Step, Users};
use crate::net::tls::ServerTls;

/// The registry's kind of configuration entry that holds users.
pub const USERS: &str = "users";

/// A broker's security: TLS on both listeners, and the SASL mechanisms
/// it takes (none: no login asked).
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// TLS, if on.
    pub tls: Option<ServerTls>,
    /// The SASL mechanisms taken; empty: no SASL.
    pub sasl: Vec<Mechanism>,
    /// Whether clients must prove who they are (SASL, or client
    /// certificates).
    pub authenticated: bool,
    /// Deny what the registry's ACLs do not allow (`--authorize`).
    pub authorize: bool,
    /// Principals allowed everything (`--super-users`).
    pub super_users: Vec<String>,
    /// The principal this broker shows the others (registered with it).
    pub principal: Option<String>,
}

/// How often a broker reloads the registry's ACLs.
pub const ACL_RELOAD: Duration = Duration::from_millis(500);

/// Reloads the registry's ACLs every [`ACL_RELOAD`] while the broker
/// runs (with `--authorize`), so that a change made on any host counts
/// on every broker within a second. A registry that cannot be read keeps
/// the ACLs last loaded (said, throttled).
pub(super) fn reload_acls(shared: &Shared) {
    let Some(registry) = shared.registry.as_deref() else {
        return;
    };
    if !shared.config.security.authorize {
        return;
    }
    while !shared.stopping() {
        match acl::load_reporting(registry) {
            Ok((acls, damaged)) => {
                shared.authorizer.set(acls);
                // A damaged entry denies all on its resource: said, with
                // its repair (throttled).
                for why in damaged {
                    shared.log_peer(format_args!("{why}"));
                }
            }
            Err(e) => shared.log_peer(format_args!("cannot reload the ACLs: {e}")),
        }
        let deadline = std::time::Instant::now() + ACL_RELOAD;
        while !shared.stopping() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether `principal` may do `operation` to the resource: always without
/// `--authorize`; for a super user; else as the ACLs decide.
pub(super) fn allows(
    shared: &Shared,
    principal: &str,
    operation: Operation,
    resource: (ResourceType, &str),
) -> bool {
    let security = &shared.config.security;
    if !security.authorize || security.super_users.iter().any(|s| s == principal) {
        return true;
    }
    acl::decide(&shared.authorizer.current(), principal, operation, resource)
}

/// Whether `principal` has an allow rule for `operation` on any topic
/// (Kafka lets a producer with write on any topic ask for a producer id;
/// a rule on another resource, a transactional id's, does not count).
pub(super) fn allows_any(shared: &Shared, principal: &str, operation: Operation) -> bool {
    let security = &shared.config.security;
    if !security.authorize || security.super_users.iter().any(|s| s == principal) {
        return true;
    }
    let topics = shared.authorizer.current();
    let topics = topics
        .iter()
        .filter(|a| a.pattern.resource == ResourceType::Topic);
    topics.into_iter().any(|a| {
        let resource = (a.pattern.resource, a.pattern.name.as_str());
        acl::decide(std::slice::from_ref(a), principal, operation, resource)
    })
}

/// A user's entry in the registry: its SCRAM credentials, one per hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserEntry {
    /// The credentials.
    pub credentials: Vec<Credential>,
}

/// The users of a registry.
struct RegistryUsers<'a>(&'a dyn Registry);

impl Users for RegistryUsers<'_> {
    fn credential(&self, user: &str, hash: Hash) -> Option<Credential> {
        let bytes = self.0.config(USERS, user).ok()??;
        let entry: UserEntry = serde_json::from_slice(&bytes).ok()?;
        entry.credentials.into_iter().find(|c| c.hash == hash)
    }
}

/// A connection's authentication.
#[derive(Debug)]
pub(super) struct Session {
    /// `User:NAME`, `User:` and a certificate's subject, or
    /// `User:ANONYMOUS`.
    pub(super) principal: String,
    /// Whether it may send requests other than SASL's.
    ready: bool,
    exchange: Option<ServerExchange>,
    /// The broker id this connection proved to be (a follower's fetches).
    replica: Option<String>,
}

/// A refused SASL step: the code, the words for the client, and whether
/// the connection must close.
pub(super) type Refusal = (ErrorCode, String);

impl Session {
    /// A new connection's, with its TLS certificate's principal if any.
    pub(super) fn new(shared: &Shared, tls_principal: Option<String>) -> Session {
        Session {
            principal: tls_principal.unwrap_or_else(|| "User:ANONYMOUS".to_string()),
            ready: shared.config.security.sasl.is_empty(),
            exchange: None,
            replica: None,
        }
    }

    /// Whether it may send requests other than SASL's.
    pub(super) fn ready(&self) -> bool {
        self.ready
    }

    /// A handshake naming `mechanism`. Gives the mechanisms taken either
    /// way (for the answer).
    pub(super) fn handshake(
        &mut self,
        shared: &Shared,
        mechanism: &str,
    ) -> (Vec<&'static str>, Result<(), Refusal>) {
        let taken = &shared.config.security.sasl;
        let names = taken.iter().map(|m| m.name()).collect();
        if self.ready || self.exchange.is_some() {
            let why = "SASL is done or under way on this connection".to_string();
            return (names, Err((ErrorCode::IllegalSaslState, why)));
        }
        match Mechanism::parse(mechanism) {
            Ok(m) if taken.contains(&m) => {
                self.exchange = Some(ServerExchange::new(m));
                (names, Ok(()))
            }
            _ => {
                let why = format!(
                    "this broker does not take SASL mechanism {mechanism:?}; it takes {}",
                    if taken.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                );
                (names, Err((ErrorCode::UnsupportedSaslMechanism, why)))
            }
        }
    }

    /// The client's next SASL message: the broker's answer, or the
    /// refusal (the connection then closes).
    pub(super) fn authenticate(
        &mut self,
        shared: &Shared,
        peer: SocketAddr,
        message: &[u8],
    ) -> Result<Vec<u8>, Refusal> {
        let Some(exchange) = self.exchange.as_mut() else {
            let why = "sasl_authenticate before sasl_handshake".to_string();
            return Err((ErrorCode::IllegalSaslState, why));
        };
        let Some(registry) = shared.registry.as_deref() else {
            return Err((ErrorCode::SaslAuthenticationFailed, exchange.refusal()));
        };
        match exchange.step(message, &RegistryUsers(registry)) {
            Ok(Step::Challenge(c)) => Ok(c),
            Ok(Step::Done { principal, last }) => {
                self.principal = principal;
                self.ready = true;
                self.exchange = None;
                Ok(last)
            }
            Err(refused) => {
                shared.log_peer(format_args!("{peer}: SASL login refused: {}", refused.0));
                let words = exchange.refusal();
                self.exchange = None;
                Err((ErrorCode::SaslAuthenticationFailed, words))
            }
        }
    }
}

impl Session {
    /// Whether `operation` on the resource is allowed to this connection.
    pub(super) fn allows(
        &self,
        shared: &Shared,
        operation: Operation,
        resource: (ResourceType, &str),
    ) -> bool {
        allows(shared, &self.principal, operation, resource)
    }

    /// Whether this connection may fetch as the follower `broker_id`: it
    /// needs cluster_action, and, where clients prove who they are, to be
    /// the principal that broker registered with. The answer for a broker
    /// id is looked up once per connection.
    pub(super) fn may_replicate(&mut self, shared: &Shared, broker_id: &str) -> Result<(), String> {
        let cluster = (ResourceType::Cluster, acl::CLUSTER);
        if !self.allows(shared, Operation::ClusterAction, cluster) {
            return Err(format!(
                "{} may not fetch as a replica: it lacks cluster_action on the cluster",
                self.principal
            ));
        }
        if !shared.config.security.authenticated || self.replica.as_deref() == Some(broker_id) {
            return Ok(());
        }
        let registered = shared
            .registry
            .as_deref()
            .and_then(|r| r.brokers().ok())
            .and_then(|brokers| brokers.into_iter().find(|b| b.id == broker_id))
            .and_then(|b| b.principal);
        if registered.as_deref() != Some(self.principal.as_str()) {
            return Err(format!(
                "{} claims to be broker {broker_id:?}, which registered as {}",
                self.principal,
                registered.as_deref().unwrap_or("nobody")
            ));
        }
        self.replica = Some(broker_id.to_string());
        Ok(())
    }
}
