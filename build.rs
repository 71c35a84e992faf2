//! Generates the CSI gRPC services from `proto/csi.proto` with a pure-Rust protobuf compiler
//! (protox), so no machine needs `protoc`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/csi.proto";
    println!("cargo:rerun-if-changed={proto}");
    let files = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        // The plugin serves; the tests' client is generated too, it costs nothing at run time.
        .build_server(true)
        .build_client(true)
        .compile_fds(files)?;
    Ok(())
}
