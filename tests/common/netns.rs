//! Many hosts on one machine for a test: Linux network namespaces joined
//! by a private bridge, one of which can be cut off the network and healed.
//!
//! A [`Net`] of `n` hosts is `n + 1` namespaces: a switch holding a bridge
//! (`br0`), and `n` hosts, each joined to the bridge by a veth pair (`pI`
//! in the switch, `eth0` in the host) and given `10.200.0.(I+1)/24`, with
//! its loopback up. The host's root namespace is never touched: every
//! link is made inside the Net's own namespaces, so no packet can leave
//! the machine, and as each Net has its own bridge, Nets of parallel tests
//! reuse the same addresses without ever meeting.
//!
//! [`Host::command`] runs a program inside a host (`ip netns exec`): a
//! broker there listens on [`Host::addr`], and other hosts reach it by
//! that address. [`Net::cut`] installs an nftables table in the host that
//! drops all input and output but loopback's (its processes run on and
//! still reach each other); [`Net::cut_from`] drops only what goes between
//! the host and one other host; [`Net::heal`] removes either.
//!
//! [`Host::spawn_inside`] runs a closure on a thread of the test process
//! moved into a host (`setns`), to connect to a server there from the test
//! itself; the threads that one spawns are inside too.
//!
//! Namespaces are named `klog-test-PID-N-sw` and `klog-test-PID-N-hI`
//! (`N` counts the process's Nets). Dropping the Net deletes them, also
//! when its test panicked, which takes their links with them; it kills
//! nothing, as the processes in them are the test's (declare the Net
//! before them, so that they are dropped first). A new Net first deletes
//! the namespaces of dead processes, left by a run that crashed.
//!
//! Without root, `ip netns` or `nft`, [`Net::new`] prints a line saying
//! the test was skipped and returns `None`; with `KLOG_REQUIRE_NETNS=1` it
//! panics instead. `KLOG_NFT` names another `nft` (a missing one checks
//! the skip).

use std::ffi::OsStr;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::sched::{setns, CloneFlags};

/// Where `ip netns` names namespaces.
const NETNS_DIR: &str = "/run/netns";
/// What every namespace of this harness is named after: then the pid.
const PREFIX: &str = "klog-test-";
/// The most hosts a Net has: one /24, `.1` to `.250`.
const HOSTS_MAX: usize = 250;
/// The nftables table that cuts a host off.
const CUT_TABLE: &str = "klog_cut";

/// The process's next Net number.
static NEXT: AtomicU32 = AtomicU32::new(0);
/// Held while namespaces are made: `ip netns add` racing itself can stack
/// mounts of the namespace directory.
static SETUP: Mutex<()> = Mutex::new(());
/// Whether namespaces work here, probed once per process.
static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();

/// A private network of host namespaces around a bridge; see the module.
#[derive(Debug)]
pub struct Net {
    /// `klog-test-PID-N-`.
    prefix: String,
    /// Every namespace made so far, which Drop deletes.
    made: Vec<String>,
    hosts: Vec<Host>,
}

/// One host of a [`Net`]: a network namespace with one address.
#[derive(Debug, Clone)]
pub struct Host {
    namespace: String,
    addr: Ipv4Addr,
}

impl Host {
    /// Its address on the Net (`10.200.0.(I+1)` for host I).
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// Its namespace's name.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A command that runs `program` inside this host (`ip netns exec`,
    /// which execs it: the child is the program itself); add its
    /// arguments and spawn it as any other.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.namespace])
            .arg(program);
        command
    }

    /// Runs `f` on a new thread moved into this host's network namespace:
    /// what it binds and connects to is the host's, as are the threads it
    /// spawns. The thread panics if it cannot move in.
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = Path::new(NETNS_DIR).join(&self.namespace);
        std::thread::spawn(move || {
            let moved = std::fs::File::open(&path)
                .map_err(|e| e.to_string())
                .and_then(|ns| setns(ns, CloneFlags::CLONE_NEWNET).map_err(|e| e.to_string()));
            if let Err(why) = moved {
                panic!("cannot move a thread into {}: {why}", path.display());
            }
            f()
        })
    }
}

impl Net {
    /// Whether this machine can make a Net (root, `ip netns`, a bridge and
    /// `nft` in a namespace), or why not.
    pub fn available() -> Result<(), String> {
        AVAILABLE.get_or_init(probe).clone()
    }

    /// Makes a Net of `hosts` hosts, or returns `None` after printing why
    /// the test is skipped when this machine cannot (see
    /// [`Net::available`]); panics on a failure past that probe.
    pub fn new(hosts: usize) -> Option<Net> {
        assert!(
            (1..=HOSTS_MAX).contains(&hosts),
            "a Net has 1 to {HOSTS_MAX} hosts, not {hosts}"
        );
        if let Err(why) = Net::available() {
            assert!(
                std::env::var("KLOG_REQUIRE_NETNS").as_deref() != Ok("1"),
                "KLOG_REQUIRE_NETNS=1 but network namespaces are not available ({why})"
            );
            println!("skipped: network namespaces are not available ({why})");
            return None;
        }
        remove_stale();
        let _setup = SETUP.lock().unwrap_or_else(PoisonError::into_inner);
        // From here on, Drop deletes what was made, whatever happens.
        let mut net = Net {
            prefix: fresh_prefix(),
            made: Vec::new(),
            hosts: Vec::new(),
        };
        if let Err(why) = net.build(hosts) {
            panic!("cannot make a network of {hosts} hosts: {why}");
        }
        Some(net)
    }

    /// The switch, the hosts, their links and addresses.
    fn build(&mut self, hosts: usize) -> Result<(), String> {
        let switch = format!("{}sw", self.prefix);
        run("ip", &["netns", "add", &switch], "")?;
        self.made.push(switch.clone());
        let mut links = vec![
            "link add br0 type bridge".to_string(),
            "link set br0 up".into(),
        ];
        for i in 0..hosts {
            let namespace = format!("{}h{i}", self.prefix);
            run("ip", &["netns", "add", &namespace], "")?;
            self.made.push(namespace.clone());
            links.push(format!(
                "link add p{i} type veth peer name eth0 netns {namespace}"
            ));
            links.push(format!("link set p{i} master br0 up"));
            let last = u8::try_from(i + 1).expect("at most HOSTS_MAX hosts");
            let addr = Ipv4Addr::new(10, 200, 0, last);
            self.hosts.push(Host { namespace, addr });
        }
        ip_batch(&switch, &links)?;
        for host in &self.hosts {
            let lines = [
                "link set lo up".to_string(),
                format!("addr add {}/24 dev eth0", host.addr),
                "link set eth0 up".into(),
            ];
            ip_batch(&host.namespace, &lines)?;
        }
        Ok(())
    }

    /// Host `i` (from 0).
    pub fn host(&self, i: usize) -> &Host {
        let n = self.hosts.len();
        self.hosts
            .get(i)
            .unwrap_or_else(|| panic!("no host {i} in a Net of {n}"))
    }

    /// The names of every namespace of this Net: the switch, then the hosts.
    pub fn namespaces(&self) -> Vec<String> {
        self.made.clone()
    }

    /// Cuts host `i` off the network: everything in or out but loopback is
    /// dropped. Panics if it is cut already.
    pub fn cut(&self, i: usize) {
        self.install_cut(
            i,
            "policy drop; iif \"lo\" accept;",
            "policy drop; oif \"lo\" accept;",
        );
    }

    /// Cuts host `i` off host `j` only: what goes between their addresses
    /// is dropped, the rest flows. Panics if `i` is cut already.
    pub fn cut_from(&self, i: usize, j: usize) {
        let peer = self.host(j).addr;
        self.install_cut(
            i,
            &format!("policy accept; ip saddr {peer} drop;"),
            &format!("policy accept; ip daddr {peer} drop;"),
        );
    }

    /// Installs the cut table in host `i` with these input and output
    /// chain bodies.
    fn install_cut(&self, i: usize, input: &str, output: &str) {
        let rules = format!(
            "create table inet {CUT_TABLE}\n\
             table inet {CUT_TABLE} {{\n\
             \tchain input {{ type filter hook input priority 0; {input} }}\n\
             \tchain output {{ type filter hook output priority 0; {output} }}\n\
             }}\n"
        );
        if let Err(why) = self.nft(i, &["-f", "/dev/stdin"], &rules) {
            panic!("cannot cut host {i} off: {why}");
        }
    }

    /// Puts host `i` back on the network. Panics if it was not cut.
    pub fn heal(&self, i: usize) {
        if let Err(why) = self.nft(i, &["delete", "table", "inet", CUT_TABLE], "") {
            panic!("cannot heal host {i}: {why}");
        }
    }

    /// Runs `nft args` with `stdin` inside host `i`.
    fn nft(&self, i: usize, args: &[&str], stdin: &str) -> Result<String, String> {
        let nft = nft();
        let mut all = vec![
            "netns",
            "exec",
            self.host(i).namespace.as_str(),
            nft.as_str(),
        ];
        all.extend_from_slice(args);
        run("ip", &all, stdin)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if self.made.is_empty() {
            return;
        }
        let lines: Vec<String> = self.made.iter().map(|n| format!("netns del {n}")).collect();
        if let Err(why) = run("ip", &["-force", "-batch", "-"], &lines.join("\n")) {
            // Never a panic here: this may run while a test unwinds.
            let _ = writeln!(
                std::io::stderr(),
                "% netns: not every namespace was deleted: {why}"
            );
        }
    }
}

/// The `nft` to run: `KLOG_NFT` or `nft`.
fn nft() -> String {
    std::env::var("KLOG_NFT").unwrap_or_else(|_| "nft".to_string())
}

/// Whether namespaces work here: root, then `nft`, then a probe namespace
/// with a bridge and `nft list ruleset` inside it.
fn probe() -> Result<(), String> {
    if effective_uid() != Some(0) {
        return Err("not root".to_string());
    }
    let nft = nft();
    run(&nft, &["--version"], "").map_err(|why| format!("{why}; apt-get install nftables"))?;
    let probe = format!("{PREFIX}{}-probe", std::process::id());
    // A leftover of an earlier process with this pid, if any.
    let _ = run("ip", &["netns", "del", &probe], "");
    run("ip", &["netns", "add", &probe], "")?;
    let tried = run(
        "ip",
        &["-n", &probe, "link", "add", "br0", "type", "bridge"],
        "",
    )
    .and_then(|_| {
        run(
            "ip",
            &["netns", "exec", &probe, &nft, "list", "ruleset"],
            "",
        )
    });
    let deleted = run("ip", &["netns", "del", &probe], "");
    tried.and(deleted).map(|_| ())
}

/// This process's effective uid (the second field of `Uid:` in
/// `/proc/self/status`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    uids.split_whitespace().nth(1)?.parse().ok()
}

/// Deletes the namespaces of this harness whose process is gone.
fn remove_stale() {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let pid = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            // Another process may be deleting it too.
            let _ = run("ip", &["netns", "del", name], "");
        }
    }
}

/// `klog-test-PID-N-` for the next `N` that no namespace starts with (a
/// crashed process with this pid may have left some).
fn fresh_prefix() -> String {
    let names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{PREFIX}{}-{n}-", std::process::id());
        if !names.iter().any(|name| name.starts_with(&prefix)) {
            return prefix;
        }
    }
}

/// Runs `lines` as one `ip -batch` inside `namespace`.
fn ip_batch(namespace: &str, lines: &[String]) -> Result<String, String> {
    run("ip", &["-n", namespace, "-batch", "-"], &lines.join("\n"))
}

/// Runs `program args` with `stdin` (small: it fits a pipe), returning its
/// stdout, or why it failed, naming the command. Never panics.
fn run(program: &str, args: &[&str], stdin: &str) -> Result<String, String> {
    let shown = format!("`{program} {}`", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let written = match child.stdin.take() {
        Some(mut pipe) => pipe.write_all(stdin.as_bytes()),
        None => Ok(()),
    };
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{shown} failed ({}): {}",
            output.status,
            stderr.trim()
        ));
    }
    written.map_err(|e| format!("{shown}: writing its input: {e}"))?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
