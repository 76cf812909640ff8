//! The README's runnable sessions that no other test runs: the paper's
//! deployment (`examples/deployment.sh`), on the debug build and fewer
//! records. It exits non-zero when a window does not reconcile.

use std::process::Command;

#[test]
fn the_papers_deployment_reconciles_after_a_mirror_is_killed() {
    let bin = assert_cmd::cargo::cargo_bin("klog-produce");
    let dir = bin.parent().unwrap();
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/deployment.sh"
        ))
        .env("KLOG_BIN", dir)
        .env("N", "20000")
        .output()
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("none lost"), "{said}");
    assert!(!said.contains("\"status\":\"lost\""), "{said}");
}
