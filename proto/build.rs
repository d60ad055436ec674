//! Compiles the contract with protox (pure Rust), so that no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "xq/v1/cluster.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    // Every message serialises with serde: the coordinator's JSON API serves the same
    // messages as its gRPC API, so both give one view of a job.
    tonic_prost_build::configure().type_attribute(".", "#[derive(serde::Serialize)]").compile_fds(descriptors)?;
    Ok(())
}
