//! What starting a daemon makes of a `HostConfig`: the files it reads and
//! the command that runs it, both in a host's namespaces.

use super::{HostConfig, HostsFile, Namespaces};
use crate::env::{under_valgrind, valgrind_prefix};
use crate::IBACM;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

impl HostConfig {
    /// The provider library, `ibacm_opts.cfg`, `ibacm_addr.cfg` and what
    /// they name (hosts file, sim config), in `ns`'s directory.
    pub(super) fn write_files(&self, ns: &Namespaces) {
        self.install_provider(ns);
        let mut opts = vec![
            format!("log_file {}", ns.path("ibacm.log").display()),
            format!("log_level {}", self.log_level),
            format!("lock_file {}", ns.path("ibacm.pid").display()),
            format!("provider_lib_path {}", ns.path("prov").display()),
            "support_ips_in_addr_cfg 1".to_string(),
        ];
        if let Some(name) = &self.provider_name {
            opts.push(format!("provider {name} default"));
        }
        // Each host's own /run, even where a node exporter's textfile
        // directory (shared by every host here) would be the default.
        opts.push("urdma_metrics_file /run/ibacm-urdma.prom".to_string());
        let hosts = match &self.hosts_file {
            Some(HostsFile::Text(text)) => {
                fs::write(ns.hosts_path(), text).expect("write hosts.data");
                Some(ns.hosts_path())
            }
            Some(HostsFile::At(path)) => Some(path.clone()),
            None => None,
        };
        if let Some(path) = hosts {
            opts.push(format!("urdma_hosts_file {}", path.display()));
        }
        opts.extend(self.extra_opts.iter().cloned());
        write_lines(&ns.path("ibacm_opts.cfg"), &opts);
        if !self.raw_opts.is_empty() {
            let mut f = OpenOptions::new()
                .append(true)
                .open(ns.path("ibacm_opts.cfg"))
                .expect("open ibacm_opts.cfg");
            f.write_all(&self.raw_opts)
                .expect("append to ibacm_opts.cfg");
        }
        write_lines(&ns.path("ibacm_addr.cfg"), &self.addr_lines);
        if let Some(text) = &self.sim_config {
            fs::write(ns.path("sim.cfg"), text).expect("write sim.cfg");
        }
    }

    fn install_provider(&self, ns: &Namespaces) {
        let (provider, file) = match &self.provider_so {
            Some(so) => (so, so.file_name().expect("a provider file name")),
            None => (&ns.artifacts.provider, "libibacm_urdma.so".as_ref()),
        };
        // Not a symlink: the daemon skips symlinks when loading. A hard
        // link where it can be: the release build with its debug info is
        // 16 MB, and a fleet of 256 copying it wrote 4 GB before its
        // daemons could start (0.5 GB more while a restart storm's 32 came
        // back). The link is the build's own file: replace it, never
        // write to it in place.
        let installed = ns.path("prov").join(file);
        let _ = fs::remove_file(&installed);
        if fs::hard_link(provider, &installed).is_err() {
            fs::copy(provider, &installed).expect("copy provider");
        }
    }

    /// The daemon's command in `ns`, its output into `daemon.out` there,
    /// under the wrapper or valgrind if any.
    pub(super) fn daemon_command(&self, ns: &Namespaces) -> Command {
        let out = File::create(ns.path("daemon.out")).expect("daemon.out");
        let opts = ns.path("ibacm_opts.cfg");
        let addr = ns.path("ibacm_addr.cfg");
        let daemon = [
            IBACM,
            "-P",
            "-O",
            opts.to_str().unwrap(),
            "-A",
            addr.to_str().unwrap(),
        ];
        let mut argv: Vec<String> = if !self.wrapper.is_empty() {
            self.wrapper.clone()
        } else if under_valgrind() {
            valgrind_prefix()
        } else {
            Vec::new()
        };
        argv.extend(daemon.iter().map(|a| a.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = ns.in_namespaces(true, &argv);
        if self.sim_control {
            cmd.env("URDMA_SIM_CONTROL", ns.control_path());
        } else {
            cmd.env_remove("URDMA_SIM_CONTROL");
        }
        if self.sim_config.is_some() {
            cmd.env("URDMA_SIM_CONFIG", ns.path("sim.cfg"));
        } else {
            cmd.env_remove("URDMA_SIM_CONFIG");
        }
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out);
        cmd
    }
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
