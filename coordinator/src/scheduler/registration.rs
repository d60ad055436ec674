//! What a worker may say of itself when it registers. A worker token may be a
//! volunteer's, and its capabilities are kept with the worker's row, listed to every
//! client, shown on the dashboard and looked through at each of its leases: every field
//! is bounded before anything of them is kept, and a refusal names the field and its
//! bound.

use xq_proto::v1;

use crate::jobs::checks::{MAX_CPU_FLAG_CHARS, SpecError, bad, check_name};

/// The longest name a worker goes by: a host name (at most 64 bytes on Linux) or an
/// operator's label.
pub const MAX_NAME_CHARS: usize = 128;

/// The most cores a worker may declare. Its cores are only its word (its pace bounds
/// the work it holds), so this is a sanity bound, above today's largest machines.
pub const MAX_CORES: u32 = 4096;

/// The most CPU flags a worker may list: Linux lists 100 to 250 on today's x86 cores.
pub const MAX_CPU_FLAGS: usize = 512;

/// The longest version a worker may send (its crate version).
pub const MAX_VERSION_CHARS: usize = 64;

/// The highest bench speed a worker may declare, nodes a second on one core: a thousand
/// times our engine's on today's fastest cores, so that a larger figure is a fault or a
/// lie. The scheduler's slowness is clamped and the pace bounds what a worker holds
/// whatever it declares; the bound keeps absurd figures out of the listings. 0 says the
/// bench was not measured.
pub const MAX_BENCH_NPS: u64 = 1_000_000_000;

/// The most verification references a worker may offer: there is one today (pyffish).
pub const MAX_REFERENCES: usize = 16;

/// The longest reference name, room for a program's name and its version.
pub const MAX_REFERENCE_CHARS: usize = 64;

/// The longest arbiter build: the engine's version, `+` and a 16-digit hash today.
pub const MAX_ARBITER_BUILD_CHARS: usize = 64;

/// The capabilities of `request`, each field within its bound.
pub fn check_registration(request: v1::RegisterRequest) -> Result<v1::Capabilities, SpecError> {
    let capabilities = request.capabilities.ok_or_else(|| bad("capabilities", "missing"))?;
    // Taken apart field by field so that a field added to the message does not compile
    // until it is bounded here too.
    let v1::Capabilities { name, cores, cpu_flags, version, bench_nps, references, arbiter_build } = &capabilities;
    check_name("capabilities.name", name, MAX_NAME_CHARS)?;
    if !(1..=MAX_CORES).contains(cores) {
        return Err(bad("capabilities.cores", format!("{cores}: between 1 and {MAX_CORES}")));
    }
    if cpu_flags.len() > MAX_CPU_FLAGS {
        return Err(bad("capabilities.cpu_flags", format!("{} flags: at most {MAX_CPU_FLAGS}", cpu_flags.len())));
    }
    for flag in cpu_flags {
        check_name("capabilities.cpu_flags", flag, MAX_CPU_FLAG_CHARS)?;
    }
    check_name("capabilities.version", version, MAX_VERSION_CHARS)?;
    if *bench_nps > MAX_BENCH_NPS {
        return Err(bad("capabilities.bench_nps", format!("{bench_nps}: at most {MAX_BENCH_NPS} (0: not measured)")));
    }
    if references.len() > MAX_REFERENCES {
        return Err(bad(
            "capabilities.references",
            format!("{} references: at most {MAX_REFERENCES}", references.len()),
        ));
    }
    for reference in references {
        check_name("capabilities.references", reference, MAX_REFERENCE_CHARS)?;
    }
    check_name("capabilities.arbiter_build", arbiter_build, MAX_ARBITER_BUILD_CHARS)?;
    Ok(capabilities)
}
