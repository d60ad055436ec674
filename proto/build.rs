//! Compiles the contract with protox (pure Rust), so that no system protoc is needed,
//! and lists its gRPC methods.

use std::fmt::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "xq/v1/cluster.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    // The paths gRPC calls the methods by, read from the contract itself: the
    // coordinator names only these in its metrics, whatever path a request asks for.
    let mut methods = String::from("&[\n");
    for file in &descriptors.file {
        for service in &file.service {
            for method in &service.method {
                writeln!(methods, "    \"/{}.{}/{}\",", file.package(), service.name(), method.name())?;
            }
        }
    }
    methods.push(']');
    std::fs::write(std::path::Path::new(&std::env::var("OUT_DIR")?).join("grpc_methods.rs"), methods)?;
    // Every message serialises with serde: the coordinator's JSON API serves the same
    // messages as its gRPC API, so both give one view of a job.
    tonic_prost_build::configure().type_attribute(".", "#[derive(serde::Serialize)]").compile_fds(descriptors)?;
    Ok(())
}
