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

/// Text for roff: backslashes and dashes escaped, no line starting with a
/// control character.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The man page of `cmd`: clap_mangen's sections, then EXAMPLES,
/// ENVIRONMENT and EXIT STATUS from `klog::cli::help`.
fn man_page(cmd: &clap::Command) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    man.render_synopsis_section(&mut out).unwrap();
    man.render_description_section(&mut out).unwrap();
    man.render_options_section(&mut out).unwrap();
    if cmd.get_subcommands().next().is_some() {
        man.render_subcommands_section(&mut out).unwrap();
    }
    let extras = klog::cli::help::extras(cmd.get_name()).expect("every binary has its extras");
    let mut roff = String::from(".SH EXAMPLES\n.nf\n");
    roff.push_str(&roff_text(extras.examples));
    roff.push_str("\n.fi\n");
    if !extras.environment.is_empty() {
        roff.push_str(".SH ENVIRONMENT\n");
        for (var, what) in extras.environment {
            roff.push_str(&format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                roff_text(var),
                roff_text(what)
            ));
        }
    }
    roff.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in extras.exit_status {
        roff.push_str(&format!(".TP\n{code}\n{}\n", roff_text(what)));
    }
    roff.push_str(".SH \"SEE ALSO\"\n");
    let others: Vec<String> = klog::cli::help::ALL
        .iter()
        .filter(|e| e.name != cmd.get_name())
        .map(|e| format!("\\fB{}\\fR(1)", roff_text(e.name)))
        .chain(["\\fBkcat\\fR(1), README.md".to_string()])
        .collect();
    roff.push_str(&others.join(", "));
    roff.push('\n');
    out.extend_from_slice(roff.as_bytes());
    man.render_version_section(&mut out).unwrap();
    out
}

/// The bash completion of `name`, with clap_complete's function names for
/// the subcommands of a hyphenated binary made to agree (it names them
/// `klog__subcmd__bench__subcmd__produce` in one place and
/// `klog__bench__subcmd__produce` in the other, so that nothing after a
/// subcommand completes).
fn bash_completion(cmd: &clap::Command, name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd.clone(), name, &mut out);
    let text = String::from_utf8(out).unwrap();
    let wrong = name.replace('-', "__subcmd__");
    let right = name.replace('-', "__");
    text.replace(&format!("{wrong}__"), &format!("{right}__"))
        .into_bytes()
}

#[test]
fn man_pages_and_completions_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for cmd in klog::cli::commands() {
        let name = cmd.get_name().to_string();
        ensure(
            &root.join("man").join(format!("{name}.1")),
            &man_page(&cmd),
            &mut stale,
        );
        // A page for each subcommand (klog-bench-produce(1)...), as the
        // subcommands section points to them.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let sub_name = format!("{name}-{}", sub.get_name());
            let leaked: &'static str = Box::leak(sub_name.clone().into_boxed_str());
            let bin_name = format!("{name} {}", sub.get_name());
            let sub = sub
                .clone()
                .name(leaked)
                .bin_name(bin_name)
                .version(env!("CARGO_PKG_VERSION"));
            let page = man_page(&sub);
            ensure(
                &root.join("man").join(format!("{sub_name}.1")),
                &page,
                &mut stale,
            );
        }
        ensure(
            &root.join("completions").join(format!("{name}.bash")),
            &bash_completion(&cmd, &name),
            &mut stale,
        );
        for (shell, ext) in [
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

/// The checked-in bash completion completes a subcommand's flags, as bash
/// itself runs it.
#[test]
fn bash_completes_klog_bench_subcommand_flags() {
    if std::process::Command::new("bash")
        .arg("-c")
        .arg("true")
        .status()
        .is_err()
    {
        println!("skipped: no bash");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("completions/klog-bench.bash");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}'; complete -p klog-bench; \
             COMP_WORDS=(klog-bench produce --ba); COMP_CWORD=2; \
             _klog__bench klog-bench --ba produce; echo \"[${{COMPREPLY[*]}}]\"",
            script.display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("-F _klog__bench klog-bench"), "{stdout}");
    assert!(
        stdout.contains("--batch"),
        "nothing completed after the subcommand: {stdout}"
    );
}
