//! `-X NAME=VALUE`: a client setting by its Kafka (librdkafka) property
//! name, so that kcat command lines keep working. Each tool maps the names
//! onto the flags it has ([`Setting`]); values are in Kafka's units
//! (milliseconds, bytes, counts), not klog's (`500ms`, `64KiB`).
//!
//! Order: flags and properties apply as they come on the command line,
//! and for one setting the later wins (kcat applies its options in order:
//! `--batch 10 -X batch.num.messages=1` batches by one,
//! `-X batch.num.messages=1 --batch 10` by ten).
//!
//! A property a tool does not know is a usage error listing those it
//! does, except `client.id`, which klog has no use for: accepted and
//! ignored, and said so. Every tool that connects takes kcat's security
//! properties (`security.protocol`, `ssl.*`, `sasl.*`:
//! [`crate::net::security`]).

use clap::parser::ValueSource;

use super::Usage;

/// One `-X NAME=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The property's name (`linger.ms`).
    pub name: String,
    /// Its value, as given.
    pub value: String,
}

/// A clap value parser for `-X NAME=VALUE`.
pub fn property_arg(s: &str) -> Result<Property, String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok(Property {
            name: name.to_string(),
            value: value.to_string(),
        }),
        _ => Err(format!("expected -X property=value, not {s:?}")),
    }
}

/// How a tool takes a property: the names it goes by, the clap id of the
/// flag whose value it sets (which decides which comes later), and how it
/// reads the value into the tool's arguments `A`.
pub struct Setting<A> {
    /// Kafka's and librdkafka's names for it.
    pub names: &'static [&'static str],
    /// The clap id of the flag it sets.
    pub flag: &'static str,
    /// Reads the value (in Kafka's units) into the arguments.
    pub set: fn(&mut A, &str) -> Result<(), String>,
}

impl<A> std::fmt::Debug for Setting<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setting")
            .field("names", &self.names)
            .field("flag", &self.flag)
            .finish()
    }
}

/// What `-X` did beyond setting values.
#[derive(Debug, Default)]
pub struct Applied {
    /// The clap ids of the flags a property set (and no later flag beat).
    pub set: Vec<&'static str>,
    /// Properties accepted and ignored, to be said (`% ...`).
    pub ignored: Vec<String>,
    /// The security properties, in order.
    pub security: crate::net::security::Properties,
}

impl Applied {
    /// Says which properties were accepted and ignored, unless `quiet`.
    pub fn say(&self, quiet: bool) {
        if !quiet {
            for note in &self.ignored {
                crate::diag::line(format_args!("% {note}"));
            }
        }
    }

    /// Makes the security properties this process's way of connecting
    /// (the files they name read now, so that a wrong one fails at once).
    pub fn secure(&self) -> anyhow::Result<()> {
        if self.security.any() {
            crate::net::security::set_client(self.security.build()?);
        }
        Ok(())
    }

    /// Whether a property set the flag `id`.
    pub fn sets(&self, id: &str) -> bool {
        self.set.contains(&id)
    }
}

/// Applies the `-X` properties (clap id `config`) to `args` in
/// command-line order; a flag given after a property for the same
/// setting keeps its value (the property's value is still checked).
pub fn apply<A: Clone>(
    args: &mut A,
    properties: &[Property],
    matches: &clap::ArgMatches,
    settings: &[Setting<A>],
) -> Result<Applied, Usage> {
    let mut applied = Applied::default();
    let at: Vec<usize> = matches
        .indices_of("config")
        .map(|i| i.collect())
        .unwrap_or_default();
    for (k, property) in properties.iter().enumerate() {
        let (name, value) = (property.name.as_str(), property.value.as_str());
        if crate::net::security::NAMES.contains(&name) {
            applied
                .security
                .set(name, value)
                .map_err(|why| Usage(format!("-X {name}={value}: {why}")))?;
            continue;
        }
        let Some(setting) = settings.iter().find(|s| s.names.contains(&name)) else {
            match meaningless(name, value) {
                Ok(()) => applied.ignored.push(format!(
                    "-X {name}={value} is accepted and ignored: klog has no use for it"
                )),
                Err(why) => return Err(Usage(why.unwrap_or_else(|| unknown(name, settings)))),
            }
            continue;
        };
        let flag_at = (matches.value_source(setting.flag) == Some(ValueSource::CommandLine))
            .then(|| matches.indices_of(setting.flag).and_then(Iterator::max))
            .flatten();
        let flag_later = matches!((flag_at, at.get(k)), (Some(flag), Some(&x)) if flag > x);
        let bad = |why| Usage(format!("-X {name}={value}: {why}"));
        if flag_later {
            (setting.set)(&mut args.clone(), value).map_err(bad)?;
            continue;
        }
        (setting.set)(args, value).map_err(bad)?;
        if !applied.set.contains(&setting.flag) {
            applied.set.push(setting.flag);
        }
    }
    Ok(applied)
}

/// The usage error of a property nobody knows: which ones are known.
fn unknown<A>(name: &str, settings: &[Setting<A>]) -> String {
    let known: Vec<&str> = settings
        .iter()
        .flat_map(|s| s.names.iter().copied())
        .collect();
    format!(
        "unknown -X property {name:?}; known here: {}, and client.id (ignored)",
        known.join(", ")
    )
}

/// Properties klog knows of but has no setting for: `Ok` when the value
/// asks for what klog does anyway (ignored), else the error (`None`: not
/// one of them).
fn meaningless(name: &str, value: &str) -> Result<(), Option<String>> {
    let lower = value.to_ascii_lowercase();
    let no = |why: &str| Err(Some(format!("-X {name}={value}: {why}")));
    match name {
        "client.id" => Ok(()),
        "compression.codec" | "compression.type" if lower == "none" => Ok(()),
        "compression.codec" | "compression.type" => no("only klog-produce compresses (-z)"),
        _ if name.starts_with("ssl.") || name.starts_with("sasl.") => {
            no("klog takes ssl.ca.location, ssl.certificate.location, ssl.key.location, sasl.mechanisms, sasl.username and sasl.password")
        }
        _ => Err(None),
    }
}

/// A boolean, as librdkafka reads one: true or false (also 1 and 0),
/// in any case.
pub fn boolean(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("{value:?} is neither true nor false")),
    }
}

/// A value in milliseconds.
pub fn ms(value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{value:?} is not a number of milliseconds"))
}

/// A number of milliseconds above 0, for `what` (the error names it).
pub fn ms_above_zero(value: &str, what: &str) -> Result<u64, String> {
    match ms(value)? {
        0 => Err(format!("{what} must be longer than 0")),
        ms => Ok(ms),
    }
}

/// A value in bytes, from 1 to `max`.
pub fn bytes(value: &str, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{value:?} is not a number of bytes from 1 to {max}"
        )),
    }
}
