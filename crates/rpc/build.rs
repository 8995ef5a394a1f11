//! Compiles the `atmlab.v1` IDL with protox (pure Rust: no `protoc` on the machine) and
//! generates the prost messages and tonic stubs, plus the encoded `FileDescriptorSet` that
//! `atmlab_rpc::FILE_DESCRIPTOR_SET` exposes for gRPC reflection.

use std::path::PathBuf;

use protox::prost::Message as _;

const PROTOS: [&str; 4] = [
    "proto/atmlab/v1/cm.proto",
    "proto/atmlab/v1/tina.proto",
    "proto/atmlab/v1/switch.proto",
    "proto/atmlab/v1/names.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    // A new .proto file in the directory must rebuild too (and be added to PROTOS).
    println!("cargo:rerun-if-changed=proto/atmlab/v1");

    let fds = protox::compile(PROTOS, ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("atmlab_v1_descriptor.bin"),
        fds.encode_to_vec(),
    )?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
