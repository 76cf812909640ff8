//! The offset commit benchmark: how many single-partition commits group
//! members make a second through the registry, each one after the other,
//! as the Kafka group coordinator makes them for an OffsetCommit (issue 27
//! asks for 5,000 a second on a directory registry, 1,000 on ZooKeeper).
//!
//! ```sh
//! cargo run --release --example commit_bench                         # a directory under ./target
//! cargo run --release --example commit_bench -- --registry /mnt/x/r  # a directory on another disk
//! cargo run --release --example commit_bench -- --registry zk://127.0.0.1:2181/bench
//! cargo run --release --example commit_bench -- --commits 20000 --members 8
//! cargo run --release --example commit_bench -- --registry R --offsets-topic   # brokers on R
//! ```
//!
//! Each of `--members` members (default 1, each on a thread of its own)
//! joins group `bench`, claims its own partition of topic `bench`, and
//! commits offsets 1, 2, ... `--commits` (default 5,000, per member),
//! each a `Registry::store_offset` fenced by the claim. On a directory a
//! commit is a record appended to the partition's journal, fsynced within
//! 100 ms by the registry's syncer (and the journal rewritten, fsynced,
//! every 1,360 commits or so); on ZooKeeper, one `multi`, which ZooKeeper
//! fsyncs before it answers (many members' at once). It prints the
//! commits a second of all members together and the latency's median and
//! 99th percentile. A directory it made is removed at the end.
//!
//! With `--offsets-topic`, the commits go to the offsets topic instead, as
//! klog's groups commit (each an offset_commit request to the leader of
//! the group's partition of `__consumer_offsets`, answered once durable on
//! its in-sync replicas): `--registry` must name a registry that brokers
//! run on.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use klog::coord::{MemberInfo, Registry};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut registry: Option<String> = None;
    let mut commits: u64 = 5000;
    let mut members: u32 = 1;
    let mut topic = false;
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--registry" => registry = Some(value()),
            "--commits" => commits = value().parse()?,
            "--members" => members = value().parse::<u32>()?.max(1),
            "--offsets-topic" => topic = true,
            other => {
                anyhow::bail!("unknown argument {other:?}: --registry R, --commits N, --members M, --offsets-topic")
            }
        }
    }
    let made = registry.is_none();
    let spec = match registry {
        Some(spec) => spec,
        None => {
            let dir = PathBuf::from("target/commit-bench");
            let _ = std::fs::remove_dir_all(&dir);
            dir.to_string_lossy().into_owned()
        }
    };
    anyhow::ensure!(
        !(made && topic),
        "--offsets-topic needs --registry R with brokers on it"
    );
    let mut registry = klog::coord::open(&spec, Duration::from_secs(30))?;
    if topic {
        registry = klog::coord::offsets_topic::TopicRegistry::wrap(registry);
    }
    let began = Instant::now();
    let took = std::thread::scope(|s| {
        let runs: Vec<_> = (0..members)
            .map(|m| {
                let registry = &*registry;
                s.spawn(move || run(registry, m, commits))
            })
            .collect();
        let mut took = Vec::new();
        for run in runs {
            took.extend(run.join().expect("a member panicked")?);
        }
        anyhow::Ok(took)
    })?;
    let elapsed = began.elapsed();
    drop(registry);
    if made {
        let _ = std::fs::remove_dir_all(&spec);
    }
    let label = match topic {
        true => format!("{spec} (the offsets topic)"),
        false => spec.clone(),
    };
    report(&label, members, elapsed, took);
    Ok(())
}

/// Member `m` joins, claims partition `m` and commits `commits` times:
/// each commit's latency.
fn run(registry: &dyn Registry, m: u32, commits: u64) -> anyhow::Result<Vec<Duration>> {
    let member = format!("bench-{m}");
    let info = MemberInfo {
        member: member.clone(),
        pid: std::process::id(),
        topics: vec!["bench".into()],
        coordinator: None,
    };
    let _entry = registry.join("bench", &info, Duration::from_secs(30))?;
    let claim = registry
        .claim("bench", "bench", m, &member, Duration::from_secs(30))?
        .ok_or_else(|| anyhow::anyhow!("partition {m} of bench is claimed by another member"))?;
    let mut took = Vec::with_capacity(commits as usize);
    for offset in 1..=commits {
        let began = Instant::now();
        registry.store_offset("bench", "bench", m, offset, &claim)?;
        took.push(began.elapsed());
    }
    anyhow::ensure!(
        registry.committed("bench", "bench", m)? == Some(commits),
        "partition {m}: the last commit is not the committed offset"
    );
    Ok(took)
}

fn report(spec: &str, members: u32, elapsed: Duration, mut took: Vec<Duration>) {
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{spec}: {} commits by {members} member(s) in {:.2} s: {:.0} commits/s, latency median {:.3} ms, p99 {:.3} ms",
        took.len(),
        elapsed.as_secs_f64(),
        took.len() as f64 / elapsed.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}
