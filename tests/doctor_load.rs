//! `urdma-acm doctor` on what the daemon loads from its provider directory,
//! by its release's rules (`--daemon-version 28` and `44`): a good copy of
//! the provider, a symlink to it, a `.so.bak` copy, a library without
//! `provider_query`, a provider that needs a glibc that does not exist.
//! Each case is checked for what the operator reads (the loader's own
//! message, the file skipped, the fix) and for doctor's exit status, with
//! one simulated device whose port urdma can serve (so that only loading
//! decides), and once with no device at all.
//!
//! Needs root (the simulated host), `cc`, and `cargo build --workspace`;
//! `URDMA_ACM` and `URDMA_PROVIDER_SO` choose other builds of the tool and
//! the provider.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use urdma_harness::{Artifacts, Host};

/// One urdma device whose only port urdma serves.
const ONE_GOOD_PORT: &str = "device urdma0\n  port 1\n";

/// A host without a daemon, with the simulated devices of `sim`, an
/// options file naming `prov/` as the provider directory and urdma as the
/// default provider, and an address for the port.
struct Doctor {
    host: Host,
    opts: String,
    addr: String,
}

impl Doctor {
    fn new(sim: &str) -> Doctor {
        let host = Host::bare();
        fs::write(host.path("sim.cfg"), sim).expect("sim.cfg");
        let opts = host.path("opts.cfg");
        fs::write(
            &opts,
            format!(
                "provider_lib_path {}\nprovider urdma default\n",
                host.path("prov").display()
            ),
        )
        .expect("opts.cfg");
        let addr = host.path("addr.cfg");
        fs::write(&addr, "node1 urdma0 1 default\n").expect("addr.cfg");
        Doctor {
            opts: opts.display().to_string(),
            addr: addr.display().to_string(),
            host,
        }
    }

    fn prov(&self, file: &str) -> PathBuf {
        self.host.path("prov").join(file)
    }

    /// Empties the provider directory.
    fn clear(&self) {
        for entry in fs::read_dir(self.host.path("prov")).expect("prov") {
            fs::remove_file(entry.expect("entry").path()).expect("remove");
        }
    }

    /// `urdma-acm doctor --daemon-version VERSION` on the simulated
    /// devices: exit status and stdout (stderr appended after a marker).
    fn run(&self, version: &str) -> (i32, String) {
        let tool = Artifacts::urdma_acm();
        let argv = [
            "timeout",
            "60",
            tool.to_str().unwrap(),
            "doctor",
            "-O",
            &self.opts,
            "-A",
            &self.addr,
            "--daemon-version",
            version,
        ];
        let mut cmd = self.host.in_namespaces(true, &argv);
        cmd.env("URDMA_SIM_CONFIG", self.host.path("sim.cfg"))
            .env_remove("URDMA_SIM_CONTROL");
        let Output {
            status,
            stdout,
            stderr,
        } = cmd.output().expect("run urdma-acm doctor");
        let out = String::from_utf8_lossy(&stdout).into_owned();
        let err = String::from_utf8_lossy(&stderr).into_owned();
        (
            status.code().unwrap_or(-1),
            format!("{out}--- stderr:\n{err}"),
        )
    }
}

/// Compiles C `source` into the shared library `out` with `cc`.
fn cc_shared(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    fs::write(&c, source).expect("write C source");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&c)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc -shared {}", c.display());
    so
}

/// A library that exports something, but no `provider_query`.
fn not_a_provider(dir: &Path) -> PathBuf {
    cc_shared(dir, "notprov", "int not_a_provider(void) { return 1; }\n")
}

/// A provider (it exports `provider_query`) that needs glibc 2.99: built
/// against this glibc, its version requirement on `GLIBC_2.2.5` (for
/// `getpid`) rewritten in place to `GLIBC_2.99`, as a build on a newer
/// system than the daemon's fails on the daemon's.
fn needs_glibc_2_99(dir: &Path) -> PathBuf {
    let so = cc_shared(
        dir,
        "future",
        "#include <unistd.h>\n\
         int provider_query(void **p, unsigned *v) { *v = (unsigned)getpid(); *p = 0; return -1; }\n",
    );
    let bytes = fs::read(&so).expect("read");
    let (from, to) = (b"GLIBC_2.2.5\0", b"GLIBC_2.99\0\0");
    let at: Vec<usize> = (0..bytes.len() - from.len())
        .filter(|&i| &bytes[i..i + from.len()] == from)
        .collect();
    assert!(
        !at.is_empty(),
        "no GLIBC_2.2.5 requirement in {}",
        so.display()
    );
    let mut patched = bytes.clone();
    for i in at {
        patched[i..i + to.len()].copy_from_slice(to);
    }
    fs::write(&so, patched).expect("write");
    let readelf = Command::new("readelf")
        .arg("-V")
        .arg(&so)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(readelf.contains("Name: GLIBC_2.99"), "{readelf}");
    so
}

#[test]
fn doctor_reports_what_the_daemon_loads_by_its_release() {
    let d = Doctor::new(ONE_GOOD_PORT);
    let provider = &d.host.artifacts.provider;
    let scratch = d.host.path("c");
    fs::create_dir_all(&scratch).expect("scratch");

    // (a) The provider alone: loaded by every release.
    fs::copy(provider, d.prov("libibacm_urdma.so")).expect("install");
    assert_the_provider_alone_loads(&d);

    // (b) A symlink beside it: skipped, harmless while the copy loads.
    std::os::unix::fs::symlink(d.prov("libibacm_urdma.so"), d.prov("urdma-link.so"))
        .expect("symlink");
    // (d) A library without provider_query: the daemon logs it and goes on.
    fs::copy(not_a_provider(&scratch), d.prov("libnotprov.so")).expect("copy");
    assert_the_symlink_and_the_library_are_skipped(&d);

    // (c) A backup copy: urdma twice on 28, skipped by name on 44.
    fs::copy(provider, d.prov("libibacm_urdma.so.bak")).expect("copy");
    assert_the_backup_loads_on_28_only(&d);

    // Only the symlink and the backup left: nothing loads urdma on 44,
    // and the symlink's fix is named.
    fs::remove_file(d.prov("libibacm_urdma.so")).expect("remove");
    fs::copy(provider, d.host.path("real.so")).expect("copy");
    fs::remove_file(d.prov("urdma-link.so")).expect("remove");
    std::os::unix::fs::symlink(d.host.path("real.so"), d.prov("libibacm_urdma.so"))
        .expect("symlink");
    assert_only_the_backup_loads_and_only_on_28(&d);

    // (e) A provider that needs glibc 2.99: the loader's words, and the fix.
    d.clear();
    fs::copy(needs_glibc_2_99(&scratch), d.prov("libibacm_urdma.so")).expect("copy");
    assert_the_glibc_it_needs_is_named(&d);
}

/// With the provider alone in its directory: loaded by every release,
/// each named with the rule it loads by.
fn assert_the_provider_alone_loads(d: &Doctor) {
    for v in ["28", "44"] {
        let (code, out) = d.run(v);
        assert!(
            out.contains("\n  libibacm_urdma.so: loaded (urdma)\n"),
            "{v}: {out}"
        );
        assert!(!out.contains("error:"), "{v}: {out}");
        assert!(
            out.contains("1 of 1 ports can be served by urdma"),
            "{v}: {out}"
        );
        assert_eq!(code, 0, "{v}: {out}");
    }
    let (_, out) = d.run("28");
    assert!(
        out.contains(
            "daemon: --daemon-version 28, rdma-core 28: loads the regular files whose name contains .so\n"
        ),
        "{out}"
    );
    let (_, out) = d.run("44.0-2");
    assert!(
        out.contains(
            "daemon: --daemon-version 44.0-2, rdma-core 44: loads the regular files whose name ends in .so\n"
        ),
        "{out}"
    );
}

/// With a symlink to the provider and a library without `provider_query`
/// beside it: both skipped, each with the reason, and no error.
fn assert_the_symlink_and_the_library_are_skipped(d: &Doctor) {
    for v in ["28", "44"] {
        let (code, out) = d.run(v);
        assert!(
            out.contains(
                "\n  urdma-link.so: skipped by the daemon: a symbolic link (the daemon loads only regular files)\n"
            ),
            "{v}: {out}"
        );
        let notprov = d.prov("libnotprov.so").display().to_string();
        assert!(
            out.contains(&format!(
                "\n  libnotprov.so: skipped by the daemon: no provider_query symbol ({notprov}: undefined symbol: provider_query)\n"
            )),
            "{v}: {out}"
        );
        assert!(!out.contains("error:"), "{v}: {out}");
        assert_eq!(code, 0, "{v}: {out}");
    }
}

/// With a `.so.bak` copy beside the provider: loaded too by 28, which is
/// an error with its fix; skipped by name on 44.
fn assert_the_backup_loads_on_28_only(d: &Doctor) {
    let (code, out) = d.run("28");
    assert!(
        out.contains("\n  libibacm_urdma.so.bak: loaded (urdma)\n"),
        "{out}"
    );
    assert!(
        out.contains("\nerror: urdma would be loaded twice by the daemon: "),
        "{out}"
    );
    assert!(
        out.contains(
            "\n  - remove libibacm_urdma.so.bak: ibacm 28 and older load every file whose name contains .so\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("but the provider directory must be fixed first"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");
    let (code, out) = d.run("44");
    assert!(
        out.contains(
            "\n  libibacm_urdma.so.bak: skipped by the daemon: its name does not end in .so (ibacm 29 and later)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("error:"), "{out}");
    assert_eq!(code, 0, "{out}");
}

/// With the provider a symlink and its `.so.bak` copy: an error on 44
/// naming both fixes; on 28 the backup is the one copy that loads: fine.
fn assert_only_the_backup_loads_and_only_on_28(d: &Doctor) {
    let prov = d.host.path("prov").display().to_string();
    let (code, out) = d.run("44");
    assert!(
        out.contains(&format!(
            "\nerror: no file in {prov} provides a loadable urdma provider\n"
        )),
        "{out}"
    );
    assert!(
        out.contains(
            "\n  - libibacm_urdma.so: replace the symlink with a regular file: ibacm skips symlinks\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "\n  - libibacm_urdma.so.bak: rename it to libibacm_urdma.so: ibacm 29 and later load only files whose name ends in .so\n"
        ),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");
    let (code, out) = d.run("28");
    assert!(!out.contains("error:"), "{out}");
    assert_eq!(code, 0, "{out}");
}

/// With a provider that needs glibc 2.99: on every release, the loader's
/// words, the fix, and the line that would crash ibacm 33.
fn assert_the_glibc_it_needs_is_named(d: &Doctor) {
    let installed = d.prov("libibacm_urdma.so").display().to_string();
    for v in ["28", "44"] {
        let (code, out) = d.run(v);
        assert!(
            out.contains(&format!(
                "\n  libibacm_urdma.so: skipped by the daemon: dlopen fails: \
                 /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.99' not found (required by {installed})\n"
            )),
            "{v}: {out}"
        );
        assert!(
            out.contains(
                "\n  - libibacm_urdma.so: it needs a newer glibc than this system's: \
                 rebuild for an older glibc or install the package built by `make dist`\n"
            ),
            "{v}: {out}"
        );
        assert!(
            out.contains("provider urdma default` ("),
            "names the line that would crash ibacm 33: {out}"
        );
        assert_eq!(code, 1, "{v}: {out}");
    }
}

#[test]
fn a_library_that_crashes_when_loaded_takes_down_the_child_not_doctor() {
    let d = Doctor::new(ONE_GOOD_PORT);
    let scratch = d.host.path("c");
    fs::create_dir_all(&scratch).expect("scratch");
    fs::copy(&d.host.artifacts.provider, d.prov("libibacm_urdma.so")).expect("install");
    let crash = cc_shared(
        &scratch,
        "crash",
        "__attribute__((constructor)) static void boom(void) { *(volatile int *)0 = 1; }\n\
         int provider_query(void **p, unsigned *v) { return -1; }\n",
    );
    fs::copy(crash, d.prov("libcrash.so")).expect("copy");
    let (code, out) = d.run("44");
    assert!(
        out.contains(
            "\n  libcrash.so: loading it fails: killed by signal 11 (SIGSEGV); the daemon would fail the same way\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("\nerror: loading libcrash.so kills or hangs the process, and the daemon loads every provider at start-up\n  - remove libcrash.so from "),
        "{out}"
    );
    // Doctor itself went on to the ports.
    assert!(out.contains("1 of 1 ports can be served by urdma"), "{out}");
    assert_eq!(code, 1, "{out}");
}

#[test]
fn doctor_reports_loading_without_any_device() {
    // No device: the loading section is printed all the same, and doctor
    // fails as it always did (the daemon cannot start without devices).
    let d = Doctor::new("");
    fs::copy(&d.host.artifacts.provider, d.prov("libibacm_urdma.so")).expect("install");
    fs::copy(
        &d.host.artifacts.provider,
        d.prov("libibacm_urdma.so.dpkg-old"),
    )
    .expect("copy");
    let (code, out) = d.run("28");
    assert!(
        out.contains("\n  libibacm_urdma.so: loaded (urdma)\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "\n  - remove libibacm_urdma.so.dpkg-old: ibacm 28 and older load every file whose name contains .so\n"
        ),
        "{out}"
    );
    assert!(out.contains("no RDMA devices"), "{out}");
    assert_eq!(code, 1, "{out}");
    let (code, out) = d.run("44");
    assert!(!out.contains("error:"), "{out}");
    assert!(out.contains("no RDMA devices"), "{out}");
    assert_eq!(code, 1, "{out}");
}
