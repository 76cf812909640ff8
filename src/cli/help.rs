//! What each binary's `--help` and man page say beyond its flags: a
//! one-line description, examples, the environment it reads and its exit
//! status. The man pages (`man/`) are generated from these and the clap
//! definitions.

/// The text of a binary's help and man page beyond its flags.
#[derive(Debug, Clone, Copy)]
pub struct Extras {
    /// The binary.
    pub name: &'static str,
    /// Examples, one command a line with a `#` comment.
    pub examples: &'static str,
    /// The environment variables it reads, and what for.
    pub environment: &'static [(&'static str, &'static str)],
    /// Its exit codes, and what each means.
    pub exit_status: &'static [(u8, &'static str)],
}

/// `klog-broker`'s one-line description.
pub const BROKER_ABOUT: &str =
    "Serve partitioned commit logs to producers and pulling consumers (the Kafka paper's broker)";
/// `klog-produce`'s one-line description.
pub const PRODUCE_ABOUT: &str = "Send lines (or any delimited records) to a topic, like kcat -P";
/// `klog-consume`'s one-line description.
pub const CONSUME_ABOUT: &str =
    "Read a topic's records, follow it like tail -f, or consume in a group, like kcat -C";
/// `klog-dump`'s one-line description.
pub const DUMP_ABOUT: &str =
    "Print and verify segments, indexes and partitions, like kafka-dump-log.sh";
/// `klog-recover`'s one-line description.
pub const RECOVER_ABOUT: &str =
    "Check every record's length and CRC and repair a damaged log, like fsck";
/// `klog-bench`'s one-line description.
pub const BENCH_ABOUT: &str =
    "Measure produce, consume and end-to-end latency, like kafka-*-perf-test.sh";

const CLIENT_ENV: &[(&str, &str)] = &[
    ("KLOG_BROKER", "the broker, as -b (a flag given wins)"),
    (
        "KLOG_DATA_DIR",
        "a data directory to use embedded, as --data-dir",
    ),
    (
        "KLOG_REGISTRY",
        "a registry to find the brokers in, as --registry (a directory or zk://...)",
    ),
    ("NO_COLOR", "no styling in tables"),
];

const CLIENT_EXIT: &[(u8, &str)] = &[
    (0, "success"),
    (
        1,
        "a runtime failure: I/O, a broker unreachable, a record not delivered",
    ),
    (2, "a usage error"),
];

/// `klog-broker`.
pub const BROKER: Extras = Extras {
    name: "klog-broker",
    examples: "\
klog-broker --data-dir data                         # listens on 127.0.0.1:9092
klog-broker --data-dir data --partitions 4 --retention 2d
klog-broker --data-dir data --listen 127.0.0.1:0    # port 0: a free port, printed
klog-broker --data-dir d1 --registry reg            # join a registry (groups, clusters)
klog-broker --registry zk://zk1:2181,zk2:2181/klog  # on ZooKeeper: a cluster across hosts
klog-broker --data-dir data --kafka-listen 127.0.0.1:9093   # kcat -b 127.0.0.1:9093 works too",
    environment: &[
        ("KLOG_BROKER_DATA_DIR", "the data directory, as --data-dir"),
        (
            "KLOG_REGISTRY",
            "the registry to join, as --registry (a directory or zk://...)",
        ),
    ],
    exit_status: &[
        (0, "shut down cleanly (SIGTERM, SIGINT)"),
        (
            1,
            "could not start or serve: the data directory locked, the address in use, I/O",
        ),
        (2, "a usage error"),
    ],
};

/// `klog-produce`.
pub const PRODUCE: Extras = Extras {
    name: "klog-produce",
    examples: "\
seq 1 1000 | klog-produce -t numbers                # one record per line
tail -f app.log | klog-produce -t app --linger 100ms
klog-produce -t users -K : < users.txt              # key:value lines
klog-consume -t a -J -e | klog-produce -t b -J      # copy a topic, keys and headers too
klog-produce -t images -l *.png                     # one record per file, as kcat
klog-produce --data-dir data -t t < lines.txt       # embedded: no broker
klog-produce --registry zk://zk1:2181/klog -t t     # each partition to its broker
seq 1 1000 | klog-produce -t n --no-idempotence     # at least once (idempotent is the default)",
    environment: CLIENT_ENV,
    exit_status: CLIENT_EXIT,
};

/// `klog-consume`.
pub const CONSUME: Extras = Extras {
    name: "klog-consume",
    examples: "\
klog-consume -t numbers -e                          # everything, then exit
klog-consume -t numbers -o -10 -e                   # the last 10 of each partition
klog-consume -t numbers -o @2026-11-29T12:00:00Z -c 5
klog-consume -t t -f '%t [%p] @%o %k=%s\\n'          # kcat's format tokens
klog-consume -t t -G readers --registry reg         # as a member of a group
klog-consume -L --registry zk://zk1:2181/klog       # a cluster's brokers and partitions
klog-consume --data-dir data -t numbers -e          # embedded: read the files",
    environment: CLIENT_ENV,
    exit_status: CLIENT_EXIT,
};

/// `klog-dump`.
pub const DUMP: Extras = Extras {
    name: "klog-dump",
    examples: "\
klog-dump data/numbers-0/00000000000000000000.log   # one line per batch
klog-dump --records --print-data data/numbers-0     # and each record
klog-dump --verify data                             # every partition (exit 3 if damaged)
klog-dump --json data/numbers-0/00000000000000000000.index
klog-dump --registry reg                            # brokers, leaders, ISR, watermarks, groups, lag
klog-dump --registry zk://zk1:2181/klog             # the same, from ZooKeeper (read only)
klog-dump --compare d1/t-0 d2/t-0 d3/t-0            # replicas identical below the high watermark?",
    environment: &[("NO_COLOR", "no styling in tables")],
    exit_status: &[
        (0, "success, nothing wrong found"),
        (1, "a runtime failure, or nothing found to dump"),
        (2, "a usage error"),
        (
            3,
            "a problem found: a CRC, length, offset, index or trailing-bytes problem, or replicas that differ below the high watermark (--compare)",
        ),
    ],
};

/// `klog-recover`.
pub const RECOVER: Extras = Extras {
    name: "klog-recover",
    examples: "\
klog-recover data/numbers-0                         # from the recovery point
klog-recover --full --dry-run data                  # check everything, change nothing",
    environment: &[(
        "KLOG_DATA_DIR",
        "not read (the other tools take it): what klog-recover repairs is always named on its command line",
    )],
    exit_status: &[
        (0, "clean"),
        (
            1,
            "refused (a writer holds it), nothing found, or an I/O error",
        ),
        (2, "a usage error"),
        (3, "damage found and repaired"),
        (4, "damage found and left (--dry-run)"),
    ],
};

/// `klog-bench`.
pub const BENCH: Extras = Extras {
    name: "klog-bench",
    examples: "\
klog-bench produce -n 10000000 -s 200 --batch 50 --acks 1   # its own broker
klog-bench produce -b 127.0.0.1:9092 --acks all             # a running broker
klog-bench consume -n 10000000 --fetch-size 1MiB
klog-bench latency -n 200000 --rate 100000
klog-bench paper                                            # the paper's table",
    environment: &[
        ("KLOG_BROKER", "the broker to measure, as -b"),
        ("NO_COLOR", "no styling in tables"),
    ],
    exit_status: CLIENT_EXIT,
};

/// Every binary's extras.
pub const ALL: [Extras; 6] = [BROKER, PRODUCE, CONSUME, DUMP, RECOVER, BENCH];

/// The extras of the binary `name`.
pub fn extras(name: &str) -> Option<&'static Extras> {
    ALL.iter()
        .find(|e| name == e.name || name.starts_with(&format!("{}-", e.name)))
}

/// The `--help` text after the flags: examples, environment and exit
/// status.
pub fn after_help(e: &Extras) -> String {
    let mut out = String::from("Examples:\n");
    for line in e.examples.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if !e.environment.is_empty() {
        out.push_str("\nEnvironment:\n");
        for (var, what) in e.environment {
            out.push_str(&format!("  {var:<22}{what}\n"));
        }
    }
    out.push_str("\nExit status:\n");
    for (code, what) in e.exit_status {
        out.push_str(&format!("  {code}  {what}\n"));
    }
    out
}
