//! Asking registered brokers for their topics' offsets (the metadata
//! request), as the looks at a cluster do (`klog-dump --registry`, `-L
//! --registry`): the registry is read first, then every broker at once,
//! each in a thread of its own on one connection, within
//! [`ANSWER_TIMEOUT`] for all it is asked, connecting included.
//!
//! A broker that does not answer in time (stopped with SIGSTOP,
//! overloaded, cut off while still registered) is asked nothing more:
//! each topic left gets the same reason, `B did not answer within 1s`, and
//! [`say_silent`] names it on stderr. A look at a cluster thus
//! ends within about a second whatever its brokers do (a request's own
//! timeout is 30 s, paid once per topic before).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::client::{Connection, PartitionOffsets};
use crate::coord::BrokerInfo;
use crate::error::Error;

use super::Say;

/// How long a look waits for each broker, over the whole look
/// (connecting and every request): a broker silent for longer is asked
/// nothing more and what it would tell is marked as not answered.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(1);

/// What the brokers asked said.
#[derive(Debug, Default)]
pub struct Answers {
    /// Each (broker id, topic)'s offsets, or why there are none.
    pub offsets: BTreeMap<(String, String), Result<PartitionOffsets, String>>,
    /// Whether each broker asked answered within [`ANSWER_TIMEOUT`], by
    /// id (a broker not asked is not here).
    pub answered: BTreeMap<String, bool>,
}

impl Answers {
    /// Asks each broker in `wanted` (by id; one not among `brokers` is
    /// not asked) for the offsets of its topics, all brokers at once, each
    /// within [`ANSWER_TIMEOUT`].
    pub fn ask(brokers: &[BrokerInfo], wanted: &BTreeMap<String, BTreeSet<String>>) -> Answers {
        let answers: Vec<_> = std::thread::scope(|scope| {
            let asking: Vec<_> = wanted
                .iter()
                .filter_map(|(id, topics)| {
                    let broker = brokers.iter().find(|b| &b.id == id)?;
                    Some(scope.spawn(move || (broker, ask_broker(broker, topics, ANSWER_TIMEOUT))))
                })
                .collect();
            asking
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut all = Answers::default();
        for (broker, (answered, offsets)) in answers {
            all.answered.insert(broker.id.clone(), answered);
            for (topic, offsets) in offsets {
                all.offsets.insert((broker.id.clone(), topic), offsets);
            }
        }
        all
    }

    /// The offsets broker `id` reported for `topic`, or why there are
    /// none; `None` if it was not asked about it.
    pub fn offsets(&self, id: &str, topic: &str) -> Option<&Result<PartitionOffsets, String>> {
        self.offsets.get(&(id.to_string(), topic.to_string()))
    }
}

/// Says (a `% broker B did not answer within 1s at ADDR: ...` line on
/// stderr, unless quiet) each of `brokers` that did not answer in time by
/// `answered` ([`Answers::answered`]), and that what it would tell is
/// `marked`.
pub fn say_silent(
    answered: &BTreeMap<String, bool>,
    brokers: &[BrokerInfo],
    marked: &str,
    say: Say,
) {
    for (id, _) in answered.iter().filter(|(_, answered)| !**answered) {
        let addr = brokers
            .iter()
            .find(|b| &b.id == id)
            .map_or_else(String::new, BrokerInfo::addr);
        say.info(format_args!(
            "broker {id} did not answer within {ANSWER_TIMEOUT:?} at {addr}: {marked} (is it stopped?)"
        ));
    }
}

/// Each topic's offsets and whether a broker answered in time.
type BrokerAnswers = (bool, Vec<(String, Result<PartitionOffsets, String>)>);

/// Asks `broker` for the offsets of each of `topics`, one request each on
/// one connection, all within `timeout` from now (connecting included).
/// A broker that does not answer in time (or a stop signal) is asked
/// nothing more: each topic left gets the same reason. Says whether the
/// broker answered in time.
fn ask_broker(broker: &BrokerInfo, topics: &BTreeSet<String>, timeout: Duration) -> BrokerAnswers {
    let deadline = Instant::now() + timeout;
    let addr = broker.addr();
    let mut conn: Option<Connection> = None;
    let mut given_up: Option<String> = None;
    let mut answered = true;
    let mut answers = Vec::new();
    for topic in topics {
        if let Some(why) = &given_up {
            answers.push((topic.clone(), Err(why.clone())));
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let asked = match conn.as_mut() {
            Some(c) => {
                c.set_timeout(left);
                c.partitions(topic)
            }
            None => Connection::connect_timeout(&addr, left)
                .and_then(|c| conn.insert(c).partitions(topic)),
        };
        let asked = asked.map_err(|e| match e {
            Error::TimedOut { .. } => {
                answered = false;
                let why = format!("{} did not answer within {timeout:?}", broker.id);
                given_up = Some(why.clone());
                why
            }
            e => {
                let why = format!("{} at {addr}: {e}", broker.id);
                if matches!(e, Error::Stopped { .. }) {
                    given_up = Some(why.clone());
                }
                if matches!(e, Error::Network { .. } | Error::Protocol { .. }) {
                    conn = None;
                }
                why
            }
        });
        answers.push((topic.clone(), asked));
    }
    (answered, answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_silent_past_the_timeout_is_asked_nothing_more() {
        // A listener that never accepts: the kernel completes the
        // connection, nobody reads the request (a stopped broker).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let broker = BrokerInfo {
            kafka: None,
            id: "b1".into(),
            host: "127.0.0.1".into(),
            port: silent.local_addr().unwrap().port(),
            pid: 7,
            topics: BTreeMap::new(),
            principal: None,
        };
        let topics: BTreeSet<String> = ["t", "u", "v"].map(String::from).into();
        let timeout = Duration::from_millis(300);
        let started = Instant::now();
        let (answered, offsets) = ask_broker(&broker, &topics, timeout);
        let took = started.elapsed();
        assert!(!answered);
        assert!(
            took < timeout * 2,
            "one wait for the whole broker, not one per topic: {took:?}"
        );
        let said: Vec<(&str, Result<PartitionOffsets, String>)> = ["t", "u", "v"]
            .map(|t| (t, Err("b1 did not answer within 300ms".to_string())))
            .into();
        let offsets: Vec<(&str, Result<PartitionOffsets, String>)> = offsets
            .iter()
            .map(|(t, o)| (t.as_str(), o.clone()))
            .collect();
        assert_eq!(offsets, said);
    }
}
