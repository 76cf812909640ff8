//! `klog-broker`'s security flags (TLS, SASL) and its `user` command,
//! which manages the SCRAM users of a registry as `kafka-configs
//! --alter --add-config SCRAM-SHA-512=...` did against ZooKeeper.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::broker::auth::{Security, UserEntry, USERS};
use crate::coord::acl::{self, Operation, Pattern, PatternType, Permission, ResourceType, Rule};
use crate::net::sasl::scram::{Hash, ITERATIONS_MAX, ITERATIONS_MIN};
use crate::net::sasl::{Credential, Login, Mechanism};
use crate::net::security::ClientSecurity;
use crate::net::tls::{ClientTls, ServerTls};

/// TLS and SASL for both listeners and for the broker's own connections
/// to the other brokers.
#[derive(Debug, Clone, clap::Args)]
pub struct SecurityArgs {
    /// This broker's certificate chain (PEM): both listeners speak TLS
    /// only (Kafka clients: security.protocol=ssl or sasl_ssl), and so do
    /// its connections to other brokers.
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS;
    /// a client's principal is User: and its certificate's subject
    /// (User:CN=alice,O=Example). The broker then shows its own
    /// certificate to the brokers it fetches from.
    #[arg(long = "tls-client-ca", value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// The CA other brokers' certificates are checked against when this
    /// one connects to them (default: --tls-client-ca, else the system's).
    #[arg(long = "tls-ca", value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Require a SASL login on both listeners, by these mechanisms
    /// (comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); users are
    /// those of the registry (klog-broker user add). Needs --registry.
    #[arg(long = "sasl-mechanisms", value_name = "LIST", value_parser = mechanisms_arg, requires = "registry")]
    pub sasl_mechanisms: Option<String>,
    /// With --sasl-mechanisms in a cluster: the user this broker logs in
    /// as on the other brokers (with the first mechanism).
    #[arg(
        long = "sasl-username",
        value_name = "NAME",
        requires = "sasl_password_file"
    )]
    pub sasl_username: Option<String>,
    /// The password of --sasl-username, from the first line of FILE
    /// (never a flag: flags are seen by every user of the host).
    #[arg(
        long = "sasl-password-file",
        value_name = "FILE",
        requires = "sasl_username"
    )]
    pub sasl_password_file: Option<PathBuf>,
    /// Deny every request the registry's ACLs do not allow (klog-broker
    /// acl add); ACL changes count on every broker within a second.
    /// Needs --registry.
    #[arg(long = "authorize", requires = "registry")]
    pub authorize: bool,
    /// With --authorize: principals allowed everything, separated by ;
    /// as Kafka's super.users (User:admin;User:CN=ops,O=Example: a
    /// certificate's principal holds commas).
    #[arg(
        long = "super-users",
        value_name = "LIST",
        value_delimiter = ';',
        requires = "authorize"
    )]
    pub super_users: Vec<String>,
}

/// A clap value parser for `--sasl-mechanisms`: a list of known ones.
fn mechanisms_arg(s: &str) -> Result<String, String> {
    Mechanism::parse_list(s).map(|_| s.to_string())
}

/// The first line of a file (a password), without its line end.
fn first_line(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        anyhow::bail!("{}: the first line (the password) is empty", path.display());
    }
    Ok(line.to_string())
}

impl SecurityArgs {
    /// The broker's security, with the files read; sets how the broker
    /// connects to the other brokers (the same TLS, and its own login).
    pub fn apply(&self) -> anyhow::Result<Security> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(ServerTls::load(cert, key, self.tls_client_ca.as_deref())?)
            }
            _ => None,
        };
        let sasl = match &self.sasl_mechanisms {
            Some(list) => Mechanism::parse_list(list).map_err(super::Usage)?,
            None => Vec::new(),
        };
        let client_tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let ca = self.tls_ca.as_deref().or(self.tls_client_ca.as_deref());
                let identity = self
                    .tls_client_ca
                    .is_some()
                    .then_some((cert.as_path(), key.as_path()));
                Some(ClientTls::load(ca, identity)?)
            }
            _ => None,
        };
        let login = match (&self.sasl_username, &self.sasl_password_file, sasl.first()) {
            (Some(user), Some(file), Some(m)) => {
                let password = first_line(file)?;
                Some(Login::new(m.name(), Some(user), Some(&password))?)
            }
            (Some(_), _, None) => {
                return Err(super::Usage("--sasl-username needs --sasl-mechanisms".into()).into())
            }
            _ => None,
        };
        let principal = match (&login, &self.tls_cert, &self.tls_client_ca) {
            (Some(login), _, _) => Some(format!("User:{}", login.username)),
            (None, Some(cert), Some(_)) => Some(crate::net::tls::certificate_principal(cert)?),
            _ => None,
        };
        if client_tls.is_some() || login.is_some() {
            crate::net::security::set_client(ClientSecurity {
                tls: client_tls,
                sasl: login,
            });
        }
        Ok(Security {
            tls,
            authenticated: !sasl.is_empty() || self.tls_client_ca.is_some(),
            sasl,
            authorize: self.authorize,
            super_users: self.super_users.clone(),
            principal,
        })
    }
}

/// `klog-broker user`: the SCRAM users of a registry.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum UserCommand {
    /// Add a user, or set a user's password: SCRAM-SHA-256 and -512
    /// credentials, salted; the password is read from the first line of
    /// standard input, or of --password-file.
    Add {
        /// The user's name (letters, digits, . _ -).
        name: String,
        /// Read the password from the first line of FILE instead of
        /// standard input.
        #[arg(long = "password-file", value_name = "FILE")]
        password_file: Option<PathBuf>,
        /// PBKDF2 iterations.
        #[arg(long = "iterations", value_name = "N", default_value_t = ITERATIONS_MIN, value_parser = clap::value_parser!(u32).range(i64::from(ITERATIONS_MIN)..=i64::from(ITERATIONS_MAX)))]
        iterations: u32,
    },
    /// Remove a user.
    Remove {
        /// The user's name.
        name: String,
    },
    /// List the users and their mechanisms.
    List,
}

/// Runs `klog-broker --registry R user ...`.
pub fn run_user(registry: Option<&Path>, command: &UserCommand) -> anyhow::Result<ExitCode> {
    let (path, registry) = open_registry(registry, "user", "users")?;
    match command {
        UserCommand::Add {
            name,
            password_file,
            iterations,
        } => {
            let password = match password_file {
                Some(file) => first_line(file)?,
                None => password_from_stdin()?,
            };
            let credentials = [Hash::Sha256, Hash::Sha512]
                .into_iter()
                .map(|h| Credential::new(h, &password, *iterations))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let entry = UserEntry { credentials };
            let bytes = serde_json::to_vec(&entry)?;
            // Through update_config, ordered with the brokers' changes.
            registry.update_config(USERS, name, &mut |_| Ok(Some(bytes.clone())))?;
            crate::diag::line(format_args!(
                "% User {name} has SCRAM-SHA-256 and SCRAM-SHA-512 credentials ({iterations} iterations)"
            ));
        }
        UserCommand::Remove { name } => {
            let mut existed = false;
            registry.update_config(USERS, name, &mut |stored| {
                existed = stored.is_some();
                Ok(None)
            })?;
            if !existed {
                anyhow::bail!("no user {name:?} in {}", path.display());
            }
            crate::diag::line(format_args!("% Removed user {name}"));
        }
        UserCommand::List => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            for name in registry.configs(USERS)? {
                let entry: Option<UserEntry> = registry
                    .config(USERS, &name)?
                    .and_then(|b| serde_json::from_slice(&b).ok());
                let mechanisms: Vec<String> = entry
                    .map(|e| {
                        e.credentials
                            .iter()
                            .map(|c| c.hash.mechanism().to_string())
                            .collect()
                    })
                    .unwrap_or_else(|| vec!["(unreadable)".into()]);
                // A reader that went away (`| head`) ends the listing.
                if writeln!(out, "{name}\t{}", mechanisms.join(",")).is_err() {
                    break;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The registry a command (`user`, `acl`) manages `what` in; a usage
/// error without `--registry`.
fn open_registry<'a>(
    registry: Option<&'a Path>,
    command: &str,
    what: &str,
) -> anyhow::Result<(&'a Path, std::sync::Arc<dyn crate::coord::Registry>)> {
    let Some(path) = registry else {
        let why = format!("{command} needs --registry: {what} live in the registry");
        return Err(super::Usage(why).into());
    };
    let opened = crate::coord::open(path, Duration::from_secs(10))
        .with_context(|| format!("cannot open the registry {}", path.display()))?;
    Ok((path, opened))
}

/// A password from the first line of standard input.
fn password_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        anyhow::bail!("no password on standard input (its first line is the password)");
    }
    Ok(password.to_string())
}

/// The rule and resource of `klog-broker acl add|remove`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("who").required(true).args(["allow", "deny"])))]
pub struct AclArgs {
    /// Allow PRINCIPAL (User:NAME, User:CN=..., or User:* for everyone).
    #[arg(long = "allow", value_name = "PRINCIPAL", value_parser = principal_arg)]
    pub allow: Option<String>,
    /// Deny PRINCIPAL, whatever allows it.
    #[arg(long = "deny", value_name = "PRINCIPAL", value_parser = principal_arg)]
    pub deny: Option<String>,
    /// read, write, create, describe, alter, delete, cluster_action or all.
    #[arg(long = "operation", value_name = "OP", value_parser = Operation::parse)]
    pub operation: Operation,
    /// The resource.
    #[command(flatten)]
    pub resource: ResourceArgs,
}

/// The resource of a rule: a topic, a group, a transactional id or the
/// cluster.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["topic", "group", "transactional_id", "cluster"])))]
pub struct ResourceArgs {
    /// A topic (* for every topic).
    #[arg(long = "topic", value_name = "NAME")]
    pub topic: Option<String>,
    /// A consumer group (* for every group).
    #[arg(long = "group", value_name = "NAME")]
    pub group: Option<String>,
    /// A transactional producer's transactional.id (* for every one):
    /// write lets it run transactions, describe find its coordinator.
    #[arg(long = "transactional-id", value_name = "NAME")]
    pub transactional_id: Option<String>,
    /// The cluster (creating topics; brokers' cluster_action).
    #[arg(long = "cluster")]
    pub cluster: bool,
    /// The name is a prefix: every topic, group or transactional id whose
    /// name starts with it.
    #[arg(long = "prefixed")]
    pub prefixed: bool,
}

/// A principal is `User:` and a name.
fn principal_arg(s: &str) -> Result<String, String> {
    crate::coord::acl::check_principal(s).map(|()| s.to_string())
}

impl ResourceArgs {
    fn pattern(&self) -> Pattern {
        let (resource, name) = match (&self.topic, &self.group, &self.transactional_id) {
            (Some(t), _, _) => (ResourceType::Topic, t.clone()),
            (_, Some(g), _) => (ResourceType::Group, g.clone()),
            (_, _, Some(x)) => (ResourceType::TransactionalId, x.clone()),
            _ => (ResourceType::Cluster, acl::CLUSTER.to_string()),
        };
        let pattern = match self.prefixed {
            true => PatternType::Prefixed,
            false => PatternType::Literal,
        };
        Pattern {
            resource,
            name,
            pattern,
        }
    }
}

impl AclArgs {
    fn pattern(&self) -> Pattern {
        self.resource.pattern()
    }

    fn rule(&self) -> Rule {
        let (principal, permission) = match (&self.allow, &self.deny) {
            (Some(p), _) => (p.clone(), Permission::Allow),
            (_, Some(p)) => (p.clone(), Permission::Deny),
            _ => unreachable!("clap requires --allow or --deny"),
        };
        Rule {
            principal,
            operation: self.operation,
            permission,
        }
    }
}

/// `klog-broker acl`: the ACLs of a registry (they count with
/// `--authorize`).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AclCommand {
    /// Add a rule.
    Add(AclArgs),
    /// Remove a rule.
    Remove(AclArgs),
    /// Remove every rule of a resource, even an entry that does not parse.
    Clear(ResourceArgs),
    /// List every rule: resource, pattern, principal, operation,
    /// permission, tab-separated.
    List,
}

/// Runs `klog-broker --registry R acl ...`.
pub fn run_acl(registry: Option<&Path>, command: &AclCommand) -> anyhow::Result<ExitCode> {
    let (_, registry) = open_registry(registry, "acl", "ACLs")?;
    match command {
        AclCommand::Add(a) => {
            acl::add(&*registry, &a.pattern(), a.rule())?;
            crate::diag::line(format_args!(
                "% Added {} {} to {}",
                describe(&a.rule()),
                a.operation,
                a.pattern()
            ));
        }
        AclCommand::Remove(a) => {
            if !acl::remove(&*registry, &a.pattern(), &a.rule())? {
                anyhow::bail!(
                    "no such rule: {} {} on {}",
                    describe(&a.rule()),
                    a.operation,
                    a.pattern()
                );
            }
            crate::diag::line(format_args!(
                "% Removed {} {} from {}",
                describe(&a.rule()),
                a.operation,
                a.pattern()
            ));
        }
        AclCommand::Clear(r) => {
            let Some(held) = acl::remove_all(&*registry, &r.pattern())? else {
                anyhow::bail!("no rules on {}", r.pattern());
            };
            // Its rules, deny ones too, as they were (damaged or not): what
            // to add back is the operator's to see.
            crate::diag::line(format_args!(
                "% Removed every rule of {} (deny rules too); the entry held:\n{}\n% Add back \
                 what the resource needs with klog-broker acl add",
                r.pattern(),
                String::from_utf8_lossy(&held).trim_end()
            ));
        }
        AclCommand::List => return list_acls(&*registry),
    }
    Ok(ExitCode::SUCCESS)
}

/// `acl list`: every rule, one a line; an entry that does not parse is
/// said (with its repair) and makes the exit status 1.
fn list_acls(registry: &dyn crate::coord::Registry) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let mut damaged = false;
    for entry in acl::load_each(registry)? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(why) => {
                crate::diag::line(format_args!("error: {why}"));
                damaged = true;
                continue;
            }
        };
        let p = &entry.pattern;
        for r in &entry.rules {
            let line = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                name_of(&p.resource),
                p.name,
                name_of(&p.pattern),
                r.principal,
                r.operation,
                name_of(&r.permission)
            );
            // A reader that went away (`| head`) ends the listing.
            if line.is_err() {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
    Ok(if damaged {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A rule's permission and principal, in words.
fn describe(rule: &Rule) -> String {
    format!("{} {}", name_of(&rule.permission), rule.principal)
}

/// An enum's name as the registry writes it.
fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
