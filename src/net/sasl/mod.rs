//! SASL: PLAIN (RFC 4616) and SCRAM-SHA-256 and -512 (RFC 5802, RFC
//! 7677), as Kafka speaks them, for both of the broker's listeners and
//! for klog's clients.
//!
//! The exchange is a list of messages, each side's in turn: the client's
//! first, the server's challenge, and so on, until the server says it is
//! done ([`Step::Done`]) or refuses. Kafka carries them in
//! SaslAuthenticate requests after a SaslHandshake naming the mechanism;
//! klog's protocol carries them the same way
//! ([`crate::protocol::Request::SaslHandshake`]).
//!
//! Users have SCRAM credentials only ([`Credential`]: a salt, an iteration
//! count and two keys derived from the password, never the password), one
//! per hash, stored in the registry. PLAIN checks a password against the
//! same credential, by deriving it again.

use std::fmt;

use anyhow::bail;

pub mod scram;

pub use scram::Credential;

/// A SASL mechanism klog speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// The password in clear (over TLS, please).
    Plain,
    /// SCRAM with SHA-256.
    ScramSha256,
    /// SCRAM with SHA-512.
    ScramSha512,
}

/// Every mechanism, in the order a broker offers them.
pub const MECHANISMS: [Mechanism; 3] = [
    Mechanism::ScramSha512,
    Mechanism::ScramSha256,
    Mechanism::Plain,
];

impl Mechanism {
    /// A mechanism by its SASL name, in any case.
    pub fn parse(name: &str) -> Result<Mechanism, String> {
        MECHANISMS
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| {
                format!("{name:?} is not a SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
            })
    }

    /// A comma-separated list of them (`--sasl-mechanisms`).
    pub fn parse_list(list: &str) -> Result<Vec<Mechanism>, String> {
        let mut out = Vec::new();
        for name in list.split(',').filter(|n| !n.trim().is_empty()) {
            let m = Mechanism::parse(name)?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        if out.is_empty() {
            return Err("name one SASL mechanism or more".to_string());
        }
        Ok(out)
    }

    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The hash of a SCRAM mechanism.
    pub fn scram(self) -> Option<scram::Hash> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(scram::Hash::Sha256),
            Mechanism::ScramSha512 => Some(scram::Hash::Sha512),
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A client's SASL login: its mechanism, name and password.
#[derive(Clone)]
pub struct Login {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// The user's name.
    pub username: String,
    password: String,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A login; the name and password must be given.
    pub fn new(
        mechanism: &str,
        username: Option<&str>,
        password: Option<&str>,
    ) -> anyhow::Result<Login> {
        let mechanism = Mechanism::parse(mechanism).map_err(anyhow::Error::msg)?;
        let (Some(username), Some(password)) = (username, password) else {
            bail!("SASL needs -X sasl.username and -X sasl.password");
        };
        Ok(Login {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
        })
    }

    /// The client's side of an exchange.
    pub fn exchange(&self) -> ClientExchange {
        match self.mechanism.scram() {
            None => ClientExchange::Plain(Some(plain_message(&self.username, &self.password))),
            Some(hash) => {
                ClientExchange::Scram(scram::Client::new(hash, &self.username, &self.password))
            }
        }
    }
}

/// PLAIN's one message: authorization id (empty), name and password,
/// NUL-separated.
fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(username.len() + password.len() + 2);
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

/// The client's side of an exchange.
#[derive(Debug)]
pub enum ClientExchange {
    /// PLAIN: its one message, until sent.
    Plain(Option<Vec<u8>>),
    /// SCRAM.
    Scram(scram::Client),
}

impl ClientExchange {
    /// The client's next message, given the server's last (empty at the
    /// start); `None`: the client has nothing more to say and the server's
    /// last message checked out.
    pub fn next(&mut self, from_server: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        match self {
            ClientExchange::Plain(message) => Ok(message.take()),
            ClientExchange::Scram(client) => client.next(from_server),
        }
    }
}

/// What a server knows of users: a user's credential for a hash.
pub trait Users {
    /// The credential of `user` for `hash`, if it has one.
    fn credential(&self, user: &str, hash: scram::Hash) -> Option<Credential>;
}

/// The server's answer to one client message.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A challenge for the client.
    Challenge(Vec<u8>),
    /// Authenticated as `User:NAME`; `last` goes to the client too (SCRAM's
    /// server signature; empty for PLAIN).
    Done {
        /// The principal, `User:NAME`.
        principal: String,
        /// The server's last message.
        last: Vec<u8>,
    },
}

/// The server's side of an exchange.
#[derive(Debug)]
pub struct ServerExchange {
    mechanism: Mechanism,
    scram: Option<scram::Server>,
}

/// Why authentication failed: always the same words to the client, so
/// that they do not tell an unknown user from a wrong password; the
/// detail is for the broker's log.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl ServerExchange {
    /// A server's exchange with `mechanism`.
    pub fn new(mechanism: Mechanism) -> ServerExchange {
        ServerExchange {
            mechanism,
            scram: None,
        }
    }

    /// The words a refused client is told.
    pub fn refusal(&self) -> String {
        format!(
            "Authentication failed: invalid credentials with SASL mechanism {}",
            self.mechanism
        )
    }

    /// Takes the client's next message.
    pub fn step(&mut self, message: &[u8], users: &dyn Users) -> Result<Step, Refused> {
        match self.mechanism.scram() {
            None => plain_check(message, users),
            Some(hash) => match self.scram.take() {
                None => {
                    let (server, challenge) = scram::Server::first(hash, message, users)?;
                    self.scram = Some(server);
                    Ok(Step::Challenge(challenge))
                }
                Some(server) => server.last(message),
            },
        }
    }
}

/// PLAIN: the password checked against the user's credential (SHA-512's
/// if it has one, else SHA-256's).
fn plain_check(message: &[u8], users: &dyn Users) -> Result<Step, Refused> {
    let text = std::str::from_utf8(message).map_err(|_| Refused("not UTF-8".into()))?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refused(
            "a PLAIN message is authzid NUL user NUL password".into(),
        ));
    };
    if !authzid.is_empty() && authzid != user {
        return Err(Refused(format!("{user} may not act for {authzid}")));
    }
    let found = [scram::Hash::Sha512, scram::Hash::Sha256]
        .into_iter()
        .find_map(|h| users.credential(user, h));
    let Some(credential) = found else {
        // As long as a known user's check: the answer's time does not
        // say which names exist.
        let _ = scram::decoy(scram::Hash::Sha512, user).matches(password);
        return Err(Refused(format!("unknown user {user:?}")));
    };
    if !credential.matches(password) {
        return Err(Refused(format!("wrong password for {user:?}")));
    }
    Ok(Step::Done {
        principal: format!("User:{user}"),
        last: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
