//! GUIDE.md's "A secure cluster across hosts", step by step, on three
//! broker hosts, a ZooKeeper host and a client host (network namespaces,
//! tests/common/netns.rs): certificates made with the openssl commands
//! GUIDE.md gives, users and ACLs added with `klog-broker user|acl add`,
//! brokers started with its flags, replicating to each other over TLS
//! with their own SCRAM login. Every record a client acknowledged with
//! acks=all is read back by a client logged in as it says; a client
//! without the password, or without TLS, gets nothing.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::netns::{Host, Net};
use common::zk::ZkServer;
use common::BrokerProc;

const ZK: usize = 0;
const BROKER_HOSTS: [usize; 3] = [1, 2, 3];
const CLIENT: usize = 4;
const WAIT: Duration = Duration::from_secs(60);

/// Runs `command` to its end; its stdout, after checking it succeeded.
fn ok(mut command: Command, stdin: &str, what: &str) -> String {
    let out = assert_cmd::Command::from_std(std::mem::replace(&mut command, Command::new("true")))
        .write_stdin(stdin.to_string())
        .timeout(WAIT)
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// README's openssl commands, in `dir`: a CA, then a certificate for each
/// broker address naming that address.
fn certificates(dir: &Path, addrs: &[String]) {
    let sh = |script: &str| {
        let mut c = Command::new("sh");
        c.args(["-ec", script]).current_dir(dir);
        ok(c, "", script);
    };
    sh(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
        -keyout ca.key -out ca.pem -subj '/CN=klog CA' 2>/dev/null",
    );
    for ip in addrs {
        sh(&format!(
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {ip}.key \
               -out {ip}.csr -subj /CN={ip} 2>/dev/null
             printf 'subjectAltName=IP:%s\\nbasicConstraints=CA:FALSE\\n' {ip} > {ip}.ext
             openssl x509 -req -in {ip}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
               -extfile {ip}.ext -out {ip}.pem 2>/dev/null"
        ));
    }
}

/// `klog-broker --registry ZK ARGS` from `host`, with `stdin`.
fn admin(host: &Host, zk: &str, args: &[&str], stdin: &str) {
    let mut c = host.command(assert_cmd::cargo::cargo_bin("klog-broker"));
    c.args(["--registry", zk]).args(args);
    ok(c, stdin, &format!("klog-broker {args:?}"));
}

/// The client properties README gives alice (`$S`), with `password`.
fn alice(dir: &Path, password: &str) -> Vec<String> {
    [
        "security.protocol=sasl_ssl".to_string(),
        format!("ssl.ca.location={}", dir.join("ca.pem").display()),
        "sasl.mechanisms=SCRAM-SHA-512".into(),
        "sasl.username=alice".into(),
        format!("sasl.password={password}"),
    ]
    .into_iter()
    .flat_map(|p| ["-X".to_string(), p])
    .collect()
}

#[test]
fn readmes_secure_cluster_runs_on_three_hosts() {
    if Command::new("openssl").arg("version").output().is_err() {
        println!("skipped: no openssl");
        return;
    }
    let Some(net) = Net::new(5) else { return };
    let Some(zk) = ZkServer::start_in(net.host(ZK)) else {
        return;
    };
    let zk = zk_address(&zk);
    let pki = tempfile::tempdir().unwrap();
    let ips: Vec<String> = BROKER_HOSTS
        .iter()
        .map(|&h| net.host(h).addr().to_string())
        .collect();
    certificates(pki.path(), &ips);
    let client = net.host(CLIENT);
    for (user, password) in [
        ("broker", "broker-secret"),
        ("admin", "admin-secret"),
        ("alice", "alice-secret"),
    ] {
        admin(
            client,
            &zk,
            &["user", "add", user],
            &format!("{password}\n"),
        );
    }
    let acls: [&[&str]; 4] = [
        &[
            "--allow",
            "User:broker",
            "--operation",
            "cluster_action",
            "--cluster",
        ],
        &[
            "--allow",
            "User:alice",
            "--operation",
            "write",
            "--topic",
            "orders",
        ],
        &[
            "--allow",
            "User:alice",
            "--operation",
            "read",
            "--topic",
            "orders",
        ],
        &[
            "--allow",
            "User:alice",
            "--operation",
            "create",
            "--topic",
            "orders",
        ],
    ];
    for acl in acls {
        let mut args = vec!["acl", "add"];
        args.extend(acl);
        admin(client, &zk, &args, "");
    }
    let password = pki.path().join("broker.password");
    std::fs::write(&password, "broker-secret\n").unwrap();
    let data: Vec<tempfile::TempDir> = ips.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers: Vec<BrokerProc> = BROKER_HOSTS
        .iter()
        .zip(&ips)
        .zip(&data)
        .map(|((&h, ip), d)| {
            let cert = pki.path().join(format!("{ip}.pem"));
            let key = pki.path().join(format!("{ip}.key"));
            let ca = pki.path().join("ca.pem");
            let listen = format!("{ip}:9092");
            BrokerProc::start_command(
                net.host(h)
                    .command(assert_cmd::cargo::cargo_bin("klog-broker")),
                d.path(),
                &[
                    "--listen",
                    &listen,
                    "--registry",
                    &zk,
                    "--replication-factor",
                    "3",
                    "--min-insync-replicas",
                    "2",
                    "--tls-cert",
                    cert.to_str().unwrap(),
                    "--tls-key",
                    key.to_str().unwrap(),
                    "--tls-ca",
                    ca.to_str().unwrap(),
                    "--sasl-mechanisms",
                    "SCRAM-SHA-512",
                    "--sasl-username",
                    "broker",
                    "--sasl-password-file",
                    password.to_str().unwrap(),
                    "--authorize",
                    "--super-users",
                    "User:admin",
                ],
            )
        })
        .collect();
    // seq 1 1000 | klog-produce --registry $ZK -t orders --acks all $S
    let input: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    let mut produce = client.command(assert_cmd::cargo::cargo_bin("klog-produce"));
    produce
        .args(["--registry", &zk, "-t", "orders", "--acks", "all", "-q"])
        .args(alice(pki.path(), "alice-secret"));
    ok(produce, &input, "klog-produce as alice");
    // klog-consume --registry $ZK -t orders -e $S | wc -l
    let mut consume = client.command(assert_cmd::cargo::cargo_bin("klog-consume"));
    consume
        .args(["--registry", &zk, "-t", "orders", "-e", "-q"])
        .args(alice(pki.path(), "alice-secret"));
    let got = ok(consume, "", "klog-consume as alice");
    let mut got: Vec<u64> = got.lines().map(|l| l.parse().unwrap()).collect();
    got.sort();
    assert_eq!(got, (1..=1000).collect::<Vec<u64>>());
    // A wrong password, and no TLS at all, read nothing.
    for props in [
        alice(pki.path(), "guess"),
        vec!["-X".to_string(), "security.protocol=plaintext".to_string()],
    ] {
        let mut consume = client.command(assert_cmd::cargo::cargo_bin("klog-consume"));
        consume
            .args(["--registry", &zk, "-t", "orders", "-e", "-q"])
            .args(&props);
        let out = assert_cmd::Command::from_std(consume)
            .timeout(WAIT)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{props:?} read");
        assert!(out.stdout.is_empty(), "{props:?} read");
    }
    // Every record reaches all three brokers: the followers fetch over
    // TLS with their own login (min ISR 2 would let one lag behind, so
    // this waits for the third), and none was refused.
    let started = std::time::Instant::now();
    loop {
        let ends: Vec<u64> = data
            .iter()
            .map(|d| common::cluster::replica_in(&d.path().join("orders-0")).end())
            .collect();
        if ends.iter().all(|&e| e == 1000) {
            break;
        }
        assert!(started.elapsed() < WAIT, "replicas end at {ends:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for b in &brokers {
        let refused: Vec<String> = b
            .log()
            .into_iter()
            .filter(|l| l.contains("lacks cluster_action") || l.contains("claims to be"))
            .collect();
        assert!(refused.is_empty(), "{refused:?}");
    }
}

/// ZooKeeper's address as the brokers and tools take it.
fn zk_address(zk: &ZkServer) -> String {
    zk.address("/klog")
}
