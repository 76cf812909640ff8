//! `klog-consume -G`: following a topic as a member of a consumer group,
//! committing what was printed (or, with `--commit-from`, what a
//! producer acknowledged: [`crate::tools::commit_from`]), and
//! `--reset-offsets`.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::{new_printer, stdout_closed, GroupOptions, Options, Output, Printer, LEADERS_PATIENCE};
use crate::client::offset::OffsetSpec;
use crate::coord::group::{Committable, GroupConfig, GroupMember};
use crate::coord::Registry;
use crate::tools::commit_from::{Acked, STUCK_AFTER};
use crate::tools::Say;

/// "member M owns t [0] from offset 5, t [1] from offset 0" (or "owns no partition").
fn describe(member: &GroupMember, topic: &str) -> String {
    let owned: Vec<String> = member
        .positions()
        .iter()
        .map(|(p, o)| format!("{topic} [{p}] from offset {o}"))
        .collect();
    if owned.is_empty() {
        format!("member {} owns no partition of {topic}", member.member())
    } else {
        format!("member {} owns {}", member.member(), owned.join(", "))
    }
}

/// What a group member is asked to do.
fn group_config(options: &Options, group_options: &GroupOptions) -> GroupConfig {
    GroupConfig {
        group: group_options.group.clone(),
        topic: options.topic.clone(),
        reset: options.offset,
        commit_interval: Duration::from_millis(group_options.commit_interval_ms),
        commit: group_options.commit,
        session_timeout: Duration::from_millis(group_options.session_timeout_ms),
        // Also how often the member renews its session: ten times per
        // timeout.
        poll_interval: Duration::from_millis(
            (group_options.session_timeout_ms / 10).clamp(20, 1000),
        ),
        exit_at_end: options.exit_at_end,
        fetch: options.fetch,
        committable: None,
    }
}

/// Joins the group; a topic not in the registry yet is waited for (unless
/// `-e`), as a consumer waits for a topic to appear. `None`: stopped first.
fn join_when_there(
    registry: Arc<dyn Registry>,
    config: GroupConfig,
    say: Say,
) -> crate::Result<Option<GroupMember>> {
    let (mut said, mut waited) = (false, false);
    let started = std::time::Instant::now();
    loop {
        match GroupMember::join(Arc::clone(&registry), config.clone()) {
            Err(crate::Error::NotInRegistry { topic, registry: r }) if !config.exit_at_end => {
                if !said {
                    say.info(format_args!(
                        "Waiting for topic {topic} to appear in the registry {r}"
                    ));
                    said = true;
                }
            }
            // Placed in the registry, not yet created on its broker.
            Err(crate::Error::Broker {
                code: crate::protocol::ErrorCode::UnknownTopic,
                ..
            }) if !config.exit_at_end => {}
            // A leader moving (an election) while its ends are asked: asked
            // again, for as long as a consumer waits for leaders.
            Err(ref e @ crate::Error::Broker { .. })
                if crate::coord::route::retriable(e) && started.elapsed() < LEADERS_PATIENCE =>
            {
                if !waited {
                    say.info(format_args!("{e}: waiting for a leader"));
                    waited = true;
                }
            }
            joined => return joined.map(Some),
        }
        if crate::stop::stopping() {
            return Ok(None);
        }
        std::thread::sleep(config.poll_interval);
    }
}

/// Opens the group's registry and joins the group, once the topic is
/// there (`None`: stopped before).
fn join_group(
    options: &Options,
    group_options: &GroupOptions,
    acked: Option<&Arc<Acked>>,
    say: Say,
) -> anyhow::Result<Option<GroupMember>> {
    let dir = &group_options.registry;
    let timeout = Duration::from_millis(group_options.session_timeout_ms);
    let registry = crate::coord::open(dir, timeout)
        .with_context(|| format!("cannot open the registry {}", dir.display()))?;
    // Offsets are committed to the offsets topic, through its leader.
    let registry = crate::coord::offsets_topic::TopicRegistry::wrap(registry);
    let mut config = group_config(options, group_options);
    config.committable = acked.map(|a| Arc::clone(a) as Arc<dyn Committable>);
    join_when_there(registry, config, say).with_context(|| {
        format!(
            "cannot join group {:?} for topic {:?}",
            group_options.group, options.topic
        )
    })
}

/// Consumes as a member of a consumer group (`-G`).
pub(super) fn follow_group(
    options: &Options,
    group_options: &GroupOptions,
    say: Say,
) -> anyhow::Result<()> {
    let acked =
        match &group_options.commit_from {
            Some(path) => Some(Acked::follow(path, &options.topic).with_context(|| {
                format!("cannot read the acknowledgements in {}", path.display())
            })?),
            None => None,
        };
    let Some(mut member) = join_group(options, group_options, acked.as_ref(), say)? else {
        return Ok(());
    };
    if member.lost_rejoins() > 0 {
        say_lost(&member, group_options, say);
    }
    tell(&mut member, options, group_options, say);
    let mut printer = new_printer(options);
    while printer.printed < printer.limit && !crate::stop::stopping() {
        if !upkeep(&mut member, &mut printer, group_options, say)? {
            break;
        }
        if let Some(acked) = &acked {
            say_stuck(acked, &options.topic, say);
            if acked.stopped().is_some() {
                break;
            }
            if !acked.room(Duration::ZERO) {
                // As many records as may be wait for their acknowledgement.
                flush(&mut printer)?;
                acked.room(Duration::from_millis(100));
                continue;
            }
        }
        // At most a slice of records per turn, so that commits and
        // rebalances keep their pace however fast records come.
        let mut turn = 0;
        let n = member.poll(Duration::from_millis(100), |p, r| {
            turn += 1;
            if let Some(acked) = &acked {
                acked.printed(p, r.offset);
            }
            Ok(printer.print(p, r)? && turn < 1024)
        })?;
        for notice in member.take_notices() {
            say.info(notice);
        }
        if n == 0 {
            flush(&mut printer)?;
            if stdout_closed() {
                break;
            }
        }
    }
    flush(&mut printer)?;
    drop(printer);
    let stopped = match &acked {
        Some(acked) => settle(acked, &mut member, say)?,
        None => None,
    };
    member.close()?;
    stopped.map_or(Ok(()), |why| Err(anyhow::anyhow!(why)))
}

fn flush(printer: &mut Printer<'_>) -> anyhow::Result<()> {
    printer.out.flush().context("cannot write to stdout")
}

/// Says the member's notices and what it owns now.
fn tell(member: &mut GroupMember, options: &Options, group_options: &GroupOptions, say: Say) {
    for notice in member.take_notices() {
        say.info(notice);
    }
    say.info(format_args!(
        "Group {}: {}",
        group_options.group,
        describe(member, &options.topic)
    ));
}

/// A turn's upkeep of the membership: with `-e`, ends once the group is
/// done (`false`); joins again after a lost session; rebalances; commits
/// when due. Every step that commits flushes stdout first: a committed
/// offset never covers a record still in the buffer.
fn upkeep(
    member: &mut GroupMember,
    printer: &mut Printer<'_>,
    group_options: &GroupOptions,
    say: Say,
) -> anyhow::Result<bool> {
    let options = printer.options;
    if member.caught_up() {
        flush(printer)?;
        if member.done()? {
            return Ok(false);
        }
    }
    if !member.heartbeat()? {
        flush(printer)?;
        say_lost(member, group_options, say);
        member.rejoin()?;
        tell(member, options, group_options, say);
    }
    if member.needs_rebalance()? {
        flush(printer)?;
        let rejoins = member.lost_rejoins();
        member.rebalance()?;
        if member.lost_rejoins() > rejoins {
            say_lost(member, group_options, say);
        }
        tell(member, options, group_options, say);
    }
    if member.commit_due() {
        flush(printer)?;
        member.commit()?;
    }
    Ok(true)
}

/// Says that the member lost its session.
fn say_lost(member: &GroupMember, group_options: &GroupOptions, say: Say) {
    say.info(format_args!(
        "Group {}: member {} lost its session (silent longer than its session timeout of {} ms): \
         dropped its partitions without committing, rejoining",
        group_options.group,
        member.member(),
        group_options.session_timeout_ms
    ));
}

/// How long a member that stops waits for the acknowledgements of what it
/// printed (`--commit-from`), once its output is closed: its producer
/// delivers what it holds within its own delivery timeout (a second
/// signal ends the wait at once).
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// `--commit-from`, the member stops: closes stdout, so that its producer
/// sees the end of its input and delivers what it holds, and waits for
/// those acknowledgements (up to [`SETTLE_MAX`], keeping its session),
/// saying what stays uncommitted. The error to end with: the
/// acknowledgements stopped while the member was printing.
fn settle(acked: &Acked, member: &mut GroupMember, say: Say) -> anyhow::Result<Option<String>> {
    let failed = acked.stopped();
    if failed.is_none() {
        close_stdout();
        let until = std::time::Instant::now() + SETTLE_MAX;
        while !acked.settled(Duration::from_millis(100)) && std::time::Instant::now() < until {
            if !member.heartbeat()? {
                // Its partitions are another's now: it commits nothing.
                break;
            }
        }
    }
    let unacked = acked.unacked();
    if unacked > 0 {
        say.info(format_args!(
            "{} printed and not acknowledged: their offsets are not committed, and the group \
             reads them again",
            crate::human::count(unacked as u64, "record")
        ));
    }
    Ok(failed)
}

/// `--commit-from`: names, once, a record that waits for its
/// acknowledgement too long.
fn say_stuck(acked: &Acked, topic: &str, say: Say) {
    if let Some((p, offset)) = acked.stuck() {
        say.info(format_args!(
            "{topic} [{p}] offset {offset} was printed {}s ago and is not acknowledged in {} \
             (its producer refused it, or writes no --report there): the group commits \
             nothing of {topic} [{p}] past it",
            STUCK_AFTER.as_secs(),
            acked.path().display()
        ));
    }
}

/// Points stdout at /dev/null: whoever reads it sees its end.
fn close_stdout() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2(null.as_raw_fd(), io::stdout().as_raw_fd());
    }
}

/// `--reset-offsets SPEC` (with `-G`): sets the group's committed offsets
/// of the topic, prints them (a table, or one JSON object per partition
/// with `-J`), and consumes nothing.
pub fn reset_offsets(options: &Options, spec: OffsetSpec) -> anyhow::Result<()> {
    let group_options = options
        .group
        .as_ref()
        .context("--reset-offsets needs -G GROUP --registry REGISTRY")?;
    let dir = &group_options.registry;
    let timeout = Duration::from_millis(group_options.session_timeout_ms);
    let registry = crate::coord::open(dir, timeout)
        .with_context(|| format!("cannot open the registry {}", dir.display()))?;
    // Offsets are committed to the offsets topic, through its leader.
    let registry = crate::coord::offsets_topic::TopicRegistry::wrap(registry);
    let config = group_config(options, group_options);
    let resets =
        crate::coord::group::reset_offsets(&*registry, &config, spec).with_context(|| {
            format!(
                "cannot reset the offsets of group {:?} for topic {:?}",
                config.group, config.topic
            )
        })?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if matches!(options.output, Output::Json) {
        for r in &resets {
            let line = serde_json::json!({"type": "offset", "group": config.group, "topic": config.topic,
                "partition": r.partition, "before": r.before, "offset": r.offset});
            writeln!(out, "{line}")?;
        }
    } else {
        let mut t = crate::tools::table(&["group", "topic", "partition", "before", "offset"]);
        for r in &resets {
            t.add_row([
                config.group.clone(),
                config.topic.clone(),
                r.partition.to_string(),
                r.before.map_or_else(|| "none".into(), |b| b.to_string()),
                r.offset.to_string(),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    out.flush()?;
    Ok(())
}
