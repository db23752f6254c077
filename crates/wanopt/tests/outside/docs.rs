//! `wanopt completions SHELL` and `wanopt man`: what the package installs
//! is generated from the command line, and bad input is one line, exit 2.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wanopt");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(code: i32, stdout: &str, stderr: &str, needle: &str) {
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("wanopt: "), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
}

#[test]
fn completions_cover_the_subcommands_and_their_flags() {
    let (code, bash, err) = run(&["completions", "bash"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(bash.contains("complete -F _wanopt"), "{bash:.200}");
    for word in ["edge", "core", "--peer-key", "--cache-dir", "completions"] {
        assert!(bash.contains(word), "{word} not completed");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let (code, script, _) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(script.contains("peer-key"), "{shell}");
    }
}

#[test]
fn an_unknown_shell_is_one_line_and_exit_code_2() {
    let (code, out, err) = run(&["completions", "tcsh"]);
    assert_one_line_error(code, &out, &err, "'tcsh'");
    assert!(err.contains("bash"), "the valid shells are named: {err}");
    let (code, out, err) = run(&["completions"]);
    assert_one_line_error(code, &out, &err, "<SHELL>");
}

#[test]
fn man_prints_the_main_page_and_writes_every_page_to_a_directory() {
    let (code, page, err) = run(&["man"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(page.contains(".TH wanopt 1"), "{page:.200}");
    assert!(page.contains("wanopt\\-edge(1)"), "subcommands are listed");

    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    let edge = std::fs::read_to_string(dir.path().join("wanopt-edge.1")).unwrap();
    assert!(edge.contains(".TH wanopt-edge 1"));
    assert!(edge.contains("peer\\-key"), "the edge page has its flags");
    assert!(dir.path().join("wanopt.1").is_file());
    assert!(dir.path().join("wanopt-lab-run.1").is_file());

    let missing = dir.path().join("missing");
    let (code, out, err) = run(&["man", "--dir", missing.to_str().unwrap()]);
    assert_one_line_error(code, &out, &err, "not a directory");
}
