//! The network-namespace harness (`tests/common/netns.rs`) that the "many
//! hosts" tests stand on: a broker in one namespace is reached from
//! another over the harness's private bridge, is unreachable from there
//! while its host is cut off (and still reachable over its own loopback),
//! and is reachable again once healed; a dropped `Net` leaves no namespace
//! behind, also when its test panicked, and kills nothing it did not
//! start. Skipped with a printed line where namespaces or `nft` are
//! missing; failed instead with `KLOG_REQUIRE_NETNS=1`.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::netns::{Host, Net};
use common::BrokerProc;

/// How long a producer may try to deliver to a host that is cut off.
const CUT_DELIVERY: &str = "2s";
/// The bound on every client command: far above what any of them needs.
const COMMAND_WAIT: Duration = Duration::from_secs(20);

/// Runs `klog-<tool>` inside `host` with `args` and `stdin`, bounded by
/// [`COMMAND_WAIT`].
fn run_in(host: &Host, tool: &str, args: &[&str], stdin: &str) -> Output {
    let command = host.command(assert_cmd::cargo::cargo_bin(tool));
    assert_cmd::Command::from_std(command)
        .args(args)
        .write_stdin(stdin.to_string())
        .timeout(COMMAND_WAIT)
        .output()
        .expect("run a client inside a namespace")
}

/// Produces `input` (lines) to topic `t` of the broker at `addr` from
/// inside `host`, giving up on delivery after [`CUT_DELIVERY`].
fn produce_in(host: &Host, addr: &str, input: &str) -> Output {
    let args = [
        "-b",
        addr,
        "-t",
        "t",
        "-q",
        "--message-timeout",
        CUT_DELIVERY,
    ];
    run_in(host, "klog-produce", &args, input)
}

fn text(output: &Output) -> String {
    format!(
        "{}; stdout {:?}; stderr {:?}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_host_cut_off_is_unreachable_until_healed_and_keeps_its_loopback() {
    let Some(net) = Net::new(2) else {
        return;
    };
    let (a, b) = (net.host(0), net.host(1));
    assert_ne!(a.addr(), b.addr());
    let data = tempfile::tempdir().unwrap();
    let command = a.command(assert_cmd::cargo::cargo_bin("klog-broker"));
    let listen = format!("{}:0", a.addr());
    let mut broker = BrokerProc::start_command(command, data.path(), &["--listen", &listen]);
    let addr = broker.addr.clone();
    assert!(addr.starts_with(&format!("{}:", a.addr())), "{addr}");

    let sent = produce_in(b, &addr, "1\n2\n3\n");
    assert!(
        sent.status.success(),
        "B could not reach A: {}",
        text(&sent)
    );

    net.cut(0);
    let started = Instant::now();
    let lost = produce_in(b, &addr, "lost\n");
    let waited = started.elapsed();
    assert!(
        !lost.status.success(),
        "B reached A while A was cut off: {}",
        text(&lost)
    );
    assert!(waited < Duration::from_secs(6), "giving up took {waited:?}");
    // Cut off, A's processes run on and reach each other over loopback.
    assert!(
        broker.child.try_wait().unwrap().is_none(),
        "the broker died"
    );
    let local = produce_in(a, &addr, "4\n");
    assert!(
        local.status.success(),
        "A's loopback was cut: {}",
        text(&local)
    );

    net.heal(0);
    let healed = produce_in(b, &addr, "5\n");
    assert!(
        healed.status.success(),
        "B could not reach A once healed: {}",
        text(&healed)
    );
    let args = ["-b", addr.as_str(), "-t", "t", "-e", "-q"];
    let read = run_in(b, "klog-consume", &args, "");
    assert!(read.status.success(), "{}", text(&read));
    assert_eq!(String::from_utf8_lossy(&read.stdout), "1\n2\n3\n4\n5\n");
    assert!(broker.terminate().success(), "{:?}", broker.log());
}

/// The namespaces that exist now.
fn namespaces_now() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// Whether `pid`'s network namespace has an interface named `name`.
fn has_interface(pid: u32, name: &str) -> bool {
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    dev.lines()
        .any(|line| line.trim_start().starts_with(&format!("{name}:")))
}

#[test]
fn a_net_dropped_by_a_panicking_test_removes_its_namespaces_and_links_only() {
    let Some(net) = Net::new(2) else {
        return;
    };
    let names = net.namespaces();
    assert_eq!(names.len(), 3, "{names:?}");
    let made = namespaces_now();
    assert!(
        names.iter().all(|n| made.contains(n)),
        "{names:?} in {made:?}"
    );
    // A process of the test, inside host 0 (so that its namespace outlives
    // the name): the Net must not kill it, and must still take its link.
    let mut sleep = net.host(0).command("sleep");
    sleep.arg("30");
    let mut sleeper = common::Proc::spawn_command(sleep, std::process::Stdio::null());
    let pid = sleeper.child.id();
    assert!(has_interface(pid, "eth0"));
    net.cut(1);

    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _net = net;
        panic!("a test failing while its Net is alive (on purpose)");
    }));
    assert!(unwound.is_err());
    let left = namespaces_now();
    assert!(
        names.iter().all(|n| !left.contains(n)),
        "{names:?} left in {left:?}"
    );
    assert!(
        sleeper.child.try_wait().unwrap().is_none(),
        "the Net killed a test's process"
    );
    // The veth pair goes with the switch's namespace, which the kernel
    // tears down in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    while has_interface(pid, "eth0") {
        assert!(
            Instant::now() < deadline,
            "host 0 kept its link to the switch"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = sleeper.child.kill();
}

#[test]
fn namespaces_left_by_a_dead_process_are_removed_by_the_next_net() {
    if Net::available().is_err() {
        // The skip line is Net::new's to print.
        assert!(Net::new(1).is_none());
        return;
    }
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = format!("klog-test-{dead}-0-sw");
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .unwrap();
    assert!(made.success());
    let net = Net::new(1).expect("available");
    assert!(!namespaces_now().contains(&stale), "{stale} is still there");
    drop(net);
}

/// Runs this test binary's `test` alone with `env`, returning its output.
fn rerun(test: &str, env: &[(&str, &str)]) -> Output {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env_remove("KLOG_REQUIRE_NETNS");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

#[test]
fn without_nft_the_tests_say_skipped_and_fail_with_klog_require_netns() {
    let test = "a_host_cut_off_is_unreachable_until_healed_and_keeps_its_loopback";
    let missing = ("KLOG_NFT", "/nonexistent/nft");
    let skipped = rerun(test, &[missing]);
    assert!(skipped.status.success(), "{}", text(&skipped));
    let stdout = String::from_utf8_lossy(&skipped.stdout);
    assert!(
        stdout.contains("skipped: network namespaces are not available ("),
        "{}",
        text(&skipped)
    );
    let required = rerun(test, &[missing, ("KLOG_REQUIRE_NETNS", "1")]);
    assert!(!required.status.success(), "{}", text(&required));
    let all = text(&required);
    assert!(
        all.contains("KLOG_REQUIRE_NETNS=1 but network namespaces"),
        "{all}"
    );
    // Where the rest is there, the missing nft is the reason given.
    if Net::available().is_ok() {
        assert!(stdout.contains("`/nonexistent/nft --version`"), "{stdout}");
        assert!(stdout.contains("apt-get install nftables"), "{stdout}");
        assert!(all.contains("/nonexistent/nft"), "{all}");
    }
}
