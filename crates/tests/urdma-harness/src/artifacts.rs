//! What the harness runs: the daemon and client of the system's rdma-core,
//! and the workspace's own builds. The builds are found beside the running
//! test or bench binary, not from this crate's source directory, so that a
//! test runs the profile it was built with (`cargo test` debug, `cargo
//! bench` release) and a moved target directory still works.

use std::path::{Path, PathBuf};

pub const IBACM: &str = "/usr/sbin/ibacm";
pub const IB_ACME: &str = "/usr/bin/ib_acme";

/// Build outputs the harness runs.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub provider: PathBuf,
    pub sim: PathBuf,
    pub rai: PathBuf,
    /// `urdma-load`, the load generator.
    pub load: PathBuf,
}

impl Artifacts {
    /// Finds them next to the running test binary (`target/<profile>/deps/`).
    pub fn locate() -> Artifacts {
        let profile_dir = Artifacts::profile_dir();
        let provider = std::env::var_os("URDMA_PROVIDER_SO")
            .map(PathBuf::from)
            .unwrap_or_else(|| profile_dir.join("libibacm_urdma.so"));
        let found = Artifacts {
            provider,
            sim: profile_dir.join("liburdma_sim.so"),
            rai: profile_dir.join("urdma-rai"),
            load: profile_dir.join("urdma-load"),
        };
        for p in [&found.provider, &found.sim, &found.rai, &found.load] {
            assert!(
                p.is_file(),
                "{} is missing: run `cargo build --workspace` first",
                p.display()
            );
        }
        found
    }

    /// `target/<profile>/`, where cargo puts the workspace's libraries and
    /// binaries: the parent of the running binary's `deps/`.
    pub fn profile_dir() -> PathBuf {
        let exe = std::env::current_exe().expect("current_exe");
        exe.parent()
            .and_then(Path::parent)
            .expect("test binary lives in target/<profile>/deps")
            .to_path_buf()
    }

    /// `urdma-acm`: `URDMA_ACM` if set (the package test runs the installed
    /// one), else the one built next to the provider in `target/<profile>/`.
    pub fn urdma_acm() -> PathBuf {
        if let Some(path) = std::env::var_os("URDMA_ACM") {
            return PathBuf::from(path);
        }
        let path = Self::profile_dir().join("urdma-acm");
        assert!(
            path.is_file(),
            "{} is missing: run `cargo build --workspace` first",
            path.display()
        );
        path
    }
}
