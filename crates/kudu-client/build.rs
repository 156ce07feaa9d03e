//! Compiles the crate's own `.proto` files (in `proto/`) with prost.
//!
//! `protox` parses the files in pure Rust, so no `protoc` is needed on the
//! build machine. A small service generator adds one marker type per RPC
//! method that ties the method's name to its request and response types
//! (see `pb::RpcMethod`), so callers cannot pair a method with the wrong
//! message type.

use std::fmt::Write as _;
use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "security.proto",
    "rpc_header.proto",
    "common.proto",
    "consensus.proto",
    "server.proto",
    "master.proto",
    "tserver.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    println!("cargo:rerun-if-changed={}", dir.display());
    for p in PROTOS {
        println!("cargo:rerun-if-changed={}", dir.join(p).display());
    }

    let fds = protox::compile(PROTOS, [&dir])?;
    prost_build::Config::new()
        .service_generator(Box::new(MethodMarkers))
        .compile_fds(fds)?;
    Ok(())
}

/// Emits, for `service S { rpc M(Req) returns (Resp); }` in package `p`:
/// a module `s` holding a unit struct `M` that implements
/// `crate::pb::RpcMethod` with service name `p.S` and method name `M`.
struct MethodMarkers;

impl prost_build::ServiceGenerator for MethodMarkers {
    fn generate(&mut self, service: prost_build::Service, buf: &mut String) {
        let full_service = format!("{}.{}", service.package, service.proto_name);
        let module = snake_case(&service.proto_name);
        let _ = writeln!(buf, "/// Method markers of `{full_service}`.");
        let _ = writeln!(buf, "pub mod {module} {{");
        let _ = writeln!(buf, "    /// Wire name of this service.");
        let _ = writeln!(
            buf,
            "    pub const SERVICE_NAME: &str = \"{full_service}\";"
        );
        for m in &service.methods {
            let _ = writeln!(buf, "    /// `{full_service}.{}`.", m.proto_name);
            let _ = writeln!(buf, "    #[derive(Debug, Clone, Copy, Default)]");
            let _ = writeln!(buf, "    pub struct {};", m.proto_name);
            let _ = writeln!(buf, "    impl crate::pb::RpcMethod for {} {{", m.proto_name);
            let _ = writeln!(buf, "        const SERVICE: &'static str = SERVICE_NAME;");
            let _ = writeln!(
                buf,
                "        const METHOD: &'static str = \"{}\";",
                m.proto_name
            );
            let _ = writeln!(buf, "        type Request = super::{};", m.input_type);
            let _ = writeln!(buf, "        type Response = super::{};", m.output_type);
            let _ = writeln!(buf, "    }}");
        }
        let _ = writeln!(buf, "}}");
    }
}

fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
