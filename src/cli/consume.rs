//! `klog-consume`: records of a topic to stdout, like `kcat -C`.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use crate::consume::{self, Envelope, Format, OffsetSpec, PartitionReader};
use crate::fs::{RealFs, Vfs};
use crate::produce;
use crate::store::Store;

/// Prints the records of a topic, and keeps following new ones like
/// `tail -f` unless -e or -c says when to stop.
#[derive(Debug, Parser)]
#[command(name = "klog-consume", version, about, long_about = None)]
pub struct Args {
    /// Topic to read.
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: String,
    /// Partitions to read (default: all).
    #[arg(short = 'p', long = "partition", value_name = "N[,N..]", value_delimiter = ',')]
    pub partitions: Vec<u32>,
    /// Where to start: beginning, end, N, -N (N before the end), @TIMESTAMP
    /// (ms since the epoch, or RFC 3339).
    #[arg(
        short = 'o',
        long = "offset",
        value_name = "SPEC",
        default_value = "beginning",
        allow_hyphen_values = true
    )]
    pub offset: OffsetSpec,
    /// Exit when every partition reaches the end offset it had at start.
    #[arg(short = 'e', long = "exit")]
    pub exit_at_end: bool,
    /// Stop after N records.
    #[arg(short = 'c', long = "count", value_name = "N")]
    pub count: Option<u64>,
    /// Output format: %s value, %k key, %S value length, %t topic,
    /// %p partition, %o offset, %T timestamp (ms), %F timestamp (RFC 3339),
    /// %h headers; escapes \n \t \0 \xNN.
    #[arg(
        short = 'f',
        long = "format",
        value_name = "FORMAT",
        default_value = "%s\\n",
        conflicts_with = "json"
    )]
    pub format: Format,
    /// One JSON envelope per line: topic, partition, offset, ts, headers, key, payload.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Flush stdout after every record.
    #[arg(short = 'u', long = "unbuffered")]
    pub unbuffered: bool,
    /// Embedded mode: read the logs in this data directory directly, with
    /// no broker (no lock is taken).
    #[arg(long = "data-dir", value_name = "DIR", env = "KLOG_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

struct Follow {
    partition: u32,
    reader: PartitionReader,
    /// End offset at start, for -e.
    end: u64,
    reported_end: bool,
}

/// Runs `klog-consume`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    let say = super::Say { quiet: args.quiet };
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let store = Store::with_vfs(&args.data_dir, Arc::clone(&vfs));
    let count = store.partition_count(&args.topic)?;
    let partitions: Vec<u32> = if args.partitions.is_empty() {
        (0..count).collect()
    } else {
        args.partitions.clone()
    };
    let mut follows = Vec::new();
    for &p in &partitions {
        if p >= count {
            anyhow::bail!(crate::Error::UnknownPartition {
                topic: args.topic.clone(),
                partition: p,
                count
            });
        }
        let name = format!("{} [{p}]", args.topic);
        let log = consume::open_read_only(Arc::clone(&vfs), &store.partition_dir(&args.topic, p))
            .with_context(|| format!("cannot read {name}"))?;
        let start = consume::resolve(&log, args.offset, &name)?;
        let reader = PartitionReader::new(Arc::clone(&vfs), &log, start)?;
        follows.push(Follow {
            partition: p,
            reader,
            end: log.next_offset(),
            reported_end: false,
        });
    }
    let stdout = io::stdout();
    let unbuffered = args.unbuffered;
    let mut out = BufWriter::with_capacity(if stdout.is_terminal() { 8 * 1024 } else { 256 * 1024 }, stdout.lock());
    let mut printed = 0u64;
    let limit = args.count.unwrap_or(u64::MAX);
    let mut json_line = Vec::new();
    'outer: while printed < limit && !produce::stopping() {
        let mut progressed = false;
        for f in follows.iter_mut() {
            let topic = args.topic.as_str();
            let partition = f.partition;
            let stop_at = if args.exit_at_end { f.end } else { u64::MAX };
            if f.reader.next_offset() >= stop_at {
                continue;
            }
            let n = f.reader.poll(consume::FETCH_BYTES_DEFAULT, |r| {
                if r.offset >= stop_at || printed >= limit {
                    return Ok(false);
                }
                if args.json {
                    json_line.clear();
                    serde_json::to_writer(&mut json_line, &Envelope::of(topic, partition, r)).expect("json");
                    json_line.push(b'\n');
                    out.write_all(&json_line).map_err(write_error)?;
                } else {
                    args.format.write(&mut out, topic, partition, r).map_err(write_error)?;
                }
                if unbuffered {
                    out.flush().map_err(write_error)?;
                }
                printed += 1;
                Ok(true)
            });
            let n = n.with_context(|| format!("cannot read {topic} [{partition}]"))?;
            progressed |= n > 0;
            if printed >= limit {
                break 'outer;
            }
        }
        for f in follows.iter_mut() {
            let at_end = f.reader.next_offset() >= f.end;
            if at_end && !f.reported_end && args.exit_at_end {
                f.reported_end = true;
                say.info(format_args!(
                    "Reached end of topic {} [{}] at offset {}",
                    args.topic, f.partition, f.end
                ));
            }
        }
        if args.exit_at_end && follows.iter().all(|f| f.reader.next_offset() >= f.end) {
            break;
        }
        if !progressed {
            out.flush().context("cannot write to stdout")?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    out.flush().context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

fn write_error(e: io::Error) -> crate::Error {
    crate::Error::io("write", "stdout", e)
}
