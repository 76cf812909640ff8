//! confluent-kafka's AdminClient manages klog's SCRAM users and ACLs
//! (DescribeUserScramCredentials, AlterUserScramCredentials, CreateAcls,
//! DescribeAcls, DeleteAcls): what it creates counts for logins and
//! requests at once, is what `klog-broker user list` and `acl list` show,
//! and only a principal with alter on the cluster may change it.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::kafka::{assert_ok, klog_broker, login, python, run_bounded, script, KafkaBroker};

/// The broker's flags: SCRAM logins, ACLs checked, `admin` a super user.
const FLAGS: [&str; 5] = [
    "--sasl-mechanisms",
    "SCRAM-SHA-256,SCRAM-SHA-512",
    "--authorize",
    "--super-users",
    "User:admin",
];

/// Runs admin.py as `who` (a KLOG_SECURITY JSON); its stdout, checked.
fn admin(python: &Path, who: &str, broker: &KafkaBroker, args: &[&str]) -> String {
    let mut command = std::process::Command::new(python);
    command
        .arg(script("admin.py"))
        .arg(&broker.kafka)
        .args(args)
        .env("KLOG_SECURITY", who);
    let out = run_bounded(command, b"", Duration::from_secs(90));
    assert_ok(&format!("admin.py {}", args.join(" ")), &out);
    String::from_utf8(out.stdout).unwrap()
}

/// client.py (confluent-kafka) as `who`: whether it did what it was asked.
fn client(python: &Path, who: &str, broker: &KafkaBroker, args: &[&str]) -> bool {
    let stderr = refused(python, who, broker, args, 40);
    eprintln!("client.py {args:?}: {stderr:?}");
    stderr.is_none()
}

/// client.py as `who`, given `deadline` seconds: its stderr when it
/// fails, `None` when it does what it was asked.
fn refused(
    python: &Path,
    who: &str,
    broker: &KafkaBroker,
    args: &[&str],
    deadline: u64,
) -> Option<String> {
    let mut command = std::process::Command::new(python);
    command
        .arg(script("client.py"))
        .arg("confluent-kafka")
        .args(&args[..1])
        .arg(&broker.kafka)
        .args(&args[1..])
        .env("KLOG_SECURITY", who)
        .env("KLOG_DEADLINE_S", deadline.to_string());
    let out = run_bounded(command, b"", Duration::from_secs(90));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (!out.status.success()).then_some(stderr)
}

/// Asserts that client.py as `who` is refused, for a reason that contains
/// `why`.
fn assert_refused(python: &Path, who: &str, broker: &KafkaBroker, args: &[&str], why: &str) {
    let stderr = refused(python, who, broker, args, 6).expect("refused");
    assert!(stderr.contains(why), "not {why}: {stderr}");
}

fn setup() -> Option<(PathBuf, KafkaBroker, String)> {
    let python = python()?;
    let broker = KafkaBroker::with_registry(&FLAGS);
    let registry = broker.registry.clone().unwrap();
    klog_broker(&registry, &["user", "add", "admin"], "x-secret\n");
    Some((python, broker, login("SCRAM-SHA-512", "admin", "x-secret")))
}

#[test]
fn an_admin_client_adds_a_user_who_logs_in_at_once() {
    let Some((python, mut broker, root)) = setup() else {
        return;
    };
    let registry = broker.registry.clone().unwrap();
    let carol = login("SCRAM-SHA-256", "carol", "c-secret");
    let produce = ["produce", "c-1", "1", "1"];
    assert_refused(&python, &carol, &broker, &produce, "Authentication failed");
    let out = admin(
        &python,
        &root,
        &broker,
        &["upsert-user", "carol", "SCRAM-SHA-256", "8192", "c-secret"],
    );
    assert_eq!(out.trim(), "ok");
    let out = admin(
        &python,
        &root,
        &broker,
        &["describe-users", "carol", "nobody"],
    );
    assert!(out.contains("carol SCRAM_SHA_256 8192"), "{out}");
    assert!(out.contains("error RESOURCE_NOT_FOUND"), "{out}");
    let listed = klog_broker(&registry, &["user", "list"], "");
    assert!(listed.contains("carol\tSCRAM-SHA-256\n"), "{listed}");
    // Every user, as librdkafka asks (an empty list).
    let out = admin(&python, &root, &broker, &["describe-users"]);
    assert!(out.contains("carol SCRAM_SHA_256 8192"), "{out}");
    assert!(out.contains("admin SCRAM_SHA_512 4096"), "{out}");
    // Logged in, but allowed nothing yet.
    assert_refused(
        &python,
        &carol,
        &broker,
        &produce,
        "TOPIC_AUTHORIZATION_FAILED",
    );
    // (A consumer without a group of its own still finds a coordinator.)
    for (operation, rtype, name, pattern) in [
        ("write", "topic", "c-", "prefixed"),
        ("read", "topic", "c-", "prefixed"),
        ("create", "topic", "c-", "prefixed"),
        ("read", "group", "*", "literal"),
    ] {
        let out = admin(
            &python,
            &root,
            &broker,
            &[
                "create-acl",
                rtype,
                name,
                pattern,
                "User:carol",
                operation,
                "allow",
            ],
        );
        assert_eq!(out.trim(), "ok", "{operation}");
    }
    let listed = klog_broker(&registry, &["acl", "list"], "");
    assert!(listed.contains("User:carol"), "{listed}");
    assert!(client(
        &python,
        &carol,
        &broker,
        &["produce", "c-1", "1", "5"]
    ));
    assert!(client(&python, &carol, &broker, &["consume", "c-1", "5"]));
    // Her credential deleted, she cannot log in.
    let out = admin(
        &python,
        &root,
        &broker,
        &["delete-user", "carol", "SCRAM-SHA-256"],
    );
    assert_eq!(out.trim(), "ok");
    assert_refused(&python, &carol, &broker, &produce, "Authentication failed");
    let out = admin(
        &python,
        &root,
        &broker,
        &["delete-user", "carol", "SCRAM-SHA-256"],
    );
    assert_eq!(out.trim(), "error RESOURCE_NOT_FOUND");
    broker.assert_running();
}

#[test]
fn acls_made_by_an_admin_client_are_klogs_and_only_an_admin_makes_them() {
    let Some((python, mut broker, root)) = setup() else {
        return;
    };
    let registry = broker.registry.clone().unwrap();
    klog_broker(&registry, &["user", "add", "dave"], "d-secret\n");
    let dave = login("SCRAM-SHA-512", "dave", "d-secret");
    klog_broker(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:dave",
            "--operation",
            "write",
            "--topic",
            "d",
        ],
        "",
    );
    let create = |who: &str, args: &[&str]| {
        let mut all = vec!["create-acl"];
        all.extend(args);
        admin(&python, who, &broker, &all)
    };
    // What kcat's users cannot name: a host, an operation klog does not check.
    let out = create(
        &root,
        &[
            "group",
            "dg",
            "literal",
            "User:dave",
            "read",
            "allow",
            "10.0.0.1",
        ],
    );
    assert_eq!(out.trim(), "error INVALID_REQUEST");
    let out = create(
        &root,
        &[
            "topic",
            "d",
            "literal",
            "User:dave",
            "alter_configs",
            "allow",
        ],
    );
    assert_eq!(out.trim(), "error INVALID_REQUEST");
    let out = create(
        &root,
        &[
            "cluster",
            "kafka-cluster",
            "literal",
            "User:dave",
            "alter",
            "allow",
        ],
    );
    assert_eq!(out.trim(), "ok");
    // The ACL made by `klog-broker acl add` is the client's to see.
    let out = admin(&python, &root, &broker, &["describe-acls"]);
    assert!(
        out.contains("topic d literal user:dave * write allow"),
        "{out}"
    );
    assert!(
        out.contains("cluster kafka-cluster literal user:dave * alter allow"),
        "{out}"
    );
    // Dave (alter on the cluster, but not describe... which alter implies)
    // may make ACLs now; he may not without alter.
    let out = create(
        &dave,
        &["topic", "e", "literal", "User:dave", "read", "allow"],
    );
    assert_eq!(out.trim(), "ok");
    let out = admin(
        &python,
        &root,
        &broker,
        &[
            "delete-acls",
            "cluster",
            "kafka-cluster",
            "any",
            "User:dave",
        ],
    );
    assert_eq!(
        out.trim(),
        "cluster kafka-cluster literal user:dave * alter allow"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let out = create(
        &dave,
        &["topic", "f", "literal", "User:dave", "read", "allow"],
    );
    assert_eq!(out.trim(), "error CLUSTER_AUTHORIZATION_FAILED");
    let out = admin(
        &python,
        &dave,
        &broker,
        &["upsert-user", "dave", "SCRAM-SHA-256", "4096", "more"],
    );
    assert_eq!(out.trim(), "error CLUSTER_AUTHORIZATION_FAILED");
    // A refused describe answers each user named with the refusal.
    let out = admin(&python, &dave, &broker, &["describe-users", "dave"]);
    assert_eq!(out.trim(), "error CLUSTER_AUTHORIZATION_FAILED");
    // A prefixed delete by match takes the topic ACLs whose patterns match.
    let out = admin(
        &python,
        &root,
        &broker,
        &["delete-acls", "topic", "d", "match", "User:dave"],
    );
    assert_eq!(out.trim(), "topic d literal user:dave * write allow");
    let listed = klog_broker(&registry, &["acl", "list"], "");
    assert!(!listed.contains("topic\td\t"), "{listed}");
    assert!(listed.contains("topic\te\t"), "{listed}");
    broker.assert_running();
}

/// Without `--authorize`, the ACL APIs answer SECURITY_DISABLED (Kafka's
/// answer with no authorizer): a broker that checks nothing cannot change
/// what the others check.
#[test]
fn without_an_authorizer_acls_cannot_be_changed_through_kafka() {
    let Some(python) = python() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&[]);
    let out = admin(
        &python,
        "{}",
        &broker,
        &[
            "create-acl",
            "topic",
            "t",
            "literal",
            "User:x",
            "read",
            "allow",
        ],
    );
    assert_eq!(out.trim(), "error SECURITY_DISABLED");
    let registry = broker.registry.clone().unwrap();
    let listed = klog_broker(&registry, &["acl", "list"], "");
    assert!(listed.trim().is_empty(), "{listed}");
    // Nor users: a broker that checks nothing must not reset the logins
    // the others check (this registry's admin), nor list them.
    klog_broker(&registry, &["user", "add", "admin"], "x-secret\n");
    let out = admin(
        &python,
        "{}",
        &broker,
        &["upsert-user", "admin", "SCRAM-SHA-512", "4096", "pwned"],
    );
    assert_eq!(out.trim(), "error SECURITY_DISABLED");
    let out = admin(&python, "{}", &broker, &["describe-users", "admin"]);
    assert_eq!(out.trim(), "error SECURITY_DISABLED");
    let listed = klog_broker(&registry, &["user", "list"], "");
    assert_eq!(listed, "admin\tSCRAM-SHA-256,SCRAM-SHA-512\n");
}

/// Metadata's authorized operations (v8+, asked by confluent-kafka's
/// `describe_topics(include_authorized_operations=True)`) are what the
/// ACLs let the client do to the topic: a super user everything a topic
/// takes, another user what it was allowed.
#[test]
fn a_topics_authorized_operations_are_what_the_acls_allow() {
    let Some((python, broker, root)) = setup() else {
        return;
    };
    let registry = broker.registry.clone().unwrap();
    klog_broker(&registry, &["user", "add", "erin"], "e-secret\n");
    let erin = login("SCRAM-SHA-512", "erin", "e-secret");
    for operation in ["describe", "read"] {
        let allow = ["acl", "add", "--allow", "User:erin", "--topic", "ops"];
        klog_broker(
            &registry,
            &[&allow[..], &["--operation", operation]].concat(),
            "",
        );
    }
    assert!(client(
        &python,
        &root,
        &broker,
        &["produce", "ops", "1", "1"]
    ));
    let ops = |who: &str| admin(&python, who, &broker, &["topic-operations", "ops"]);
    assert_eq!(ops(&root).trim(), "ALTER CREATE DELETE DESCRIBE READ WRITE");
    // The broker loads the new ACLs within a moment.
    common::eventually("erin's ACLs", Duration::from_secs(30), || {
        ops(&erin).trim() == "DESCRIBE READ"
    });
}
