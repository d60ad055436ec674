//! Links the binaries with an rpath to libtorch's directory (given by torch-sys), so
//! that `xq-trainer` and the tests run without LD_LIBRARY_PATH; and records the code's
//! commit for the nets it trains (`XQ_TRAINER_COMMIT`: the commit, with `-dirty` when
//! the tree had changes, or `unknown` outside a git checkout).

use std::process::Command;

fn main() {
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match (git(&["rev-parse", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
        (Some(commit), Some(changes)) if !changes.is_empty() => format!("{commit}-dirty"),
        (Some(commit), _) => commit,
        _ => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=XQ_TRAINER_COMMIT={commit}");
    // A new commit or a changed tree gives the nets another commit.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
}
