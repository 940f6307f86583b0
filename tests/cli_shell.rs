//! `skoop completions SHELL` and `skoop man`: each shell reads its script
//! without a syntax error and completes skoop's commands with it; groff
//! reads the manual pages without a warning. A shell that is not installed
//! is skipped, loudly, unless `SKOOP_REQUIRE_SHELLS` is set (as `.ci/run`
//! sets it, having installed zsh and fish).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Every command and subcommand a script or page must know.
const COMMANDS: &[&str] = &[
    "collect",
    "completions",
    "diagnose",
    "man",
    "netfilter",
    "packs",
    "route",
    "snapshot",
    "lookup",
    "trace",
    "check",
];

fn skoop(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .output()
        .expect("run skoop");
    assert_eq!(output.status.code(), Some(0), "skoop {args:?}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// What a program run by a test printed.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

/// `program args` with `input` on stdin, or `None` when the program is not
/// installed.
fn run_with_input(program: &str, args: &[&str], input: &str) -> Option<Ran> {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("SKOOP_REQUIRE_SHELLS").is_none(),
                "{program} is not installed, and SKOOP_REQUIRE_SHELLS is set"
            );
            eprintln!("SKIPPED: {program} is not installed");
            return None;
        }
        Err(e) => panic!("{program}: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    Some(Ran {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

#[test]
fn each_shell_reads_its_script_and_the_script_knows_every_command() {
    for (shell, check) in [
        ("bash", &["-n"][..]),
        ("zsh", &["-n"][..]),
        ("fish", &["--no-execute"][..]),
    ] {
        let script = skoop(&["completions", shell]);
        for command in COMMANDS {
            assert!(script.contains(command), "{shell}: no {command}");
        }
        if let Some(ran) = run_with_input(shell, check, &script) {
            assert!(ran.success, "{shell} rejects its script: {}", ran.stderr);
        }
    }
}

/// The bash script, sourced, completes what a user types.
#[test]
fn bash_completes_commands_and_flags() {
    let script = skoop(&["completions", "bash"]);
    for (words, expected) in [
        ("skoop ro", "route"),
        ("skoop route lookup --sn", "--snapshot"),
        ("skoop diagnose --fr", "--from"),
    ] {
        // The function bash calls: COMP_WORDS and COMP_CWORD as bash sets them.
        let ask = format!(
            "{script}\nCOMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
             _skoop skoop \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
        );
        let Some(ran) = run_with_input("bash", &[], &ask) else {
            return;
        };
        assert!(ran.success, "{words}: {}", ran.stderr);
        assert!(
            ran.stdout.lines().any(|line| line == expected),
            "{words}: {}",
            ran.stdout
        );
    }
}

#[test]
fn man_pages_are_roff_that_groff_reads_without_warnings() {
    let page = skoop(&["man"]);
    assert!(page.contains(".TH skoop 1"), "{page}");
    for command in &COMMANDS[..8] {
        assert!(page.contains(command), "skoop(1) lists {command}");
    }
    let lookup = skoop(&["man", "route", "lookup"]);
    assert!(lookup.contains(".TH skoop-route-lookup 1"), "{lookup}");
    assert!(lookup.contains("snapshot"), "{lookup}");
    for page in [page, lookup, skoop(&["man", "diagnose"])] {
        // -ww: every warning; -z: no output, only the warnings on stderr.
        let Some(ran) = run_with_input("groff", &["-man", "-Tutf8", "-ww", "-z"], &page) else {
            return;
        };
        assert!(ran.success);
        assert_eq!(ran.stderr, "", "groff warns");
    }
}

#[test]
fn man_of_an_unknown_command_names_the_known_ones() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["man", "route", "lookp"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: skoop route has no command \"lookp\"; it has: lookup\n"
    );
}
