//! The command examples of the README and of every page of `docs/` against
//! the binary, so that they cannot drift from it: every `wanopt ...` line
//! of their shell blocks must parse
//! (each is run with `--help` after its arguments, which clap reaches
//! only when every argument before it is known and valid), and those
//! that need no node, lab or root (`keygen`, `pubkey`, `window`,
//! `host-check`, `completions`, `man`) are run as written, with `sh`, in
//! a scratch folder.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wanopt");
/// The pages whose examples are checked: the README and `docs/`.
const PAGES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../../README.md")),
    (
        "docs/install.md",
        include_str!("../../../../docs/install.md"),
    ),
    ("docs/deploy.md", include_str!("../../../../docs/deploy.md")),
    ("docs/sites.md", include_str!("../../../../docs/sites.md")),
    (
        "docs/cluster.md",
        include_str!("../../../../docs/cluster.md"),
    ),
    ("docs/reach.md", include_str!("../../../../docs/reach.md")),
    (
        "docs/interception.md",
        include_str!("../../../../docs/interception.md"),
    ),
    (
        "docs/reduction.md",
        include_str!("../../../../docs/reduction.md"),
    ),
    (
        "docs/path-tools.md",
        include_str!("../../../../docs/path-tools.md"),
    ),
    (
        "docs/configuration.md",
        include_str!("../../../../docs/configuration.md"),
    ),
    ("docs/lab.md", include_str!("../../../../docs/lab.md")),
    (
        "docs/results.md",
        include_str!("../../../../docs/results.md"),
    ),
    (
        "docs/development.md",
        include_str!("../../../../docs/development.md"),
    ),
];

/// A command of a page: the line as written (continuations joined), its
/// words up to a comment or a shell operator, and the page.
struct Example {
    line: String,
    words: Vec<String>,
    page: &'static str,
}

/// Every command line of the pages' shell blocks that starts with
/// `wanopt`, or runs it in a lab node (`... -- wanopt ...`).
fn examples() -> Vec<Example> {
    PAGES
        .iter()
        .flat_map(|(page, text)| examples_of(page, text))
        .collect()
}

fn examples_of(page: &'static str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_shell = false;
    let mut pending = String::new();
    for line in text.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            in_shell = !in_shell && matches!(lang.trim(), "sh" | "bash" | "console" | "shell");
            pending.clear();
            continue;
        }
        if !in_shell {
            continue;
        }
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let full = std::mem::take(&mut pending);
        let command = cut(&full);
        let Some(words) = shlex::split(command) else {
            panic!("{page}: line does not split as a shell line: {full}");
        };
        // `wanopt ...`, or `... -- wanopt ...` (a lab node runs it).
        let at =
            (0..words.len()).find(|&i| words[i] == "wanopt" && (i == 0 || words[i - 1] == "--"));
        if let Some(at) = at {
            out.push(Example {
                line: full.trim().to_owned(),
                words: words[at..].to_vec(),
                page,
            });
        }
    }
    out
}

/// `line` up to its comment (` #`) or a shell operator (`>`, `|`, `&`,
/// `;`) outside quotes.
fn cut(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if prev == ' ' => return &line[..i],
            (None, '>' | '|' | '&' | ';') => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

#[test]
fn every_documented_wanopt_command_parses() {
    let examples = examples();
    assert!(
        examples.len() >= 30,
        "only {} wanopt commands found in the pages' shell blocks",
        examples.len()
    );
    let mut failures = Vec::new();
    for example in &examples {
        // `...` stands for the options shown elsewhere.
        let mut args: Vec<&str> = example.words[1..]
            .iter()
            .map(String::as_str)
            .filter(|w| *w != "...")
            .collect();
        // Before a `--` (what `lab exec` runs), not after it.
        let at = args.iter().position(|w| *w == "--").unwrap_or(args.len());
        args.insert(at, "--help");
        let out = Command::new(BIN).args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !stdout.contains("Usage:") {
            failures.push(format!(
                "{}: {}\n  -> {}",
                example.page,
                example.line,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "documented commands the binary does not take:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_documented_commands_that_need_no_node_run_as_written() {
    // One scratch folder per page: each page is read on its own, and two
    // pages may both write `edge.key`.
    let mut dirs: std::collections::HashMap<String, tempfile::TempDir> = Default::default();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = Vec::new();
    for example in examples() {
        let sub = example.words.get(1).map(String::as_str);
        let runnable = matches!(
            sub,
            Some("keygen" | "pubkey" | "window" | "host-check" | "completions" | "man")
        );
        // Not what writes outside the scratch folder or reads a file
        // another example made in the lab.
        if !runnable
            || example.words[0] != "wanopt"
            || example.line.contains("/etc/")
            || example.line.contains("--probe")
        {
            continue;
        }
        let dir = dirs
            .entry(example.page.to_string())
            .or_insert_with(|| tempfile::tempdir().unwrap());
        let out = Command::new("sh")
            .args(["-c", &example.line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        let code = out.status.code();
        // host-check exits 3 when this host's settings fall short.
        let ok = code == Some(0) || (sub == Some("host-check") && code == Some(3));
        assert!(
            ok,
            "{} command failed ({code:?}): {}\n{}",
            example.page,
            example.line,
            String::from_utf8_lossy(&out.stderr)
        );
        ran.push(example.line);
    }
    for needed in ["keygen", "pubkey", "window", "host-check"] {
        assert!(
            ran.iter().any(|l| l.contains(needed)),
            "no documented `wanopt {needed}` example ran: {ran:?}"
        );
    }
}
