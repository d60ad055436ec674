//! `xq-coordinator serve --config FILE`: the flags from a TOML file, beneath the command
//! line. An address other machines reach without TLS or --allow-plaintext is refused at
//! start, which shows which address and switch the coordinator took.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{TempDir, binary};

/// Runs `xq-coordinator serve ARGS`: the URL it listened on (then it is stopped), or
/// what it said when it refused to start.
fn serve(args: &[&str]) -> Result<String, String> {
    let mut child = Command::new(binary("xq-coordinator"))
        .arg("serve")
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // It serves until stopped; one that refused has exited already.
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    match line.strip_prefix("listening on ") {
        Some(url) => Ok(url.trim().to_owned()),
        None => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
    }
}

/// A configuration file in `dir` with a data directory there and `settings`.
fn config(dir: &TempDir, settings: &str) -> String {
    let path = dir.0.join("coordinator.toml");
    std::fs::write(&path, format!("data = {:?}\n{settings}\n", dir.0.join("data"))).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn serve_takes_its_flags_from_the_file() {
    let dir = TempDir::new("config-sets");
    let refused = serve(&["--config", &config(&dir, "listen = \"0.0.0.0:0\"")]).unwrap_err();
    assert!(refused.contains("0.0.0.0:0") && refused.contains("--allow-plaintext"), "{refused}");
    let file = config(&dir, "listen = \"0.0.0.0:0\"\nallow-plaintext = true\nmax-connections = 50\nwork-seconds = 60");
    let url = serve(&["--config", &file]).unwrap();
    assert!(url.starts_with("http://0.0.0.0:"), "{url}");
}

#[test]
fn a_flag_wins_over_the_file() {
    let dir = TempDir::new("config-wins");
    let file = config(&dir, "listen = \"0.0.0.0:0\"");
    let url = serve(&["--config", &file, "--listen", "127.0.0.1:0"]).unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
}

#[test]
fn an_unknown_key_or_a_value_of_the_wrong_type_is_refused_by_name_and_file() {
    let dir = TempDir::new("config-refused");
    for (settings, named) in [
        ("lisen = \"127.0.0.1:0\"", "lisen"),
        ("max_connections = 10", "max-connections"),
        ("max-connections = \"many\"", "--max-connections"),
        ("listen = 7420", "--listen"),
        ("require-approval = 1", "require-approval"),
        ("private-dashboard = true\npublic-dashboard = true", "--public-dashboard"),
    ] {
        let file = config(&dir, settings);
        let refused = serve(&["--config", &file]).unwrap_err();
        assert!(refused.contains(named) && refused.contains(&file), "{settings}: {refused}");
    }
}
