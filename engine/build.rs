//! The arbiter's build hash (`XQ_ARBITER_SOURCE_HASH`), read by
//! `rules::verify::ARBITER_BUILD`: an FNV-1a hash of the library's sources (every `.rs`
//! file under `src/` but the binaries', by path and content) and of the features it is
//! built with (the mutants change rulings without changing a source file).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "bin") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// FNV-1a, 64 bits: no dependency, and stable across Rust releases (unlike `Hasher`).
fn fnv(hash: &mut u64, bytes: &[u8]) {
    for &byte in bytes {
        *hash ^= u64::from(byte);
        *hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for file in &files {
        let relative = file.strip_prefix(root).unwrap_or(file);
        fnv(&mut hash, relative.to_string_lossy().replace('\\', "/").as_bytes());
        fnv(&mut hash, &[0]);
        fnv(&mut hash, &std::fs::read(file).unwrap_or_default());
        fnv(&mut hash, &[0]);
    }
    let mut features: Vec<String> =
        std::env::vars().map(|(key, _)| key).filter(|key| key.starts_with("CARGO_FEATURE_")).collect();
    features.sort();
    for feature in &features {
        fnv(&mut hash, feature.as_bytes());
        fnv(&mut hash, &[0]);
    }
    println!("cargo:rustc-env=XQ_ARBITER_SOURCE_HASH={hash:016x}");
}
