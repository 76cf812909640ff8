//! man/ and completions/ are generated from the clap definitions and
//! checked in; this test fails when they are stale. `KLOG_BLESS=1 cargo
//! test --test generated_docs` rewrites them.

use std::path::Path;

fn ensure(path: &Path, content: &[u8], stale: &mut Vec<String>) {
    if std::fs::read(path).ok().as_deref() == Some(content) {
        return;
    }
    if std::env::var_os("KLOG_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    } else {
        stale.push(path.display().to_string());
    }
}

#[test]
fn man_pages_and_completions_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for cmd in klog::cli::commands() {
        let name = cmd.get_name().to_string();
        let mut man = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut man).unwrap();
        ensure(
            &root.join("man").join(format!("{name}.1")),
            &man,
            &mut stale,
        );
        for (shell, ext) in [
            (clap_complete::Shell::Bash, "bash"),
            (clap_complete::Shell::Zsh, "zsh"),
            (clap_complete::Shell::Fish, "fish"),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), name.clone(), &mut out);
            ensure(
                &root.join("completions").join(format!("{name}.{ext}")),
                &out,
                &mut stale,
            );
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files (run KLOG_BLESS=1 cargo test --test generated_docs): {stale:?}"
    );
}
