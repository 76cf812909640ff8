//! Clients across a broker restart: a following consumer reconnects and
//! resumes where it was, saying so.

mod common;

use std::time::Duration;

use common::{produce_to, BrokerProc, Proc};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_following_consumer_survives_a_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &[]);
    let addr = broker.addr.clone();
    produce_to(&addr, "t", "1\n2\n3\n", &[]);
    let consumer = Proc::spawn("klog-consume", &["-b", &addr, "-t", "t", "-u"]);
    assert_eq!(consumer.take_lines(3, WAIT), ["1", "2", "3"]);
    assert!(broker.terminate().success());
    std::thread::sleep(Duration::from_millis(500));
    let broker = BrokerProc::start(dir.path(), &["--listen", &addr]);
    produce_to(&broker.addr, "t", "4\n5\n", &[]);
    assert_eq!(
        consumer.take_lines(2, WAIT),
        ["4", "5"],
        "resumed where it was, nothing twice"
    );
    consumer.wait_stderr("resuming t [0] at offset 3", |_| true, WAIT);
    let said = consumer.stderr_lines().join("\n");
    assert!(said.contains("reconnecting"), "{said}");
}
