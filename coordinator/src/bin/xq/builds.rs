//! `--new` and `--base` as an engine's builds: `FILE` (the generic build) and
//! `FLAGS=FILE` (a build for processors with all of FLAGS, comma-separated Linux flag
//! names, best first), uploaded as the engine's binary and builds; the bench signature
//! is taken of every build this machine runs, and they must agree.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use xq_engine::bench::Reading;
use xq_proto::v1;

use xq_proto::client::{self, Client};

/// An engine's files as the command line names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineFiles {
    /// The build that needs no flags.
    pub generic: Option<PathBuf>,
    /// Builds for processors with given flags, best first.
    pub builds: Vec<(Vec<String>, PathBuf)>,
}

impl EngineFiles {
    /// Reads `--{side}` given as `words`.
    pub fn parse(side: &str, words: &[String]) -> anyhow::Result<EngineFiles> {
        let mut files = EngineFiles { generic: None, builds: Vec::new() };
        for word in words {
            match flags_and_file(word) {
                Some((flags, file)) => files.builds.push((flags, file)),
                None if files.generic.is_some() => {
                    bail!("--{side} names two files without CPU flags; a build for some flags is FLAGS=FILE")
                }
                None => files.generic = Some(PathBuf::from(word)),
            }
        }
        if files.generic.is_none() && files.builds.is_empty() {
            bail!("--{side} names no file");
        }
        Ok(files)
    }

    /// How a test's description names it: its generic file, or else its first build.
    pub fn label(&self) -> String {
        match (&self.generic, self.builds.first()) {
            (Some(path), _) => path.display().to_string(),
            (None, Some((_, path))) => path.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// Every file a processor with `flags` runs, each with how the command line named it.
    pub fn runnable(&self, flags: &HashSet<&str>) -> Vec<(String, &Path)> {
        let builds = self
            .builds
            .iter()
            .filter(|(needs, _)| needs.iter().all(|f| flags.contains(f.as_str())))
            .map(|(needs, path)| (format!("{}={}", needs.join(","), path.display()), path.as_path()));
        let generic = self.generic.iter().map(|path| (path.display().to_string(), path.as_path()));
        builds.chain(generic).collect()
    }

    /// Uploads every file into `spec`: the generic one as its binary, the others as
    /// its builds.
    pub async fn upload(&self, client: &mut Client, spec: &mut v1::EngineSpec) -> anyhow::Result<()> {
        if let Some(path) = &self.generic {
            spec.binary = Some(client::upload_file(client, path, "engine").await?);
        }
        for (flags, path) in &self.builds {
            let binary = Some(client::upload_file(client, path, "engine").await?);
            spec.builds.push(v1::EngineBuild { cpu_flags: flags.clone(), binary });
        }
        Ok(())
    }

    /// The bench of every build this machine runs, whose signatures must agree (workers
    /// check theirs against it); an error when they differ or none runs here. The
    /// reading is the best build's (the one this machine would be leased).
    pub fn bench(&self, side: &str, bench_of: impl Fn(&Path) -> anyhow::Result<Reading>) -> anyhow::Result<Reading> {
        let flags = xq_proto::builds::cpu_flags();
        let flags: HashSet<&str> = flags.iter().map(String::as_str).collect();
        let runnable = self.runnable(&flags);
        if runnable.is_empty() {
            bail!(
                "no build of the {side} engine runs on this machine, so its bench signature cannot be taken: use --no-bench"
            );
        }
        let mut readings = Vec::with_capacity(runnable.len());
        for (named, path) in &runnable {
            readings.push((named, bench_of(path).with_context(|| format!("the {side} engine's build {named}"))?));
        }
        let (first_named, first) = readings[0];
        if let Some((named, other)) = readings.iter().find(|(_, r)| r.signature != first.signature) {
            bail!(
                "the {side} engine's builds differ in bench: {first_named} prints {}, {named} prints {}",
                first.signature,
                other.signature
            );
        }
        Ok(first)
    }
}

/// `FLAGS=FILE` split, when `word` is one: flags are lowercase Linux names (letters,
/// digits, `_`), comma-separated; a word naming an existing file is that file.
fn flags_and_file(word: &str) -> Option<(Vec<String>, PathBuf)> {
    let (flags, file) = word.split_once('=')?;
    let is_flag =
        |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if file.is_empty() || !flags.split(',').all(is_flag) || Path::new(word).exists() {
        return None;
    }
    Some((flags.split(',').map(str::to_owned).collect(), PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn builds_are_read_best_first_beside_one_generic_file() {
        let files = EngineFiles::parse("new", &words(&["avx2,bmi2=./sf-bmi2", "avx2=./sf-avx2", "./sf"])).unwrap();
        assert_eq!(files.generic, Some(PathBuf::from("./sf")));
        assert_eq!(files.builds[0], (words(&["avx2", "bmi2"]), PathBuf::from("./sf-bmi2")));
        assert_eq!(files.builds[1].1, PathBuf::from("./sf-avx2"));
        let avx2_only: HashSet<&str> = ["avx2", "sse4_1"].into_iter().collect();
        let runnable: Vec<String> = files.runnable(&avx2_only).into_iter().map(|(named, _)| named).collect();
        assert_eq!(runnable, ["avx2=./sf-avx2", "./sf"]);
        let error = EngineFiles::parse("base", &words(&["./a", "./b"])).unwrap_err().to_string();
        assert!(error.contains("--base names two files without CPU flags"), "{error}");
        // Not flags: a path with an equals sign, upper case, an empty file.
        for word in ["./dir=x/engine", "AVX2=./e", "avx2="] {
            assert_eq!(EngineFiles::parse("new", &words(&[word])).unwrap().generic, Some(PathBuf::from(word)));
        }
    }

    #[test]
    fn builds_must_agree_in_bench_and_one_must_run_here() {
        let files = EngineFiles::parse("new", &words(&["./fast", "sse2=./slow"])).unwrap();
        // Every x86-64 processor has sse2; elsewhere only the generic build runs here.
        let here = xq_proto::builds::cpu_flags();
        let reading = |signature| Ok(Reading { signature, nodes_per_second: Some(1000) });
        let agree = files.bench("new", |_| reading(7)).unwrap();
        assert_eq!(agree.signature, 7);
        if here.iter().any(|f| f == "sse2") {
            let error =
                files.bench("new", |path| reading(if path.ends_with("slow") { 8 } else { 7 })).unwrap_err().to_string();
            assert!(error.contains("sse2=./slow prints 8, ./fast prints 7"), "{error}");
        }
        let unrunnable = EngineFiles::parse("new", &words(&["no_such_flag=./e"])).unwrap();
        let error = unrunnable.bench("new", |_| reading(1)).unwrap_err().to_string();
        assert!(error.contains("no build of the new engine runs on this machine"), "{error}");
    }
}
