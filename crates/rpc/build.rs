//! Compiles the `atmlab.v1` IDL with protox (pure Rust: no `protoc` on the machine) and
//! generates the prost messages and tonic stubs, plus the encoded `FileDescriptorSet` that
//! `atmlab_rpc::FILE_DESCRIPTOR_SET` exposes for gRPC reflection.
//!
//! It compiles etcd's v3 API the same way (the `.proto` files vendored in `proto/etcd/`,
//! see `proto/README.md`): client stubs only, and outside the reflection descriptor set,
//! since we only call etcd and never serve its API. The `etcd-client` crate would compile
//! the same files with `protoc`, which a bare machine does not have.

use std::path::PathBuf;

use protox::prost::Message as _;

const PROTOS: [&str; 4] = [
    "proto/atmlab/v1/cm.proto",
    "proto/atmlab/v1/tina.proto",
    "proto/atmlab/v1/switch.proto",
    "proto/atmlab/v1/names.proto",
];

/// etcd's v3 API: the KV, Lease and Watch services and the election service
/// (`v3electionpb`), with what they import.
const ETCD_PROTOS: [&str; 2] = [
    "proto/etcd/api/etcdserverpb/rpc.proto",
    "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
];

/// Imported by the etcd files only for their annotations (grpc-gateway's HTTP mapping,
/// OpenAPI options, etcd's version options): no message of the API uses them, so no code
/// is generated for them.
const ANNOTATION_PACKAGES: [&str; 4] = [
    "google.api",
    "google.protobuf",
    "grpc.gateway.protoc_gen_openapiv2.options",
    "versionpb",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    // A new .proto file in the directory must rebuild too (and be added to PROTOS).
    println!("cargo:rerun-if-changed=proto/atmlab/v1");
    println!("cargo:rerun-if-changed=proto/etcd");
    println!("cargo:rerun-if-changed=proto/google");
    println!("cargo:rerun-if-changed=proto/protoc-gen-openapiv2");

    let fds = protox::compile(PROTOS, ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("atmlab_v1_descriptor.bin"),
        fds.encode_to_vec(),
    )?;
    tonic_prost_build::configure().compile_fds(fds)?;

    let mut etcd = protox::compile(ETCD_PROTOS, ["proto"])?;
    etcd.file
        .retain(|file| !ANNOTATION_PACKAGES.contains(&file.package()));
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(etcd)?;
    Ok(())
}
