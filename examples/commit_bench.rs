//! The offset commit benchmark: how many single-partition commits a group
//! member makes a second through the registry, one after the other, as the
//! Kafka group coordinator makes them for an OffsetCommit (issue 27 asks
//! for 5,000 a second on a directory registry, 1,000 on ZooKeeper).
//!
//! ```sh
//! cargo run --release --example commit_bench                         # a directory under ./target
//! cargo run --release --example commit_bench -- --registry /mnt/x/r  # a directory on another disk
//! cargo run --release --example commit_bench -- --registry zk://127.0.0.1:2181/bench
//! cargo run --release --example commit_bench -- --commits 20000
//! ```
//!
//! It joins group `bench` as one member, claims partition 0 of topic
//! `bench`, and commits offsets 1, 2, ... `--commits` (default 5,000),
//! each a `Registry::store_offset` fenced by the claim (durable before it
//! returns: on a directory, a temporary file fsynced, the fence checked,
//! a rename and a directory fsync; on ZooKeeper, one `multi`). It prints
//! the commits a second and the latency's median and 99th percentile.
//! A directory it made is removed at the end.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use klog::coord::{MemberInfo, Registry};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut registry: Option<String> = None;
    let mut commits: u64 = 5000;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--registry" => registry = args.next(),
            "--commits" => commits = args.next().unwrap_or_default().parse()?,
            other => anyhow::bail!("unknown argument {other:?}: --registry R, --commits N"),
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
    let registry = klog::coord::open(&spec, Duration::from_secs(30))?;
    let took = run(&*registry, commits)?;
    drop(registry);
    if made {
        let _ = std::fs::remove_dir_all(&spec);
    }
    report(&spec, commits, took);
    Ok(())
}

/// Joins, claims and commits `commits` times: each commit's latency.
fn run(registry: &dyn Registry, commits: u64) -> anyhow::Result<Vec<Duration>> {
    let info = MemberInfo {
        member: "bench-1".into(),
        pid: std::process::id(),
        topics: vec!["bench".into()],
        coordinator: None,
    };
    let _entry = registry.join("bench", &info, Duration::from_secs(30))?;
    let claim = registry
        .claim("bench", "bench", 0, "bench-1", Duration::from_secs(30))?
        .ok_or_else(|| anyhow::anyhow!("partition 0 of bench is claimed by another member"))?;
    let mut took = Vec::with_capacity(commits as usize);
    for offset in 1..=commits {
        let began = Instant::now();
        registry.store_offset("bench", "bench", 0, offset, &claim)?;
        took.push(began.elapsed());
    }
    Ok(took)
}

fn report(spec: &str, commits: u64, mut took: Vec<Duration>) {
    let total: Duration = took.iter().sum();
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{spec}: {commits} commits in {:.2} s: {:.0} commits/s, latency median {:.2} ms, p99 {:.2} ms",
        total.as_secs_f64(),
        commits as f64 / total.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}
