//! Compiles the API's proto into the server's code, and a client without a
//! transport of its own (the tests bring one).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_transport(false)
        // Small buffers per stream (see src/codec.rs).
        .codec_path("crate::codec::LeanCodec")
        .compile_protos(
            &[
                "proto/lockward/v1/lockward.proto",
                "proto/dapr/proto/runtime/v1/lock.proto",
            ],
            &["proto"],
        )?;
    Ok(())
}
