//! `urdma-acm doctor`: whether the daemon loads urdma, exactly once (see
//! `loading.rs`), and for every RDMA port, whether the stock ibacm daemon
//! will serve it with the urdma provider, and every reason why not.
//!
//! The rules are the daemon's (rdma-core 44) and the provider's:
//! - the daemon opens a device only if one of its ports has an InfiniBand
//!   link layer;
//! - it brings a port up only while the port is ACTIVE;
//! - it assigns the provider whose `provider NAME PREFIX` line matches the
//!   subnet prefix of GID 0, else the default provider;
//! - urdma refuses ports that are not InfiniBand or have no GID 0;
//! - the daemon makes one endpoint per P_Key table entry with a non-zero
//!   partition number; a port without one has no endpoint.

use crate::daemon::{self, Options, URDMA, URDMA_FILE};
use crate::loading::{self, Candidate};
use crate::release::DaemonVersion;
use crate::verbs::{Device, Port, PortAttrs};
use acm_prov_sys::{
    ibv_port_state_IBV_PORT_ACTIVE, ibv_port_state_IBV_PORT_ACTIVE_DEFER,
    ibv_port_state_IBV_PORT_ARMED, ibv_port_state_IBV_PORT_DOWN, ibv_port_state_IBV_PORT_INIT,
    IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_INFINIBAND,
};
use std::fmt::Write;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's options file (ibacm -O): provider lines and
    /// provider_lib_path.
    #[arg(short = 'O', long = "opts", value_name = "FILE", default_value = daemon::DEFAULT_OPTS_FILE)]
    pub opts: PathBuf,
    /// The daemon's address file (ibacm -A), checked for addresses on each
    /// port.
    #[arg(short = 'A', long = "addr-file", value_name = "FILE", default_value = daemon::DEFAULT_ADDR_FILE)]
    pub addr_file: PathBuf,
    /// The daemon's rdma-core release (e.g. 28, or a package version such
    /// as 33.2-1), instead of the installed ibacm package's: it decides
    /// which file names the daemon loads (names containing .so up to 28,
    /// ending in .so from 29).
    #[arg(long = "daemon-version", value_name = "VERSION")]
    pub daemon_version: Option<String>,
    /// The diagnosis as one JSON object (schema in urdma-acm(8)); the exit
    /// status is the same.
    #[arg(long)]
    pub json: bool,
}

/// What the daemon's configuration looks like to the port checks.
pub struct Setup {
    pub opts_file: String,
    /// `None`: the options file does not exist (the daemon's defaults).
    pub opts: Option<Options>,
    /// The daemon's release, which decides the file names it loads.
    pub daemon: DaemonVersion,
    /// The provider directory in force and where it comes from.
    pub provider_dir: PathBuf,
    pub provider_dir_source: String,
    /// The files of the provider directory the daemon considers.
    pub providers: Result<Vec<Candidate>, String>,
    pub addr_file: String,
    /// `None`: the address file cannot be read.
    pub addr_text: Option<String>,
}

impl Setup {
    fn options(&self) -> Options {
        self.opts.clone().unwrap_or_default()
    }

    /// Names of the providers the daemon loads, in load order.
    fn loaded(&self) -> Vec<&'static str> {
        match &self.providers {
            Ok(files) => loading::loaded_names(files, self.daemon.rule()),
            Err(_) => Vec::new(),
        }
    }

    /// Provider lines with a tab, which the daemon reads otherwise than
    /// they look.
    fn tab_warnings(&self, opts: &Options) -> Vec<String> {
        opts.tabbed
            .iter()
            .map(|line| {
                format!(
                    "{}:{line}: a tab in a provider line: the daemon splits provider lines on spaces only",
                    self.opts_file
                )
            })
            .collect()
    }

    /// The provider directory's files and what the daemon does with each;
    /// `None` when the directory cannot be read.
    fn provider_files(&self) -> Option<Vec<ProviderFile>> {
        self.providers.as_ref().ok().map(|files| {
            files
                .iter()
                .map(|f| ProviderFile {
                    file: f.file.clone(),
                    urdma: f.urdma,
                    verdict: f.describe(self.daemon.rule()),
                })
                .collect()
        })
    }

    /// Why urdma will not be loaded exactly once (empty: it will).
    fn loading_problems(&self, opts: &Options) -> Vec<String> {
        match &self.providers {
            Ok(files) => loading::problems(
                files,
                self.daemon.rule(),
                &self.provider_dir,
                opts,
                &self.opts_file,
            ),
            Err(e) => vec![format!("{e}: the daemon cannot start")],
        }
    }
}

impl Setup {
    /// Reads what the daemon would read.
    pub fn load(args: &Args) -> Setup {
        let opts_file = args.opts.display().to_string();
        let opts = std::fs::read(&args.opts).ok().map(Options::parse);
        let given = opts.clone().unwrap_or_default();
        // The daemon's executable: its compiled-in directory and exports.
        let ibacm = std::fs::read(daemon::IBACM).ok();
        let (provider_dir, provider_dir_source) = match given.provider_dir_line {
            Some(line) => (
                given.provider_dir,
                format!("provider_lib_path, {opts_file} line {line}"),
            ),
            None => {
                loading::compiled_in_dir(daemon::IBACM, ibacm.as_deref(), |d| Path::new(d).is_dir())
            }
        };
        let daemon = DaemonVersion::detect(args.daemon_version.as_deref());
        let exports = ibacm
            .as_deref()
            .map(loading::defined_dynamic_symbols)
            .unwrap_or_default();
        let providers =
            loading::candidates(&provider_dir, daemon.rule(), &exports, crate::dl::probe);
        Setup {
            opts_file,
            opts,
            daemon,
            provider_dir,
            provider_dir_source,
            providers,
            addr_file: args.addr_file.display().to_string(),
            addr_text: std::fs::read_to_string(&args.addr_file).ok(),
        }
    }
}

pub fn run(args: &Args) -> ExitCode {
    let setup = Setup::load(args);
    let (diagnosis, devices_error) = match crate::verbs::devices() {
        Ok(devices) => (diagnose(&setup, &devices), None),
        // What loads does not depend on devices: say it all the same.
        Err(e) => (diagnose(&setup, &[]), Some(e)),
    };
    if args.json {
        let json = DoctorJson {
            diagnosis: &diagnosis,
            devices_error: devices_error.as_deref(),
            ok: diagnosis.ok && devices_error.is_none(),
        };
        println!(
            "{}",
            serde_json::to_string(&json).expect("strings and numbers only")
        );
    } else if let Some(e) = &devices_error {
        print!("{}", header_text(&diagnosis));
        eprintln!("urdma-acm: {e}; the daemon cannot start without devices");
    } else {
        print!("{}", text(&diagnosis));
    }
    match diagnosis.ok && devices_error.is_none() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// `doctor --json`: the diagnosis, and why no device could be listed.
#[derive(serde::Serialize)]
struct DoctorJson<'a> {
    #[serde(flatten)]
    diagnosis: &'a Diagnosis,
    devices_error: Option<&'a str>,
    ok: bool,
}

/// Everything doctor found, as `--json` writes it (urdma-acm(8) documents
/// the schema) and the text is rendered from.
#[derive(serde::Serialize)]
pub struct Diagnosis {
    options_file: String,
    options_file_exists: bool,
    /// Lines of the options file the daemon reads otherwise than it seems.
    warnings: Vec<String>,
    /// The daemon's release and the loading rule it implies.
    daemon: String,
    daemon_release: Option<u32>,
    provider_dir: String,
    /// Where the directory comes from; null when the options file names it.
    provider_dir_source: Option<String>,
    /// The directory's files the daemon considers; null when it cannot be
    /// read (the reason is in `loading_errors`).
    providers: Option<Vec<ProviderFile>>,
    /// Why urdma will not be loaded exactly once (empty: it will).
    loading_errors: Vec<String>,
    devices: Vec<DeviceDiagnosis>,
    ports_served: usize,
    ports_total: usize,
    /// urdma loads exactly once and some port can be served.
    pub ok: bool,
}

#[derive(serde::Serialize)]
struct ProviderFile {
    file: String,
    urdma: bool,
    /// What the daemon does with it.
    verdict: String,
}

#[derive(serde::Serialize)]
struct DeviceDiagnosis {
    name: String,
    node_guid: String,
    /// Why it could not be opened or queried (the daemon skips it).
    error: Option<String>,
    /// The daemon skips it: none of its ports is InfiniBand.
    skipped: bool,
    ports: Vec<PortDiagnosis>,
}

#[derive(serde::Serialize)]
struct PortDiagnosis {
    port: u8,
    served: bool,
    /// Link layer, state, GID 0 and P_Keys, when served.
    attributes: Option<String>,
    /// Something that will keep a served port from having endpoints.
    note: Option<String>,
    /// Every reason it is not served.
    problems: Vec<String>,
}

/// The diagnosis of `devices` under `setup`.
pub fn diagnose(setup: &Setup, devices: &[Device]) -> Diagnosis {
    let opts = setup.options();
    let loaded = setup.loaded();
    let loading_errors = setup.loading_problems(&opts);
    let devs: Vec<DeviceDiagnosis> = devices
        .iter()
        .map(|dev| DeviceDiagnosis::of(dev, setup, &opts, &loaded))
        .collect();
    let ports = devs.iter().flat_map(|d| &d.ports);
    let ports_served = ports.clone().filter(|p| p.served).count();
    let ports_total = ports.count();
    Diagnosis {
        options_file: setup.opts_file.clone(),
        options_file_exists: setup.opts.is_some(),
        warnings: setup.tab_warnings(&opts),
        daemon: setup.daemon.describe(),
        daemon_release: setup.daemon.major,
        provider_dir: setup.provider_dir.display().to_string(),
        provider_dir_source: opts
            .provider_dir_line
            .is_none()
            .then(|| setup.provider_dir_source.clone()),
        providers: setup.provider_files(),
        ok: ports_served > 0 && loading_errors.is_empty(),
        loading_errors,
        devices: devs,
        ports_served,
        ports_total,
    }
}

impl DeviceDiagnosis {
    /// `dev` and each of its ports, under `setup` with `opts` in force and
    /// the providers `loaded`.
    fn of(dev: &Device, setup: &Setup, opts: &Options, loaded: &[&str]) -> DeviceDiagnosis {
        let mut d = DeviceDiagnosis {
            name: dev.name.clone(),
            node_guid: format!("{:#018x}", dev.guid),
            error: None,
            skipped: false,
            ports: Vec::new(),
        };
        let ports = match &dev.ports {
            Ok(p) => p,
            Err(e) => {
                d.error = Some(e.clone());
                return d;
            }
        };
        d.skipped = !ports.iter().any(|p| {
            p.attrs
                .as_ref()
                .is_ok_and(|a| u32::from(a.link_layer) == IBV_LINK_LAYER_INFINIBAND)
        });
        d.ports = ports
            .iter()
            .map(|port| PortDiagnosis::of(port, &dev.name, d.skipped, setup, opts, loaded))
            .collect();
        d
    }
}

impl PortDiagnosis {
    /// `port` of device `device` (`skipped`: the daemon skips the device).
    fn of(
        port: &Port,
        device: &str,
        skipped: bool,
        setup: &Setup,
        opts: &Options,
        loaded: &[&str],
    ) -> PortDiagnosis {
        let problems = match &port.attrs {
            Err(e) => vec![e.clone()],
            Ok(a) => {
                let mut p = port_problems(setup, opts, loaded, a);
                if skipped {
                    p.insert(0, "its device is skipped (no InfiniBand port)".to_string());
                }
                p
            }
        };
        let served = problems.is_empty();
        PortDiagnosis {
            port: port.num,
            served,
            attributes: port.attrs.as_ref().ok().filter(|_| served).map(summary),
            note: served
                .then(|| address_note(setup, device, port.num))
                .flatten(),
            problems,
        }
    }
}

/// The report as text, and whether some port can be served by urdma.
#[cfg(test)]
pub fn report(setup: &Setup, devices: &[Device]) -> (String, bool) {
    let d = diagnose(setup, devices);
    (text(&d), d.ok)
}

/// The whole report as text.
fn text(d: &Diagnosis) -> String {
    let mut out = header_text(d);
    for dev in &d.devices {
        let _ = write!(out, "\n{} (node GUID {})", dev.name, dev.node_guid);
        if let Some(e) = &dev.error {
            let _ = writeln!(out, ": {e}; the daemon skips it");
            continue;
        }
        let _ = writeln!(out);
        if dev.skipped {
            let _ = writeln!(
                out,
                "  the daemon skips this device: none of its ports is InfiniBand"
            );
        }
        for port in &dev.ports {
            match &port.attributes {
                Some(a) if port.served => {
                    let _ = writeln!(out, "  port {}: served by urdma ({a})", port.port);
                    if let Some(note) = &port.note {
                        let _ = writeln!(out, "    note: {note}");
                    }
                }
                _ => {
                    let _ = writeln!(out, "  port {}: not served by urdma:", port.port);
                    for p in &port.problems {
                        let _ = writeln!(out, "    - {p}");
                    }
                }
            }
        }
    }
    let (served, total) = (d.ports_served, d.ports_total);
    if d.devices.is_empty() {
        let _ = writeln!(
            out,
            "\nno RDMA devices: libibverbs lists none (is the urdma kernel module loaded?)"
        );
    } else if served > 0 {
        let _ = writeln!(out, "\n{served} of {total} ports can be served by urdma");
        if !d.loading_errors.is_empty() {
            let _ = writeln!(
                out,
                "but the provider directory must be fixed first: see the errors above"
            );
        }
    } else {
        let _ = writeln!(
            out,
            "\nno port can be served by urdma: {total} ports, each with the reasons above"
        );
    }
    out
}

/// The options file, the daemon's release, the provider directory's files
/// and the verdict on loading urdma.
fn header_text(d: &Diagnosis) -> String {
    let mut out = String::new();
    match d.options_file_exists {
        true => {
            let _ = writeln!(out, "options file: {}", d.options_file);
        }
        false => {
            let _ = writeln!(
                out,
                "options file: {} does not exist: the daemon uses its defaults",
                d.options_file
            );
        }
    }
    for w in &d.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = writeln!(out, "{}", d.daemon);
    match &d.provider_dir_source {
        None => {
            let _ = writeln!(out, "providers in {}:", d.provider_dir);
        }
        Some(source) => {
            let _ = writeln!(out, "providers in {} ({source}):", d.provider_dir);
        }
    }
    if let Some(files) = &d.providers {
        if files.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for f in files {
            let _ = writeln!(out, "  {}", f.verdict);
        }
    }
    for p in &d.loading_errors {
        let _ = writeln!(out, "error: {p}");
    }
    out
}

fn state_name(state: u32) -> String {
    #[allow(non_upper_case_globals)]
    match state {
        ibv_port_state_IBV_PORT_DOWN => "DOWN".into(),
        ibv_port_state_IBV_PORT_INIT => "INIT".into(),
        ibv_port_state_IBV_PORT_ARMED => "ARMED".into(),
        ibv_port_state_IBV_PORT_ACTIVE => "ACTIVE".into(),
        ibv_port_state_IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER".into(),
        other => format!("{other} (NOP)"),
    }
}

fn link_layer_name(ll: u8) -> &'static str {
    match u32::from(ll) {
        IBV_LINK_LAYER_INFINIBAND => "InfiniBand",
        IBV_LINK_LAYER_ETHERNET => "Ethernet",
        _ => "unspecified",
    }
}

fn gid_text(gid: &[u8; 16]) -> String {
    Ipv6Addr::from(*gid).to_string()
}

/// A partition the daemon makes an endpoint for: non-zero without the
/// membership bit.
fn usable_pkeys(a: &PortAttrs) -> Vec<u16> {
    a.pkeys
        .iter()
        .copied()
        .filter(|p| p & 0x7fff != 0)
        .collect()
}

fn summary(a: &PortAttrs) -> String {
    let pkeys: Vec<String> = usable_pkeys(a)
        .iter()
        .map(|p| format!("{p:#06x}"))
        .collect();
    format!(
        "{}, {}, GID 0 {}, P_Keys {}",
        link_layer_name(a.link_layer),
        state_name(a.state),
        a.gid0.as_ref().map(gid_text).unwrap_or_default(),
        pkeys.join(" ")
    )
}

fn port_problems(setup: &Setup, opts: &Options, loaded: &[&str], a: &PortAttrs) -> Vec<String> {
    let mut problems = Vec::new();
    if a.state != ibv_port_state_IBV_PORT_ACTIVE {
        problems.push(format!(
            "port state is {}: the daemon brings a port up only when it is ACTIVE",
            state_name(a.state)
        ));
    }
    // The daemon's GID table stops at the first entry without an interface
    // id; urdma needs entry 0 of it.
    let gid0 = a.gid0.filter(|g| g[8..] != [0; 8]);
    let prefix = gid0.map(|g| u64::from_be_bytes(g[..8].try_into().expect("8 bytes")));
    let assigned = daemon::assign(opts, loaded, prefix);
    let mut fixes = Vec::new();
    if !loaded.contains(&URDMA) {
        fixes.push(format!(
            "install {URDMA_FILE} as a regular file in {}",
            setup.provider_dir.display()
        ));
    }
    if !opts
        .default
        .as_ref()
        .is_some_and(|(name, _)| name.eq_ignore_ascii_case(URDMA))
    {
        fixes.push(format!(
            "add `provider urdma default` to {}",
            setup.opts_file
        ));
    }
    if fixes.is_empty() {
        fixes.push("change that provider line".to_string());
    }
    let fixes = fixes.join(" and ");
    match &assigned.provider {
        Some(p) if p.eq_ignore_ascii_case(URDMA) => {}
        Some(p) => problems.push(format!(
            "the daemon assigns provider {p} ({}); {fixes}",
            assigned.why
        )),
        None => problems.push(format!(
            "the daemon assigns no provider ({}); {fixes}",
            assigned.why
        )),
    }
    if u32::from(a.link_layer) != IBV_LINK_LAYER_INFINIBAND {
        problems.push(format!(
            "link layer is {}: urdma refuses ports that are not InfiniBand",
            link_layer_name(a.link_layer)
        ));
    }
    match (a.gid0, gid0) {
        (None, _) => problems.push("GID 0 cannot be read: urdma needs a port GID".into()),
        (Some(g), None) => problems.push(format!(
            "GID 0 ({}) has a zero interface id: urdma needs a port GID",
            gid_text(&g)
        )),
        _ => {}
    }
    if usable_pkeys(a).is_empty() {
        let table = if a.pkeys.is_empty() {
            "the P_Key table is empty".to_string()
        } else {
            let all: Vec<String> = a.pkeys.iter().map(|p| format!("{p:#06x}")).collect();
            format!("the P_Key table holds no partition ({})", all.join(" "))
        };
        problems.push(format!("{table}: the daemon opens no endpoint on it"));
    }
    problems
}

fn address_note(setup: &Setup, device: &str, port: u8) -> Option<String> {
    let Some(text) = &setup.addr_text else {
        return Some(format!(
            "cannot read {}: without addresses the daemon drops the port's endpoints",
            setup.addr_file
        ));
    };
    (daemon::addresses_for(text, device, port) == 0).then(|| {
        format!(
            "no address for {device} port {port} in {}: the daemon drops endpoints without one (urdma ports have no IPoIB interface)",
            setup.addr_file
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dl::Load;
    use crate::loading::Kind;
    use crate::verbs::Port;

    fn file(name: &str, urdma: bool, load: Load) -> Candidate {
        Candidate {
            file: name.into(),
            kind: Kind::Regular,
            urdma,
            load: Some(load),
        }
    }

    fn good() -> PortAttrs {
        PortAttrs {
            state: ibv_port_state_IBV_PORT_ACTIVE,
            link_layer: IBV_LINK_LAYER_INFINIBAND as u8,
            gid0: Some(
                "fe80::5054:ff:fe12:3456"
                    .parse::<Ipv6Addr>()
                    .unwrap()
                    .octets(),
            ),
            pkeys: vec![0xffff],
            pkey_tbl_len: 1,
        }
    }

    fn setup(opts: &str) -> Setup {
        Setup {
            opts_file: "opts.cfg".into(),
            opts: Some(Options::parse(opts)),
            daemon: DaemonVersion {
                source: "--daemon-version 44".into(),
                major: Some(44),
            },
            provider_dir: "/prov".into(),
            provider_dir_source: "the compiled-in default of /usr/sbin/ibacm".into(),
            providers: Ok(vec![file(URDMA_FILE, true, Load::Ok)]),
            addr_file: "addr.cfg".into(),
            addr_text: Some("node1 urdma0 1 default\n".into()),
        }
    }

    fn dev(name: &str, ports: Vec<PortAttrs>) -> Device {
        Device {
            name: name.into(),
            guid: 0x5054_00ff_fe12_3456,
            ports: Ok(ports
                .into_iter()
                .zip(1..)
                .map(|(a, num)| Port { num, attrs: Ok(a) })
                .collect()),
        }
    }

    #[test]
    fn every_reason_is_listed() {
        let mut bad = good();
        bad.state = ibv_port_state_IBV_PORT_DOWN;
        bad.link_layer = IBV_LINK_LAYER_ETHERNET as u8;
        bad.gid0 = Some([0; 16]);
        bad.pkeys = vec![0x8000];
        let devices = [dev("urdma0", vec![good(), bad])];
        let (out, ok) = report(&setup("provider urdma default\n"), &devices);
        assert!(ok, "{out}");
        assert!(out.contains("port 1: served by urdma (InfiniBand, ACTIVE, GID 0 fe80::5054:ff:fe12:3456, P_Keys 0xffff)"), "{out}");
        assert!(
            out.contains("port 2: not served by urdma:\n    - port state is DOWN"),
            "{out}"
        );
        assert!(out.contains("link layer is Ethernet"), "{out}");
        assert!(out.contains("GID 0 (::) has a zero interface id"), "{out}");
        assert!(
            out.contains("the P_Key table holds no partition (0x8000)"),
            "{out}"
        );
        assert!(
            out.ends_with("1 of 2 ports can be served by urdma\n"),
            "{out}"
        );
    }

    #[test]
    fn without_a_provider_line_the_builtin_default_wins_and_nothing_is_served() {
        let mut s = setup("");
        s.providers = Ok(vec![
            file("libibacmp.so", false, Load::Ok),
            file(URDMA_FILE, true, Load::Ok),
        ]);
        let (out, ok) = report(&s, &[dev("urdma0", vec![good()])]);
        assert!(!ok, "{out}");
        assert!(out.contains("the daemon assigns provider ibacmp (the daemon's built-in default); add `provider urdma default` to opts.cfg"), "{out}");
        assert!(out.contains("no port can be served by urdma"), "{out}");
    }
}
