//! `xq-worker connect --config FILE`: the flags from a TOML file, the token among them
//! (kept out of the command line, which `ps` shows), beneath the command line and the
//! environment. A coordinator URL that is not one ends the worker at once with its
//! reason, which shows which URL it took.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A configuration file holding `text`, removed when dropped.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(label: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("xq-worker-config-{label}-{}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        ConfigFile(path)
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A worker's settings, its coordinator's URL malformed so that it stops at once, with
/// `changes` made: a key's new value, or a key added.
fn settings(label: &str, changes: &[(&str, &str)]) -> ConfigFile {
    let cache = std::env::temp_dir().join(format!("xq-worker-config-cache-{}", std::process::id()));
    let cache = format!("{cache:?}");
    let mut settings = vec![
        ("coordinator", "\"not a url\""),
        ("token", "\"-a-token-that-looks-like-a-flag\""),
        ("no-sandbox", "true"),
        ("concurrency", "1"),
        ("name", "\"from-the-file\""),
        ("cache", cache.as_str()),
    ];
    for &(key, value) in changes {
        match settings.iter_mut().find(|(known, _)| *known == key) {
            Some(setting) => setting.1 = value,
            None => settings.push((key, value)),
        }
    }
    let text: String = settings.iter().map(|(key, value)| format!("{key} = {value}\n")).collect();
    ConfigFile::new(label, &text)
}

fn connect(file: &Path, flags: &[&str], environment: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xq-worker"))
        .args(["connect", "--config"])
        .arg(file)
        .args(flags)
        .env_remove("XQ_COORDINATOR")
        .env_remove("XQ_WORKER_TOKEN")
        .envs(environment.iter().copied())
        .output()
        .unwrap()
}

fn said(output: &Output) -> String {
    assert!(!output.status.success(), "the worker was meant to stop at once");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn connect_takes_its_flags_and_its_token_from_the_file() {
    let file = settings("sets", &[]);
    let said = said(&connect(&file.0, &[], &[]));
    assert!(said.contains("engines run unconfined"), "no-sandbox = true: {said}");
    assert!(said.contains("not a url"), "the file's coordinator: {said}");
}

#[test]
fn the_command_line_then_the_environment_win_over_the_file() {
    let file = settings("wins", &[]);
    let said_with = |flags: &[&str], environment: &[(&str, &str)]| said(&connect(&file.0, flags, environment));
    let flag = said_with(&["--coordinator", "a flag's url"], &[("XQ_COORDINATOR", "an environment's url")]);
    assert!(flag.contains("a flag's url") && !flag.contains("not a url"), "{flag}");
    let environment = said_with(&[], &[("XQ_COORDINATOR", "an environment's url")]);
    assert!(environment.contains("an environment's url") && !environment.contains("not a url"), "{environment}");
}

#[test]
fn an_unknown_key_or_a_value_of_the_wrong_type_is_refused_by_name_and_file() {
    for (label, change, named) in [
        ("unknown", ("concurency", "2"), "concurency"),
        ("spelling", ("ca_cert", "\"/etc/ca.pem\""), "ca-cert"),
        ("number", ("concurrency", "\"two\""), "--concurrency"),
        ("switch", ("no-sandbox", "\"yes\""), "no-sandbox"),
    ] {
        let file = settings(label, &[change]);
        let said = said(&connect(&file.0, &[], &[]));
        assert!(said.contains(named) && said.contains(&*file.0.to_string_lossy()), "{label}: {said}");
        assert!(!said.contains("unconfined"), "{label}: refused before it started: {said}");
    }
}
