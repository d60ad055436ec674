//! The services' systemd units (`packaging/systemd/`), checked by `systemd-analyze
//! verify` in a scratch root laid out as the packages install them: the units, the
//! binaries they start (built here) and the system's own targets they order against.
//! A misspelt setting, a section out of place or a command that is not there fails.

use std::path::Path;
use std::process::Command;

use crate::common::{TempDir, binary};

const UNITS: [(&str, &str); 2] = [("xq-coordinator.service", "xq-coordinator"), ("xq-worker.service", "xq-worker")];

/// Where the system's units are, on Debian.
const SYSTEM_UNITS: &str = "/usr/lib/systemd/system";

#[test]
fn the_units_pass_systemd_analyze_verify() {
    if !Command::new("systemd-analyze").arg("--version").output().is_ok_and(|output| output.status.success()) {
        eprintln!("systemd-analyze is not installed: the units are not verified (apt-get install systemd)");
        return;
    }
    let root = TempDir::new("units");
    let units = root.0.join(SYSTEM_UNITS.trim_start_matches('/'));
    std::fs::create_dir_all(&units).unwrap();
    std::fs::create_dir_all(root.0.join("usr/bin")).unwrap();
    // The targets and slices a service is ordered against (symbolic links are aliases
    // whose targets are copied under their own names).
    for entry in std::fs::read_dir(SYSTEM_UNITS).unwrap() {
        let path = entry.unwrap().path();
        let kind = path.extension().and_then(|extension| extension.to_str());
        if matches!(kind, Some("target" | "slice")) && !path.is_symlink() {
            std::fs::copy(&path, units.join(path.file_name().unwrap())).unwrap();
        }
    }
    let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/systemd");
    for (unit, program) in UNITS {
        std::fs::copy(packaging.join(unit), units.join(unit)).unwrap();
        std::fs::copy(binary(program), root.0.join("usr/bin").join(program)).unwrap();
    }
    for (unit, _) in UNITS {
        // The man pages the units name are the packages' (checked by `manuals`).
        let verified = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(format!("--root={}", root.0.display()))
            .arg(format!("{SYSTEM_UNITS}/{unit}"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&verified.stderr);
        assert!(verified.status.success() && said.trim().is_empty(), "{unit}: {said}");
    }
}
