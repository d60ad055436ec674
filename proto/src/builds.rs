//! An engine's builds for processors with given flags (CPU variants, as engine authors
//! ship them: a bmi2 build, an avx2 build, a generic one): which one a processor runs.
//! The coordinator leases each worker the best build its flags run, and none of a test
//! whose engines it cannot run; `xq` benches the builds its own processor runs.

use std::collections::HashSet;

use crate::v1;

/// The CPU flags Linux lists for this machine's first processor (none elsewhere).
pub fn cpu_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.split(':').nth(1).unwrap_or("").split_whitespace().map(str::to_owned).collect())
        })
        .unwrap_or_default()
}

/// The build of `engine` a processor with `flags` runs: the first of its builds whose
/// flags it has all of, else the generic `binary`; `None` when it runs none.
pub fn best_build<'a>(engine: &'a v1::EngineSpec, flags: &HashSet<&str>) -> Option<&'a v1::ArtifactRef> {
    engine
        .builds
        .iter()
        .find(|build| build.cpu_flags.iter().all(|flag| flags.contains(flag.as_str())))
        .and_then(|build| build.binary.as_ref())
        .or(engine.binary.as_ref())
}

/// `engine` as a processor with `flags` is given it: its best build as its binary and
/// no other builds. `None` when it runs none.
pub fn for_processor(engine: &v1::EngineSpec, flags: &HashSet<&str>) -> Option<v1::EngineSpec> {
    let binary = best_build(engine, flags)?.clone();
    Some(v1::EngineSpec { binary: Some(binary), builds: Vec::new(), ..engine.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(name: &str) -> v1::ArtifactRef {
        v1::ArtifactRef { sha256: name.repeat(64)[..64].to_owned(), name: name.to_owned(), size: 1 }
    }

    fn build(flags: &[&str], name: &str) -> v1::EngineBuild {
        v1::EngineBuild { cpu_flags: flags.iter().map(|f| f.to_string()).collect(), binary: Some(artifact(name)) }
    }

    #[test]
    fn a_processor_runs_the_first_build_it_has_every_flag_of() {
        let engine = v1::EngineSpec {
            binary: Some(artifact("g")),
            builds: vec![build(&["avx512f", "bmi2"], "z"), build(&["avx2"], "a")],
            ..Default::default()
        };
        let run = |flags: &[&str]| best_build(&engine, &flags.iter().copied().collect()).map(|b| b.name.clone());
        assert_eq!(run(&["avx2", "avx512f", "bmi2"]), Some("z".to_owned()));
        assert_eq!(run(&["avx2", "avx512f"]), Some("a".to_owned()), "bmi2 missing: the next build");
        assert_eq!(run(&["sse4_1"]), Some("g".to_owned()), "the generic build");
        let no_generic = v1::EngineSpec { binary: None, ..engine.clone() };
        assert_eq!(best_build(&no_generic, &["sse4_1"].into_iter().collect()), None);
        let given = for_processor(&engine, &["avx2"].into_iter().collect()).unwrap();
        assert_eq!((given.binary.unwrap().name.as_str(), given.builds.len()), ("a", 0));
    }
}
