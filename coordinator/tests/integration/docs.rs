//! The docs' command lines: every line of a `sh` block in the README or `docs/` that runs
//! one of our binaries is given to that binary's own command-line parser, with `--help`
//! added at the end. clap reads the arguments in order and fails on an unknown
//! subcommand or flag met before `--help`, so a line the binary no longer accepts fails
//! here, while its values (`FILE`, `<T>`, `./engine`) are only values and need not exist.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::binary;

const BINARIES: [&str; 5] = ["xq", "xq-coordinator", "xq-worker", "xq-engine", "xq-trainer"];

/// Fewer checked commands than this means the extraction broke, not that the docs
/// shrank: they hold over ninety.
const AT_LEAST_CHECKED: usize = 80;

/// A `--help` answers at once; one that does not was taken for a value and ran the command.
const HELP_TIMEOUT: Duration = Duration::from_secs(30);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The README and every page under `docs/`.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// The lines of a page's ```sh blocks, backslash continuations joined, each with the
/// number of its first line.
fn sh_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            in_block = line.trim_end() == "```sh";
            continue;
        }
        if !in_block {
            continue;
        }
        let (number, mut text) = pending.take().unwrap_or((index + 1, String::new()));
        match line.trim_end().strip_suffix('\\') {
            Some(continued) => {
                text.push_str(continued);
                text.push(' ');
                pending = Some((number, text));
            }
            None => {
                text.push_str(line);
                lines.push((number, text));
            }
        }
    }
    lines
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// `;`, `&&`, `||`, `&`: the next command starts.
    Separator,
    /// `|`: the rest of the pipeline, which is not ours to check.
    Pipe,
    /// `>`, `>>`, `<`, `2>`: the next word is a file, not an argument.
    Redirect,
    /// `2>&1`: a redirection without a file word.
    Duplicate,
}

/// Splits a line as the shell does, as far as the docs need: quotes, backslashes,
/// `$(...)` kept whole, comments, separators, pipes and redirections. A word such as
/// `<dir>` or `<T>` is a placeholder, not a redirection.
fn tokens(line: &str) -> Vec<Token> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut i = 0;
    let end_word = |tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            ' ' | '\t' => end_word(&mut tokens, &mut word, &mut in_word),
            '#' if !in_word => break,
            '\'' => {
                in_word = true;
                let close = chars[i + 1..].iter().position(|&c| c == '\'').expect("an unclosed ' quote");
                word.extend(&chars[i + 1..i + 1 + close]);
                i += close + 1;
            }
            '"' => {
                in_word = true;
                i += 1;
                while chars[i] != '"' {
                    if chars[i] == '\\' && matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '\\' => {
                in_word = true;
                i += 1;
                word.extend(chars.get(i));
            }
            '$' if next == Some('(') => {
                in_word = true;
                let mut depth = 0;
                loop {
                    word.push(chars[i]);
                    depth += match chars[i] {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    if depth == 0 && chars[i] == ')' {
                        break;
                    }
                    i += 1;
                }
            }
            '<' if !in_word && placeholder_length(&chars[i..]).is_some() => {
                in_word = true;
                let length = placeholder_length(&chars[i..]).unwrap();
                word.extend(&chars[i..i + length]);
                i += length - 1;
            }
            ';' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                tokens.push(Token::Separator);
            }
            '&' | '|' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                if next == Some(c) {
                    i += 1;
                    tokens.push(Token::Separator);
                } else if c == '|' {
                    tokens.push(Token::Pipe);
                } else if next == Some('>') {
                    i += 1;
                    tokens.push(Token::Redirect);
                } else {
                    tokens.push(Token::Separator);
                }
            }
            '>' | '<' => {
                // A file descriptor written before it (`2>`) is part of the redirection.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut tokens, &mut word, &mut in_word);
                if next == Some('>') {
                    i += 1;
                }
                if chars.get(i + 1) == Some(&'&') {
                    i += 1;
                    while chars.get(i + 1).is_some_and(|c| c.is_ascii_digit() || *c == '-') {
                        i += 1;
                    }
                    tokens.push(Token::Duplicate);
                } else {
                    tokens.push(Token::Redirect);
                }
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    end_word(&mut tokens, &mut word, &mut in_word);
    tokens
}

/// `<name>` at the start of `chars`: its length, `>` included.
fn placeholder_length(chars: &[char]) -> Option<usize> {
    let close = chars.iter().position(|&c| c == '>')?;
    let inside = &chars[1..close];
    let named = !inside.is_empty() && inside.iter().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c));
    named.then_some(close + 1)
}

/// The simple commands of a line, each as its words: a pipeline gives its first command,
/// redirections and their files are left out.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut tokens = tokens(line).into_iter();
    let mut in_pipeline_tail = false;
    while let Some(token) = tokens.next() {
        match token {
            Token::Separator => {
                in_pipeline_tail = false;
                commands.push(Vec::new());
            }
            Token::Pipe => in_pipeline_tail = true,
            Token::Redirect => {
                tokens.next();
            }
            Token::Duplicate => {}
            Token::Word(word) if !in_pipeline_tail => commands.last_mut().unwrap().push(word),
            Token::Word(_) => {}
        }
    }
    commands.retain(|words| !words.is_empty());
    commands
}

/// What a command runs: a program and its arguments, past any leading environment
/// assignments and, for `cargo run ... -- ARGS`, the binary `--bin` (or `-p`) names.
fn program(words: &[String]) -> Option<(String, Vec<String>)> {
    let assignment = |word: &String| {
        word.split_once('=')
            .is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    };
    let words: Vec<&String> = words.iter().skip_while(|word| assignment(word)).collect();
    let (first, rest) = words.split_first()?;
    if first.as_str() == "cargo" && rest.first().is_some_and(|word| word.as_str() == "run") {
        let separator = rest.iter().position(|word| word.as_str() == "--").unwrap_or(rest.len());
        let options = &rest[..separator];
        let named = |flag: &str| options.iter().position(|word| word.as_str() == flag).and_then(|i| options.get(i + 1));
        let name = named("--bin").or_else(|| named("-p")).or_else(|| named("--package"))?;
        let arguments = rest.get(separator + 1..).unwrap_or_default();
        return Some((name.to_string(), arguments.iter().map(|word| word.to_string()).collect()));
    }
    let name = Path::new(first.as_str()).file_name()?.to_str()?.to_owned();
    Some((name, rest.iter().map(|word| word.to_string()).collect()))
}

/// Runs `name` with `arguments` and `--help`: `None` when it printed its help and
/// succeeded, else what it said.
fn refused(name: &str, arguments: &[String]) -> Option<String> {
    let mut child = Command::new(binary(name))
        .args(arguments)
        .arg("--help")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HELP_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            return Some(format!("still running after {HELP_TIMEOUT:?}: `--help` was taken as a value"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.contains("Usage:") {
        return None;
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr.lines().find(|line| !line.trim().is_empty()).unwrap_or("no help printed").to_owned();
    Some(format!("{}: {said}", output.status))
}

#[test]
fn every_command_line_in_the_docs_parses() {
    let root = repository();
    let mut checked = 0;
    let mut failures = Vec::new();
    for document in documents() {
        let name = document.strip_prefix(&root).unwrap().display().to_string();
        let markdown = std::fs::read_to_string(&document).unwrap();
        for (number, line) in sh_lines(&markdown) {
            for words in commands(&line) {
                let Some((program, arguments)) = program(&words) else { continue };
                if !BINARIES.contains(&program.as_str()) {
                    continue;
                }
                checked += 1;
                if let Some(why) = refused(&program, &arguments) {
                    failures.push(format!("{name}:{number}: `{}`: {why}", words.join(" ")));
                }
            }
        }
    }
    assert!(failures.is_empty(), "command lines our binaries refuse:\n{}", failures.join("\n"));
    assert!(checked >= AT_LEAST_CHECKED, "only {checked} command lines checked: is the extraction broken?");
}

/// The README's two set-up commands build and run everything for many minutes, too long
/// for a test (`scripts/test` is the test suite itself); they are checked as far as
/// they can be: they are there, and every script a `sh` block runs with `bash` exists
/// and is executable.
#[test]
fn the_set_up_commands_and_every_script_the_docs_run_exist() {
    use std::os::unix::fs::PermissionsExt;

    let root = repository();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let readme_lines: Vec<String> = sh_lines(&readme).into_iter().map(|(_, line)| line).collect();
    for set_up in ["bash scripts/run", "bash scripts/test"] {
        assert!(
            readme_lines.iter().any(|line| commands(line) == [set_up.split(' ').collect::<Vec<_>>()]),
            "the README's quick start lost `{set_up}`"
        );
    }
    let mut scripts = 0;
    for document in documents() {
        let name = document.strip_prefix(&root).unwrap().display().to_string();
        for (number, line) in sh_lines(&std::fs::read_to_string(&document).unwrap()) {
            for words in commands(&line) {
                let Some((program, arguments)) = program(&words) else { continue };
                let (Some(script), "bash") = (arguments.first(), program.as_str()) else { continue };
                let path = root.join(script);
                let mode = std::fs::metadata(&path).map(|metadata| metadata.permissions().mode());
                assert!(
                    mode.is_ok_and(|mode| mode & 0o111 != 0),
                    "{name}:{number}: {script} is not an executable script of the repository"
                );
                scripts += 1;
            }
        }
    }
    assert!(scripts >= 10, "only {scripts} scripts checked: is the extraction broken?");
}

#[test]
fn the_shell_splitter_reads_the_docs_shapes() {
    let split = |line: &str| commands(line);
    assert_eq!(
        split("xq list; xq show 3 && xq stop 3"),
        [vec!["xq", "list"], vec!["xq", "show", "3"], vec!["xq", "stop", "3"]]
    );
    assert_eq!(
        split(r#"xq-engine perft --fen "<FEN>" --depth 4  # a comment"#),
        [vec!["xq-engine", "perft", "--fen", "<FEN>", "--depth", "4"]]
    );
    assert_eq!(
        split("xq-worker connect --token <T> --cache ~/.xq"),
        [vec!["xq-worker", "connect", "--token", "<T>", "--cache", "~/.xq"]]
    );
    assert_eq!(split("xq pgn 3 2>/dev/null | head > out.txt"), [vec!["xq", "pgn", "3"]]);
    assert_eq!(split("xq-engine judge --batch < games.jsonl 2>&1"), [vec!["xq-engine", "judge", "--batch"]]);
    assert_eq!(split("export A=$(cat /a/b) B='x y'"), [vec!["export", "A=$(cat /a/b)", "B=x y"]]);
    assert_eq!(
        program(&split(r#"RUSTFLAGS="-C x" cargo run -q --bin xq -- sprt --new ./a"#)[0]),
        Some(("xq".to_owned(), vec!["sprt".to_owned(), "--new".to_owned(), "./a".to_owned()]))
    );
    assert_eq!(
        program(&split("~/.cache/xq-cluster/target/release/xq local")[0]),
        Some(("xq".to_owned(), vec!["local".to_owned()]))
    );
    let joined = sh_lines("text\n```sh\nxq sprt --new ./a \\\n    --base ./b\n```\n```\nxq nothing\n```\n");
    assert_eq!(joined, [(3, "xq sprt --new ./a      --base ./b".to_owned())]);
}
