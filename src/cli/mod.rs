//! The command-line side: clap definitions of every binary (so that man
//! pages and completions can be generated from them), the shared value
//! parsers, and the ripgrep-style `main` wrapper that maps errors to exit
//! codes.
//!
//! Exit codes: 0 ok; 1 runtime failure; 2 usage; 3 corruption found and
//! repaired (or would be); 4 corruption found and left.

use std::io;
use std::process::ExitCode;

use crate::{human, limits};

pub mod bench;
pub mod broker;
pub mod config;
pub mod consume;
pub mod dump;
pub mod help;
pub mod produce;
pub mod recover;
pub mod security;

/// Exit code: a runtime failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: a usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: corruption found and repaired.
pub const EXIT_REPAIRED: u8 = 3;
/// Exit code: corruption found and left.
pub const EXIT_CORRUPT: u8 = 4;

/// Every binary's clap command, by name: the source of man/ and completions/.
pub fn commands() -> Vec<clap::Command> {
    use clap::CommandFactory;
    vec![
        bench::Args::command(),
        broker::Args::command(),
        produce::Args::command(),
        consume::Args::command(),
        dump::Args::command(),
        recover::Args::command(),
    ]
}

/// Runs a binary's body and turns its result into the process exit code:
/// errors print as `error: ...` with one `caused by:` line per cause; a
/// closed stdout (broken pipe) is a normal end, exit 0.
pub fn main(run: impl FnOnce() -> anyhow::Result<ExitCode>) -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            if is_closed_output(&err) {
                return ExitCode::SUCCESS;
            }
            print_error(&err);
            if err.chain().any(|e| e.is::<Usage>()) {
                return ExitCode::from(EXIT_USAGE);
            }
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Whether the error is a closed stdout (`| head`), a normal end: a broken
/// pipe, but not a broker's connection breaking (a socket says EPIPE too).
fn is_closed_output(err: &anyhow::Error) -> bool {
    let broker = err.chain().any(|e| {
        matches!(
            e.downcast_ref::<crate::Error>(),
            Some(crate::Error::Network { .. })
        )
    });
    !broker
        && err.chain().any(|e| {
            e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
        })
}

/// Prints an error and its causes, and a hint where one helps.
pub fn print_error(err: &anyhow::Error) {
    let mut msg = format!("error: {err}\n");
    for cause in err.chain().skip(1) {
        msg.push_str(&format!("  caused by: {cause}\n"));
    }
    if let Some(hint) = hint(err) {
        msg.push_str(&format!("  hint: {hint}\n"));
    }
    crate::diag::text(&msg);
}

/// The hint for a committed offset in the registry that does not parse.
const DAMAGED_OFFSET_HINT: &str = "a damaged committed offset in the registry: with the group's members stopped, set it again (klog-consume -t TOPIC -G GROUP --registry REGISTRY --reset-offsets OFFSET|beginning|end)";

fn hint(err: &anyhow::Error) -> Option<&'static str> {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<io::Error>() {
            match e.kind() {
                io::ErrorKind::AddrInUse => {
                    return Some("another process listens there: stop it, or choose another --listen address (port 0 picks a free one)")
                }
                io::ErrorKind::ConnectionRefused => {
                    return Some("is klog-broker running there? Start one, or use --data-dir for embedded mode")
                }
                _ => {}
            }
        }
        match cause.downcast_ref::<crate::Error>() {
            Some(crate::Error::Locked { .. }) => {
                return Some(
                    "one writer per data directory and per partition: stop the other one, produce through the broker (-b) if it is one, or read with klog-consume",
                )
            }
            Some(crate::Error::UnknownTopic { .. }) => {
                return Some("check the topic name and --data-dir; klog-produce creates topics")
            }
            Some(crate::Error::NotInRegistry { .. }) => {
                return Some("check the topic name; producing to it (klog-produce --registry REGISTRY) creates it, and without -e the group waits for it")
            }
            Some(crate::Error::Corrupt { path, .. }) if is_registry_offset(path) => {
                return Some(DAMAGED_OFFSET_HINT)
            }
            Some(e) if crate::coord::offsets_topic::is_carry_over_refused(e) => {
                return Some(DAMAGED_OFFSET_HINT)
            }
            Some(crate::Error::Corrupt { .. }) => return Some("klog-recover repairs a damaged log"),
            Some(crate::Error::ZooKeeper {
                op: "connect to", ..
            }) => {
                return Some("is ZooKeeper running there, and does the address name its client port? (zk://HOST:PORT[,HOST:PORT...]/CHROOT)")
            }
            Some(crate::Error::HeldElsewhere { .. }) => {
                return Some("another live process holds it: stop that one, or wait for its session to expire (a broker's id is in DATA_DIR/broker-id)")
            }
            Some(crate::Error::GroupActive { .. }) => {
                return Some("stop the group's members first (klog-dump --registry REGISTRY lists them)")
            }
            _ => {}
        }
    }
    None
}

/// Whether `path` is a committed offset's file in a directory registry
/// (`offsets/<group>/<topic>-<p>/<generation>/offsets.log`, or `offset`
/// in the layout before journals).
fn is_registry_offset(path: &std::path::Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str());
    matches!(name, Some("offsets.log" | "offset"))
        && path.ancestors().nth(4).and_then(|p| p.file_name()) == Some("offsets".as_ref())
}

/// Blocks SIGINT and SIGTERM in every thread and handles them on a
/// dedicated one. The first signal sets [`crate::stop::STOP`] and calls
/// `on_signal`: loops check the flag and end cleanly (exit 0) within a
/// second. A second signal ends the process at once: it dies by that
/// signal (the default action, which a shell reports as 130 or 143),
/// flushing nothing. Call before starting other threads.
pub fn handle_signals(on_signal: impl Fn() + Send + 'static) -> anyhow::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = set.wait() {
                if crate::stop::stopping() {
                    // Asked twice: the user does not want to wait. No
                    // handler is installed, so once unblocked here the
                    // signal's default action ends the process.
                    let mut again = SigSet::empty();
                    again.add(signal);
                    let _ = again.thread_unblock();
                    let _ = nix::sys::signal::raise(signal);
                    std::process::exit(128 + signal as i32);
                }
                crate::stop::stop();
                on_signal();
            }
        })?;
    Ok(())
}

/// A clap value parser for sizes like `64KiB`.
pub fn size_arg(s: &str) -> Result<u64, String> {
    human::parse_size(s)
}

/// A clap value parser for a whole number from `min` to `max`, said in
/// words when it is not one ("from 1 to 10000", never `1..=10000`).
pub fn count_in<T>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let n: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number"))?;
        if n < min || n > max {
            return Err(if max == u64::MAX {
                format!("at least {min}, not {n}")
            } else {
                format!("from {min} to {max}, not {n}")
            });
        }
        T::try_from(n).map_err(|_| format!("{n} is too large"))
    }
}

/// A clap value parser for `--segment-bytes`: a size from 4KiB to 4GiB - 1.
pub fn segment_size_arg(s: &str) -> Result<u64, String> {
    let n = human::parse_size(s)?;
    if !(limits::SEGMENT_BYTES_MIN..=limits::SEGMENT_BYTES_MAX).contains(&n) {
        return Err(format!(
            "a segment holds from 4KiB to {} bytes, not {n}",
            limits::SEGMENT_BYTES_MAX
        ));
    }
    Ok(n)
}

/// A clap value parser for `--max-record-bytes`: from 1 byte to 64MiB.
pub fn record_size_arg(s: &str) -> Result<u64, String> {
    let n = human::parse_size(s)?;
    if !(1..=u64::from(limits::RECORD_BYTES_MAX_LIMIT)).contains(&n) {
        return Err(format!(
            "a record takes from 1 byte to 64MiB, not {n} bytes"
        ));
    }
    Ok(n)
}

/// A clap value parser for a broker's address, `HOST[:PORT]`: without a
/// port, Kafka's 9092 (as kcat does).
pub fn broker_arg(s: &str) -> Result<String, String> {
    match host_port(s) {
        Ok(_) => Ok(s.to_string()),
        Err(_) if !s.is_empty() && !s.contains(':') => Ok(format!("{s}:9092")),
        // A bracketed IPv6 address alone: `[::1]`.
        Err(_) if s.starts_with('[') && s.ends_with(']') => Ok(format!("{s}:9092")),
        Err(why) => Err(why),
    }
}

/// `-X bootstrap.servers` (`metadata.broker.list`): one broker, as `-b`.
pub fn servers_arg(s: &str) -> Result<String, String> {
    if s.contains(',') {
        return Err(
            "klog talks to one broker (-b HOST[:PORT]), or to a cluster through its registry (--registry REGISTRY): give one address".into(),
        );
    }
    broker_arg(s)
}

/// A clap value parser for `--listen`: `HOST:PORT` (port 0 picks one).
pub fn listen_arg(s: &str) -> Result<String, String> {
    host_port(s).map(|_| s.to_string())
}

/// What `--registry` takes, said in usage errors.
pub const REGISTRY_FORMS: &str = "a directory, or a ZooKeeper ensemble as zk://HOST:PORT[,HOST:PORT...]/CHROOT (e.g. zk://127.0.0.1:2181/klog)";

/// A clap value parser for `--registry`: a directory, or a ZooKeeper
/// ensemble `zk://HOST:PORT[,HOST:PORT...]/CHROOT`, whose form is checked
/// here, before anything is opened. A value that looks like an address
/// but not that one (`zk:/...`, `zookeeper://...`) is refused rather than
/// taken for a directory to create.
pub fn registry_arg(s: &str) -> Result<std::path::PathBuf, String> {
    let looks_like_address = s.starts_with("zk:")
        || s.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
    if looks_like_address {
        let why = match crate::coord::zk::ZkAddress::parse(s) {
            Ok(_) => return Ok(s.into()),
            Err(crate::Error::Config(why)) => why,
            Err(e) => e.to_string(),
        };
        return Err(format!("{why}; a registry is {REGISTRY_FORMS}"));
    }
    if s.is_empty() {
        return Err(format!("an empty registry: give {REGISTRY_FORMS}"));
    }
    Ok(s.into())
}

/// Checks `HOST:PORT` without resolving the host.
fn host_port(s: &str) -> Result<(), String> {
    let bad =
        || format!("{s:?} is not HOST:PORT (e.g. 127.0.0.1:9092, localhost:9092, [::1]:9092)");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let host_ok =
        !host.is_empty() && (host.starts_with('[') && host.ends_with(']') || !host.contains(':'));
    if !host_ok || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(())
}

/// Parses the command line into `A`, keeping where each value came from
/// (a flag, the environment, a default) for [`choose_target`].
pub fn parse<A: clap::Parser>() -> (A, clap::ArgMatches) {
    let matches = A::command().get_matches();
    match A::from_arg_matches(&matches) {
        Ok(args) => (args, matches),
        Err(e) => e.exit(),
    }
}

/// Where a client's records are: one broker (`-b`), a data directory
/// (`--data-dir`, embedded) or a registry's brokers (`--registry`). A flag
/// beats the environment (`KLOG_BROKER`, `KLOG_DATA_DIR`,
/// `KLOG_REGISTRY`), and two flags, or with no flag two variables, naming
/// different places are a usage error. Leaves set only the chosen one of
/// `data_dir` and `registry` (neither: the broker). `config` tells what
/// `-X` set: `-X bootstrap.servers` names the broker as `-b` does.
pub fn choose_target(
    matches: &clap::ArgMatches,
    config: &config::Applied,
    data_dir: &mut Option<std::path::PathBuf>,
    registry: &mut Option<std::path::PathBuf>,
) -> Result<(), Usage> {
    use clap::parser::ValueSource;
    let from = |id: &str| matches.value_source(id);
    let places = [
        ("broker", "-b"),
        ("data_dir", "--data-dir"),
        ("registry", "--registry"),
    ];
    let named: Vec<&str> = places
        .iter()
        .filter(|(id, _)| from(id) == Some(ValueSource::CommandLine) || config.sets(id))
        .map(|(id, flag)| match *id {
            "broker" if from(id) != Some(ValueSource::CommandLine) => "-X bootstrap.servers",
            _ => *flag,
        })
        .collect();
    let chosen = match named.as_slice() {
        [] => {
            let vars = [
                ("broker", "KLOG_BROKER"),
                ("data_dir", "KLOG_DATA_DIR"),
                ("registry", "KLOG_REGISTRY"),
            ];
            let set: Vec<&str> = vars
                .iter()
                .filter(|(id, _)| from(id) == Some(ValueSource::EnvVariable))
                .map(|(_, var)| *var)
                .collect();
            if let [a, b, ..] = set.as_slice() {
                return Err(Usage(format!(
                    "{a} and {b} are both set and name different places for the records: unset one, or choose with -b, --data-dir or --registry"
                )));
            }
            return Ok(());
        }
        [one] => *one,
        [a, b, ..] => {
            return Err(Usage(format!(
                "{a} and {b} name different places for the records: give one of them"
            )))
        }
    };
    if chosen != "--data-dir" {
        *data_dir = None;
    }
    if chosen != "--registry" {
        *registry = None;
    }
    Ok(())
}

/// A mistake in how a tool was called that clap's definitions cannot see
/// (two flags that do not go together): printed like clap's, exit 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A clap value parser for a time that must pass (a timeout): a duration
/// of at least 1 ms.
pub fn timeout_arg(s: &str) -> Result<u64, String> {
    match human::parse_duration_ms(s)? {
        0 => Err(format!("{s:?} would time out at once: give at least 1ms")),
        ms => Ok(ms),
    }
}

/// A clap value parser for durations like `500ms`, in ms.
pub fn duration_arg(s: &str) -> Result<u64, String> {
    human::parse_duration_ms(s)
}

/// Bytes given on the command line with escapes (a delimiter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiter(pub Vec<u8>);

/// A clap value parser for delimiters with escapes.
pub fn delimiter_arg(s: &str) -> Result<Delimiter, String> {
    human::parse_delimiter(s).map(Delimiter)
}

/// A clap value parser for `-z`: a codec's name, as kcat and Kafka spell
/// it (case-insensitive).
pub fn codec_arg(s: &str) -> Result<crate::storage::record::Codec, String> {
    crate::storage::record::Codec::parse(s)
        .ok_or_else(|| format!("{s:?} is not a codec: none, gzip, snappy, lz4 or zstd"))
}

/// A clap value parser for `--acks`: 0, 1 or all (-1).
pub fn acks_arg(s: &str) -> Result<i8, String> {
    match s {
        "0" => Ok(crate::protocol::ACKS_NONE),
        "1" => Ok(crate::protocol::ACKS_LEADER),
        "all" | "-1" => Ok(crate::protocol::ACKS_ALL),
        _ => Err(format!("{s:?} is not 0, 1 or all")),
    }
}

/// A clap value parser for a consumer group's name (the alphabet of a
/// topic's).
pub fn group_arg(s: &str) -> Result<String, String> {
    crate::coord::registry::check_name("group", s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// A clap value parser for a topic name.
pub fn topic_arg(s: &str) -> Result<String, String> {
    crate::storage::store::validate_topic(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_is_a_directory_or_a_whole_zookeeper_address() {
        for good in [
            "reg",
            "/var/lib/klog/registry",
            "./zk",
            "zkreg",
            "a:b",
            "zk://127.0.0.1:2181/klog",
            "zk://zk1:2181,zk2:2181,[::1]:2181/klog/prod",
        ] {
            assert_eq!(registry_arg(good).unwrap().to_str(), Some(good));
        }
        for bad in [
            "",
            "zk:",
            "zk:/h:1/x",
            "zk://h/x",
            "zk://h:1",
            "ZK://h:1/x",
            "http://h/x",
        ] {
            let why = registry_arg(bad).unwrap_err();
            assert!(
                why.contains("zk://HOST:PORT[,HOST:PORT...]/CHROOT"),
                "{bad:?}: {why}"
            );
        }
    }

    #[test]
    fn a_broker_address_is_host_and_port_and_the_port_defaults_to_9092() {
        assert_eq!(broker_arg("127.0.0.1:9093").unwrap(), "127.0.0.1:9093");
        assert_eq!(broker_arg("127.0.0.1").unwrap(), "127.0.0.1:9092");
        assert_eq!(broker_arg("kafka.example").unwrap(), "kafka.example:9092");
        assert_eq!(broker_arg("[::1]").unwrap(), "[::1]:9092");
        assert_eq!(broker_arg("[::1]:7").unwrap(), "[::1]:7");
        for bad in [
            "",
            ":9092",
            "host:",
            "host:port",
            "host:70000",
            "::1",
            "a:b:c",
        ] {
            assert!(broker_arg(bad).is_err(), "{bad:?}");
        }
        assert!(listen_arg("nonsense").is_err());
        assert!(listen_arg("0.0.0.0:0").is_ok());
    }
}
