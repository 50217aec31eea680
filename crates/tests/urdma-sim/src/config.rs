//! The simulator's configuration: which devices exist and what their ports
//! report. Parsing is forgiving on purpose: a bad line is reported as
//! `urdma-sim: FILE:LINE: message` and skipped, so one typo in a test's
//! config shows up in the daemon's stderr instead of making every verbs call
//! fail.
//!
//! Format: one `KEY VALUE` per line, `#` starts a comment, indentation is
//! free. `device NAME` starts a device; `port N` starts port N of it and the
//! port keys that follow apply to that port.
//!
//! Device keys: `mac XX:XX:XX:XX:XX:XX` (node GUID = its modified EUI-64),
//! `node_guid 0x...` (overrides the mac-derived GUID), `node_desc TEXT`.
//! A device without `mac`/`node_guid` gets mac 52:54:00:12:34:(56 + its
//! index); one without `port` lines gets a default port 1.
//!
//! Port keys (defaults in brackets): `link_layer infiniband|ethernet` \[ib\],
//! `state active|down|init|armed` \[active\], `lid` \[0\], `lmc` \[0\],
//! `sm_lid` \[0\], `sm_sl` \[0\], `gid IPV6` (repeatable, first = index 0)
//! \[fe80:: + node GUID + N - 1\], `gids LIST` (whole table, `-` = empty),
//! `pkey 0xNNNN` (repeatable) \[0xffff\], `pkeys LIST`, `active_mtu`/`max_mtu`
//! in bytes 256..4096 \[4096\], `width 1x|2x|4x|8x|12x` \[4x\],
//! `speed 2.5|5|10|fdr10|14|25|50|100` Gb/s per lane \[25\],
//! `subnet_timeout` \[18\]. Numbers are decimal or `0x` hex.

use acm_prov_sys as sys;
use std::net::Ipv6Addr;

/// Used when `URDMA_SIM_CONFIG` is not set: two single-port InfiniBand
/// devices whose identities differ only in the last MAC byte.
pub const DEFAULT_CONFIG: &str = "\
device urdma0
  mac 52:54:00:12:34:56
  node_desc URDMA Virtual HCA
  port 1
device urdma1
  mac 52:54:00:12:34:57
  node_desc URDMA Virtual HCA
  port 1
";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceCfg {
    pub name: String,
    pub node_guid: u64,
    pub node_desc: String,
    /// Index `i` is port `i + 1`; `None` for a number the config skipped,
    /// which then fails `ibv_query_port` like a missing port would.
    pub ports: Vec<Option<PortCfg>>,
}

impl DeviceCfg {
    pub fn port(&self, num: u8) -> Option<&PortCfg> {
        self.ports.get(usize::from(num).checked_sub(1)?)?.as_ref()
    }

    pub fn port_mut(&mut self, num: u8) -> Option<&mut PortCfg> {
        self.ports
            .get_mut(usize::from(num).checked_sub(1)?)?
            .as_mut()
    }
}

/// Port attributes, already in the encodings `ibv_port_attr` uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortCfg {
    pub link_layer: u8,
    pub state: sys::ibv_port_state,
    pub lid: u16,
    pub lmc: u8,
    pub sm_lid: u16,
    pub sm_sl: u8,
    /// Raw GIDs in network order; entry 0 is the port GID.
    pub gids: Vec<[u8; 16]>,
    pub pkeys: Vec<u16>,
    pub active_mtu: sys::ibv_mtu,
    pub max_mtu: sys::ibv_mtu,
    pub width: u8,
    pub speed: u8,
    pub subnet_timeout: u8,
}

impl PortCfg {
    fn with_gid(gid: [u8; 16]) -> Self {
        PortCfg {
            link_layer: sys::IBV_LINK_LAYER_INFINIBAND as u8,
            state: sys::ibv_port_state_IBV_PORT_ACTIVE,
            lid: 0,
            lmc: 0,
            sm_lid: 0,
            sm_sl: 0,
            gids: vec![gid],
            pkeys: vec![0xffff],
            active_mtu: sys::ibv_mtu_IBV_MTU_4096,
            max_mtu: sys::ibv_mtu_IBV_MTU_4096,
            width: 2,  // 4x
            speed: 32, // EDR, 25 Gb/s per lane
            subnet_timeout: 18,
        }
    }

    /// The `ibv_port_attr.phys_state` matching `state` (5 = LinkUp,
    /// 3 = Disabled), so tools that print both stay consistent.
    pub fn phys_state(&self) -> u8 {
        if self.state == sys::ibv_port_state_IBV_PORT_DOWN {
            3
        } else {
            5
        }
    }

    /// Applies one `KEY VALUE` setting. `replace_first` selects what the
    /// repeatable `gid`/`pkey` keys do: the config file appends (the first
    /// explicit line has already cleared the default), the control FIFO's
    /// `set` replaces entry 0.
    pub fn apply(&mut self, key: &str, value: &str, replace_first: bool) -> Result<(), String> {
        match key {
            "link_layer" => {
                self.link_layer = match value {
                    "infiniband" | "ib" => sys::IBV_LINK_LAYER_INFINIBAND as u8,
                    "ethernet" | "eth" => sys::IBV_LINK_LAYER_ETHERNET as u8,
                    "unspecified" => sys::IBV_LINK_LAYER_UNSPECIFIED as u8,
                    _ => return Err(format!("bad link_layer `{value}` (infiniband|ethernet)")),
                }
            }
            "state" => self.state = parse_state(value)?,
            "lid" => self.lid = parse_int(value)?,
            "lmc" => {
                self.lmc = parse_int(value)?;
                if self.lmc > 7 {
                    return Err(format!("lmc {value} out of range 0..7"));
                }
            }
            "sm_lid" => self.sm_lid = parse_int(value)?,
            "sm_sl" => self.sm_sl = parse_int(value)?,
            "subnet_timeout" => self.subnet_timeout = parse_int(value)?,
            "active_mtu" => self.active_mtu = parse_mtu(value)?,
            "max_mtu" => self.max_mtu = parse_mtu(value)?,
            "width" => self.width = parse_width(value)?,
            "speed" => self.speed = parse_speed(value)?,
            "gid" => {
                let gid = parse_gid(value)?;
                if replace_first && !self.gids.is_empty() {
                    self.gids[0] = gid;
                } else {
                    self.gids.push(gid);
                }
            }
            "pkey" => {
                let pkey = parse_int(value)?;
                if replace_first && !self.pkeys.is_empty() {
                    self.pkeys[0] = pkey;
                } else {
                    self.pkeys.push(pkey);
                }
            }
            // Whole-table forms, so a test can grow or empty a table
            // (`-` = empty) before injecting gid_change/pkey_change.
            "gids" => self.gids = parse_list(value, parse_gid)?,
            "pkeys" => self.pkeys = parse_list(value, parse_int)?,
            _ => return Err(format!("unknown port key `{key}`")),
        }
        Ok(())
    }
}

/// A configuration problem, reported with its line number (1-based).
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub message: String,
}

/// Parses a whole config text. Never fails: problems come back alongside
/// whatever could be built.
pub fn parse(text: &str) -> (Vec<DeviceCfg>, Vec<ConfigError>) {
    let mut builder = Builder::default();
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = match line.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => (line, ""),
        };
        if let Err(message) = builder.line(key, value) {
            builder.errors.push(ConfigError {
                line: idx + 1,
                message,
            });
        }
    }
    builder.finish()
}

#[derive(Default)]
struct PendingPort {
    num: u8,
    cfg: PortCfg,
    explicit_gids: bool,
    explicit_pkeys: bool,
}

#[derive(Default)]
struct PendingDevice {
    name: String,
    mac: Option<[u8; 6]>,
    node_guid: Option<u64>,
    node_desc: Option<String>,
    ports: Vec<PendingPort>,
}

#[derive(Default)]
struct Builder {
    devices: Vec<PendingDevice>,
    errors: Vec<ConfigError>,
}

impl Default for PortCfg {
    fn default() -> Self {
        // GIDs are filled in from the device identity once it is known.
        let mut port = PortCfg::with_gid([0; 16]);
        port.gids.clear();
        port
    }
}

impl Builder {
    fn line(&mut self, key: &str, value: &str) -> Result<(), String> {
        if key == "device" {
            if value.is_empty() || value.contains(char::is_whitespace) || value.len() >= 64 {
                return Err(format!("bad device name `{value}`"));
            }
            if self.devices.iter().any(|d| d.name == value) {
                return Err(format!("duplicate device `{value}`"));
            }
            self.devices.push(PendingDevice {
                name: value.to_string(),
                ..Default::default()
            });
            return Ok(());
        }
        let dev = self
            .devices
            .last_mut()
            .ok_or_else(|| format!("`{key}` before any `device` line"))?;
        match key {
            "mac" => dev.mac = Some(parse_mac(value)?),
            "node_guid" => dev.node_guid = Some(parse_int(value)?),
            "node_desc" => dev.node_desc = Some(value.to_string()),
            "port" => {
                let num: u8 = parse_int(value)?;
                if num == 0 {
                    return Err("port numbers start at 1".into());
                }
                if dev.ports.iter().any(|p| p.num == num) {
                    return Err(format!("duplicate port {num}"));
                }
                dev.ports.push(PendingPort {
                    num,
                    ..Default::default()
                });
            }
            _ => {
                let port = dev
                    .ports
                    .last_mut()
                    .ok_or_else(|| format!("port key `{key}` before any `port` line"))?;
                // The first explicit gid/pkey line replaces the default table.
                if key == "gid" && !port.explicit_gids {
                    port.explicit_gids = true;
                    port.cfg.gids.clear();
                }
                if key == "pkey" && !port.explicit_pkeys {
                    port.explicit_pkeys = true;
                    port.cfg.pkeys.clear();
                }
                port.cfg.apply(key, value, false)?;
                if key == "gids" {
                    port.explicit_gids = true;
                }
                if key == "pkeys" {
                    port.explicit_pkeys = true;
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> (Vec<DeviceCfg>, Vec<ConfigError>) {
        let devices = self
            .devices
            .into_iter()
            .enumerate()
            .map(|(index, dev)| {
                // Without a mac or GUID each device still needs a distinct
                // identity, so derive one from its position.
                let mac = dev
                    .mac
                    .unwrap_or([0x52, 0x54, 0x00, 0x12, 0x34, 0x56 + index as u8]);
                let node_guid = dev.node_guid.unwrap_or_else(|| eui64(mac));
                let mut pending = dev.ports;
                if pending.is_empty() {
                    pending.push(PendingPort {
                        num: 1,
                        ..Default::default()
                    });
                }
                let count = pending.iter().map(|p| p.num).max().unwrap_or(1);
                let mut ports = vec![None; usize::from(count)];
                for p in pending {
                    let mut cfg = p.cfg;
                    if !p.explicit_gids {
                        // Real HCAs give every port its own GUID; follow
                        // that by offsetting from the node GUID.
                        cfg.gids = vec![link_local_gid(node_guid + u64::from(p.num) - 1)];
                    }
                    if !p.explicit_pkeys {
                        cfg.pkeys = vec![0xffff];
                    }
                    ports[usize::from(p.num) - 1] = Some(cfg);
                }
                DeviceCfg {
                    name: dev.name,
                    node_guid,
                    node_desc: dev.node_desc.unwrap_or_else(|| "URDMA Virtual HCA".into()),
                    ports,
                }
            })
            .collect();
        (devices, self.errors)
    }
}

/// Modified EUI-64 of a MAC, as IB/RoCE stacks derive GUIDs.
pub fn eui64(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

pub fn link_local_gid(guid: u64) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8..].copy_from_slice(&guid.to_be_bytes());
    gid
}

fn parse_mac(value: &str) -> Result<[u8; 6], String> {
    let bytes: Vec<u8> = value
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("bad mac `{value}`"))?;
    bytes.try_into().map_err(|_| format!("bad mac `{value}`"))
}

/// Decimal or `0x` hex integer.
pub fn parse_int<T: TryFrom<u64>>(value: &str) -> Result<T, String> {
    let parsed = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    parsed
        .ok()
        .and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| format!("bad or out-of-range number `{value}`"))
}

fn parse_gid(value: &str) -> Result<[u8; 16], String> {
    value
        .parse::<Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("bad gid `{value}`"))
}

fn parse_list<T>(value: &str, item: fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    if value == "-" {
        return Ok(Vec::new());
    }
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(item)
        .collect()
}

fn parse_state(value: &str) -> Result<sys::ibv_port_state, String> {
    Ok(match value {
        "active" => sys::ibv_port_state_IBV_PORT_ACTIVE,
        "down" => sys::ibv_port_state_IBV_PORT_DOWN,
        "init" => sys::ibv_port_state_IBV_PORT_INIT,
        "armed" => sys::ibv_port_state_IBV_PORT_ARMED,
        _ => return Err(format!("bad state `{value}` (active|down|init|armed)")),
    })
}

fn parse_mtu(value: &str) -> Result<sys::ibv_mtu, String> {
    Ok(match value {
        "256" => sys::ibv_mtu_IBV_MTU_256,
        "512" => sys::ibv_mtu_IBV_MTU_512,
        "1024" => sys::ibv_mtu_IBV_MTU_1024,
        "2048" => sys::ibv_mtu_IBV_MTU_2048,
        "4096" => sys::ibv_mtu_IBV_MTU_4096,
        _ => return Err(format!("bad mtu `{value}` (256|512|1024|2048|4096)")),
    })
}

/// `ibv_port_attr.active_width` is a bit per width, not the lane count.
fn parse_width(value: &str) -> Result<u8, String> {
    Ok(match value.trim_end_matches(['x', 'X']) {
        "1" => 1,
        "4" => 2,
        "8" => 4,
        "12" => 8,
        "2" => 16,
        _ => return Err(format!("bad width `{value}` (1x|2x|4x|8x|12x)")),
    })
}

/// `ibv_port_attr.active_speed` codes (verbs.h): per-lane signalling rate.
/// 14 Gb/s is FDR (16); `fdr10` (8) is the 10 Gb/s 64b/66b variant. XDR
/// (200 Gb/s) has no code in this byte, only in `active_speed_ex`, which the
/// compat layout the daemon uses does not have.
fn parse_speed(value: &str) -> Result<u8, String> {
    Ok(match value {
        "2.5" => 1,
        "5" => 2,
        "10" => 4,
        "fdr10" => 8,
        "14" => 16,
        "25" => 32,
        "50" => 64,
        "100" => 128,
        _ => return Err(format!("bad speed `{value}` (2.5|5|10|fdr10|14|25|50|100)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_matches_the_documented_identities() {
        let (devs, errors) = parse(DEFAULT_CONFIG);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(devs.len(), 2);
        assert_eq!(devs[0].name, "urdma0");
        assert_eq!(devs[0].node_guid, 0x5054_00ff_fe12_3456);
        assert_eq!(devs[1].node_guid, 0x5054_00ff_fe12_3457);
        let port = devs[0].port(1).unwrap();
        assert_eq!(
            port.gids,
            vec!["fe80::5054:ff:fe12:3456"
                .parse::<Ipv6Addr>()
                .unwrap()
                .octets()]
        );
        assert_eq!(port.pkeys, vec![0xffff]);
        assert_eq!(port.state, sys::ibv_port_state_IBV_PORT_ACTIVE);
        assert_eq!(port.link_layer, sys::IBV_LINK_LAYER_INFINIBAND as u8);
        assert_eq!((port.width, port.speed, port.subnet_timeout), (2, 32, 18));
        assert!(devs[0].port(2).is_none());
    }

    #[test]
    fn explicit_values_and_errors() {
        let text = "\
lid 3
device a   # comment
  node_guid 0x1122334455667788
  port 2
    link_layer ethernet
    state down
    gid fe80::1
    gid fe80::2
    pkey 0x8001
    pkey 0x7fff
    width 12x
    speed 14
    active_mtu 1024
    bogus 1
    lid 70000
";
        let (devs, errors) = parse(text);
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 14, 15]);
        let dev = &devs[0];
        assert_eq!(dev.node_guid, 0x1122_3344_5566_7788);
        assert!(dev.port(1).is_none());
        let port = dev.port(2).unwrap();
        assert_eq!(port.link_layer, sys::IBV_LINK_LAYER_ETHERNET as u8);
        assert_eq!(port.state, sys::ibv_port_state_IBV_PORT_DOWN);
        assert_eq!(port.gids.len(), 2);
        assert_eq!(port.gids[1][15], 2);
        assert_eq!(port.pkeys, vec![0x8001, 0x7fff]);
        assert_eq!((port.width, port.speed), (8, 16));
        assert_eq!(port.active_mtu, sys::ibv_mtu_IBV_MTU_1024);
    }

    #[test]
    fn set_replaces_entry_zero_and_tables() {
        let (mut devs, _) = parse(DEFAULT_CONFIG);
        let port = devs[0].port_mut(1).unwrap();
        port.apply("gid", "fe80::1", true).unwrap();
        port.apply("pkey", "0x8001", true).unwrap();
        assert_eq!(port.gids.len(), 1);
        assert_eq!(port.gids[0][15], 1);
        assert_eq!(port.pkeys, vec![0x8001]);
        port.apply("pkeys", "0xffff, 0x8002", true).unwrap();
        assert_eq!(port.pkeys, vec![0xffff, 0x8002]);
        port.apply("gids", "-", true).unwrap();
        assert!(port.gids.is_empty());
    }
}
