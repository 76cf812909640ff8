//! How this process's clients connect to brokers: plaintext, TLS, SASL,
//! or SASL over TLS, from kcat's properties (`-X security.protocol=...`).
//!
//! One setting per process, made once at its start ([`set_client`]): the
//! tools from their `-X` properties, a broker from its own flags (for its
//! connections to the other brokers). Every connection the process opens
//! ([`crate::client::connection`]) goes that way.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::sasl::Login;
use super::tls::ClientTls;

/// Kafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Neither TLS nor SASL.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl Protocol {
    /// Whether it encrypts.
    pub fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    /// Whether it authenticates with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientSecurity {
    /// TLS, if the protocol has it.
    pub tls: Option<ClientTls>,
    /// SASL's mechanism and credentials, if the protocol has it.
    pub sasl: Option<Login>,
}

static CLIENT: OnceLock<ClientSecurity> = OnceLock::new();

/// Sets how this process's connections go; only the first call counts.
pub fn set_client(security: ClientSecurity) {
    let _ = CLIENT.set(security);
}

/// How this process's connections go (`None`: plaintext).
pub fn client() -> Option<&'static ClientSecurity> {
    CLIENT.get()
}

/// The names of the properties [`Properties`] takes.
pub const NAMES: &[&str] = &[
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "sasl.mechanisms",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
];

/// The security properties of a command line, gathered as they come.
#[derive(Debug, Default, Clone)]
pub struct Properties {
    protocol: Option<String>,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    mechanism: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Properties {
    /// Takes one property (one of [`NAMES`]).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let v = value.to_string();
        match name {
            "security.protocol" => {
                parse_protocol(value)?;
                self.protocol = Some(v);
            }
            "ssl.ca.location" => self.ca = Some(v.into()),
            "ssl.certificate.location" => self.cert = Some(v.into()),
            "ssl.key.location" => self.key = Some(v.into()),
            "sasl.mechanisms" | "sasl.mechanism" => {
                super::sasl::Mechanism::parse(value)?;
                self.mechanism = Some(v);
            }
            "sasl.username" => self.username = Some(v),
            "sasl.password" => self.password = Some(v),
            _ => {
                return Err(format!(
                    "{name} is not a security property: {}",
                    NAMES.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Whether any was given.
    pub fn any(&self) -> bool {
        self.protocol.is_some()
            || self.ca.is_some()
            || self.cert.is_some()
            || self.key.is_some()
            || self.mechanism.is_some()
            || self.username.is_some()
            || self.password.is_some()
    }

    /// The client security they describe, with the files read; an error
    /// says which property is wrong or missing.
    pub fn build(&self) -> anyhow::Result<ClientSecurity> {
        let protocol = match &self.protocol {
            Some(p) => parse_protocol(p).map_err(anyhow::Error::msg)?,
            None => Protocol::Plaintext,
        };
        let unused = |what: &str, needs: &str| {
            anyhow::anyhow!("-X {what} is given, but security.protocol is not {needs}")
        };
        if !protocol.tls() && (self.ca.is_some() || self.cert.is_some() || self.key.is_some()) {
            return Err(unused("ssl.*", "ssl or sasl_ssl"));
        }
        if !protocol.sasl() && (self.mechanism.is_some() || self.username.is_some()) {
            return Err(unused("sasl.*", "sasl_plaintext or sasl_ssl"));
        }
        let tls = if protocol.tls() {
            let identity = match (&self.cert, &self.key) {
                (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
                (None, None) => None,
                _ => {
                    anyhow::bail!("-X ssl.certificate.location and -X ssl.key.location go together")
                }
            };
            Some(ClientTls::load(self.ca.as_deref(), identity)?)
        } else {
            None
        };
        let sasl = if protocol.sasl() {
            Some(Login::new(
                self.mechanism.as_deref().unwrap_or("PLAIN"),
                self.username.as_deref(),
                self.password.as_deref(),
            )?)
        } else {
            None
        };
        Ok(ClientSecurity { tls, sasl })
    }
}

/// A `security.protocol` value, in any case.
fn parse_protocol(value: &str) -> Result<Protocol, String> {
    match value.to_ascii_lowercase().as_str() {
        "plaintext" => Ok(Protocol::Plaintext),
        "ssl" => Ok(Protocol::Ssl),
        "sasl_plaintext" => Ok(Protocol::SaslPlaintext),
        "sasl_ssl" => Ok(Protocol::SaslSsl),
        _ => Err(format!(
            "{value:?} is not a security protocol: plaintext, ssl, sasl_plaintext or sasl_ssl"
        )),
    }
}
