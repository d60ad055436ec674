//! Compiles the contract with protox (pure Rust), so that no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "xq/v1/cluster.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
