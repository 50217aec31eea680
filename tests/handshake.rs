//! The built library as the daemon sees it before any device exists: the
//! dynamic symbols it exports, and the real ibacm's load handshake, which
//! runs even on a machine without RDMA devices (the daemon loads providers,
//! then exits because it finds no device).

use std::path::PathBuf;
use std::process::Command;

fn provider_so() -> PathBuf {
    // Integration tests run from target/<profile>/deps.
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let so = dir.join("libibacm_urdma.so");
    assert!(
        so.exists(),
        "{} is missing: run `cargo build` first",
        so.display()
    );
    so
}

#[test]
fn exports_only_provider_query() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(provider_so())
        .output()
        .expect("nm (binutils)");
    assert!(out.status.success());
    let symbols: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    assert_eq!(symbols, ["provider_query"]);
}

#[test]
fn the_real_daemon_loads_the_provider_and_reads_its_options() {
    let tmp = std::env::temp_dir().join(format!("urdma-handshake-{}", std::process::id()));
    let prov = tmp.join("prov");
    std::fs::create_dir_all(&prov).unwrap();
    // The daemon skips symlinks: the provider must be a regular file.
    std::fs::copy(provider_so(), prov.join("libibacm_urdma.so")).unwrap();
    let opts = tmp.join("opts.cfg");
    std::fs::write(
        &opts,
        format!(
            "log_file stdout\nlog_level 2\nlock_file {}\nprovider_lib_path {}\nprovider urdma default\n\
             urdma_mtu 9000\nurdma_sl 3\nurdma_no_such_key 1\nurdma_hosts_file {}\n",
            tmp.join("pid").display(),
            prov.display(),
            tmp.join("hosts").display()
        ),
    )
    .unwrap();
    std::fs::write(tmp.join("hosts"), "node2 fe80::2\nbroken-line\n").unwrap();
    let addr = tmp.join("addr.cfg");
    std::fs::write(&addr, "").unwrap();
    let out = Command::new("/usr/sbin/ibacm")
        .arg("-P")
        .arg("-O")
        .arg(&opts)
        .arg("-A")
        .arg(&addr)
        // No simulated device here: whatever the machine has must not count.
        .env_remove("LD_PRELOAD")
        .output()
        .expect("/usr/sbin/ibacm (apt-get install ibacm)");
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::remove_dir_all(&tmp).ok();
    let opts = opts.display().to_string();
    let expect = [
        format!(
            "Provider urdma ({}/libibacm_urdma.so) loaded",
            prov.display()
        ),
        "default provider: urdma".to_string(),
        format!("urdma: error: {opts}:6: bad value '9000' for urdma_mtu"),
        "keeping urdma_mtu 4096".to_string(),
        format!("urdma: error: {opts}:8: unknown key 'urdma_no_such_key'"),
        "urdma: debug: urdma_sl 3".to_string(),
        "hosts:2: no GID after 'broken-line'; line skipped".to_string(),
        "urdma: info: hosts file".to_string(),
    ];
    for e in expect {
        assert!(log.contains(&e), "missing `{e}` in the daemon log:\n{log}");
    }
    assert!(!log.contains("unmatched provider version"), "{log}");
    // No device on this machine: the daemon stops after loading providers.
    assert_eq!(out.status.code(), Some(255), "{log}");
}
