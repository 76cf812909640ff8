//! Who is on a connection: its TLS client certificate's subject, or the
//! user it logged in as with SASL ([`crate::net::sasl`]), checked against
//! the users of the registry (`klog-broker user add`).
//!
//! A broker with `--sasl-mechanisms` serves nothing but the SASL exchange
//! to a connection until it has logged in; one refused login closes the
//! connection. Users' credentials are read from the registry at each
//! login, so a user added or removed on any host counts at the next login.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::shared::Shared;
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
