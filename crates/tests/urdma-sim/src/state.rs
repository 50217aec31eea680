//! Process-wide simulator state, shared by the verbs/umad entry points and
//! the control thread. Everything the daemon can observe (port attributes,
//! GID/P_Key tables) lives behind one mutex so a `set` from the control FIFO
//! is seen atomically by the next query.

use crate::config::{self, DeviceCfg, PortCfg};
use acm_prov_sys as sys;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The simulated hardware: its devices, the contexts open on them and the
/// umad ports, as the verbs and umad entry points and the control thread
/// see it.
pub struct Hardware {
    devices: Mutex<Vec<DeviceCfg>>,
    /// Open `ibv_context`s by address, so an event for a device reaches every
    /// context that has it open (the daemon opens each device once, but
    /// librdmacm in the same process could open it again).
    contexts: Mutex<HashMap<usize, OpenContext>>,
    umad_ports: Mutex<Vec<Option<File>>>,
}

#[derive(Clone)]
pub struct OpenContext {
    pub device: usize,
    pub events: Arc<EventChannel>,
}

/// One pending async event, as `ibv_get_async_event` hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingEvent {
    pub event_type: sys::ibv_event_type,
    pub port: u8,
}

/// The context's `async_fd` is an eventfd in semaphore mode: each queued
/// event adds one, each `ibv_get_async_event` takes one, so the fd stays
/// readable exactly while events are pending.
pub struct EventChannel {
    fd: File,
    queue: Mutex<VecDeque<PendingEvent>>,
}

impl EventChannel {
    pub fn new(fd: File) -> Self {
        EventChannel {
            fd,
            queue: Mutex::new(VecDeque::new()),
        }
    }

    pub fn fd(&self) -> &File {
        &self.fd
    }

    pub fn push(&self, event: PendingEvent) {
        lock(&self.queue).push_back(event);
        // Cannot fail short of the counter overflowing 2^64-2.
        let _ = (&self.fd).write(&1u64.to_ne_bytes());
    }

    /// Blocks like the real call unless the caller made the fd non-blocking;
    /// `None` when nothing could be taken.
    pub fn pop(&self) -> Option<PendingEvent> {
        let mut buf = [0u8; 8];
        loop {
            match (&self.fd).read(&mut buf) {
                Ok(8) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                _ => return None,
            }
        }
        lock(&self.queue).pop_front()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the daemon's verbs calls down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static SIM: OnceLock<Hardware> = OnceLock::new();

pub fn sim() -> &'static Hardware {
    SIM.get_or_init(|| Hardware::new(load_config()))
}

fn load_config() -> Vec<DeviceCfg> {
    let (name, text) = match std::env::var_os("URDMA_SIM_CONFIG") {
        Some(path) => {
            let shown = path.to_string_lossy().into_owned();
            match std::fs::read_to_string(&path) {
                Ok(text) => (shown, text),
                Err(e) => {
                    // No devices makes the daemon exit with "no devices",
                    // which is louder than silently using the defaults.
                    eprintln!("urdma-sim: {shown}: {e}");
                    return Vec::new();
                }
            }
        }
        None => ("<default>".to_string(), config::DEFAULT_CONFIG.to_string()),
    };
    let (devices, errors) = config::parse(&text);
    for e in errors {
        eprintln!("urdma-sim: {name}:{}: {}", e.line, e.message);
    }
    devices
}

impl Hardware {
    pub fn new(devices: Vec<DeviceCfg>) -> Self {
        Hardware {
            devices: Mutex::new(devices),
            contexts: Mutex::new(HashMap::new()),
            umad_ports: Mutex::new(Vec::new()),
        }
    }

    /// Names are fixed at start-up, so their count and order never change.
    pub fn device_names(&self) -> Vec<String> {
        lock(&self.devices).iter().map(|d| d.name.clone()).collect()
    }

    pub fn device_index(&self, name: &str) -> Option<usize> {
        lock(&self.devices).iter().position(|d| d.name == name)
    }

    pub fn with_device<R>(&self, dev: usize, f: impl FnOnce(&DeviceCfg) -> R) -> Option<R> {
        lock(&self.devices).get(dev).map(f)
    }

    pub fn with_port<R>(&self, dev: usize, port: u8, f: impl FnOnce(&PortCfg) -> R) -> Option<R> {
        lock(&self.devices).get(dev)?.port(port).map(f)
    }

    pub fn register_context(&self, addr: usize, ctx: OpenContext) {
        lock(&self.contexts).insert(addr, ctx);
    }

    pub fn unregister_context(&self, addr: usize) -> Option<OpenContext> {
        lock(&self.contexts).remove(&addr)
    }

    pub fn context(&self, addr: usize) -> Option<OpenContext> {
        lock(&self.contexts).get(&addr).cloned()
    }

    /// Queues an event on every open context of `dev`. Port state follows
    /// PORT_ERR/PORT_ACTIVE first, because the daemon re-queries the port
    /// when it handles them.
    pub fn inject_event(&self, dev: usize, port: u8, name: &str) -> Result<(), String> {
        let event_type = event_type(name).ok_or_else(|| format!("unknown event `{name}`"))?;
        {
            let mut devices = lock(&self.devices);
            let p = devices
                .get_mut(dev)
                .and_then(|d| d.port_mut(port))
                .ok_or_else(|| format!("no port {port}"))?;
            if event_type == sys::ibv_event_type_IBV_EVENT_PORT_ERR {
                p.state = sys::ibv_port_state_IBV_PORT_DOWN;
            } else if event_type == sys::ibv_event_type_IBV_EVENT_PORT_ACTIVE {
                p.state = sys::ibv_port_state_IBV_PORT_ACTIVE;
            }
        }
        let targets: Vec<Arc<EventChannel>> = lock(&self.contexts)
            .values()
            .filter(|c| c.device == dev)
            .map(|c| c.events.clone())
            .collect();
        for t in &targets {
            t.push(PendingEvent { event_type, port });
        }
        Ok(())
    }

    pub fn set_port(&self, dev: usize, port: u8, key: &str, value: &str) -> Result<(), String> {
        let mut devices = lock(&self.devices);
        let p = devices
            .get_mut(dev)
            .and_then(|d| d.port_mut(port))
            .ok_or_else(|| format!("no port {port}"))?;
        // Apply to a copy so a bad value leaves the port untouched.
        let mut updated = p.clone();
        updated.apply(key, value, true)?;
        *p = updated;
        Ok(())
    }

    /// Executes one control line (see `control.rs` for the grammar).
    pub fn command(&self, line: &str) -> Result<(), String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (verb, dev, port, rest) = match words.as_slice() {
            [verb, dev, port, rest @ ..] => (*verb, *dev, *port, rest),
            _ => return Err("expected `event DEV PORT NAME` or `set DEV PORT KEY VALUE`".into()),
        };
        let dev = self
            .device_index(dev)
            .ok_or_else(|| format!("no device `{dev}`"))?;
        let port: u8 = config::parse_int(port)?;
        match (verb, rest) {
            ("event", [name]) => self.inject_event(dev, port, name),
            ("set", [key, value @ ..]) if !value.is_empty() => {
                self.set_port(dev, port, key, &value.join(" "))
            }
            _ => Err("expected `event DEV PORT NAME` or `set DEV PORT KEY VALUE`".into()),
        }
    }

    /// Returns the new port id, the index into the table.
    pub fn umad_open(&self, fd: File) -> i32 {
        let mut ports = lock(&self.umad_ports);
        let id = match ports.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                ports.push(None);
                ports.len() - 1
            }
        };
        ports[id] = Some(fd);
        id as i32
    }

    pub fn with_umad<R>(&self, id: i32, f: impl FnOnce(&File) -> R) -> Option<R> {
        let ports = lock(&self.umad_ports);
        ports.get(usize::try_from(id).ok()?)?.as_ref().map(f)
    }

    /// Drops (and so closes) the port's fd.
    pub fn umad_close(&self, id: i32) -> bool {
        let mut ports = lock(&self.umad_ports);
        usize::try_from(id)
            .ok()
            .and_then(|i| ports.get_mut(i))
            .and_then(Option::take)
            .is_some()
    }
}

pub fn event_type(name: &str) -> Option<sys::ibv_event_type> {
    Some(match name {
        "port_active" => sys::ibv_event_type_IBV_EVENT_PORT_ACTIVE,
        "port_err" => sys::ibv_event_type_IBV_EVENT_PORT_ERR,
        "lid_change" => sys::ibv_event_type_IBV_EVENT_LID_CHANGE,
        "pkey_change" => sys::ibv_event_type_IBV_EVENT_PKEY_CHANGE,
        "gid_change" => sys::ibv_event_type_IBV_EVENT_GID_CHANGE,
        "sm_change" => sys::ibv_event_type_IBV_EVENT_SM_CHANGE,
        "client_reregister" => sys::ibv_event_type_IBV_EVENT_CLIENT_REREGISTER,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_change_state() {
        let (devs, _) = config::parse(config::DEFAULT_CONFIG);
        let sim = Hardware::new(devs);
        sim.command("set urdma1 1 state down").unwrap();
        assert_eq!(
            sim.with_port(1, 1, |p| p.state),
            Some(sys::ibv_port_state_IBV_PORT_DOWN)
        );
        sim.command("event urdma1 1 port_active").unwrap();
        assert_eq!(
            sim.with_port(1, 1, |p| p.state),
            Some(sys::ibv_port_state_IBV_PORT_ACTIVE)
        );
        sim.command("set urdma0 1 node_desc x y").unwrap_err();
        sim.command("set urdma0 1 lid 0x12").unwrap();
        assert_eq!(sim.with_port(0, 1, |p| p.lid), Some(0x12));
        sim.command("event urdma0 2 port_err").unwrap_err();
        sim.command("event nosuch 1 port_err").unwrap_err();
        sim.command("event urdma0 1 bogus").unwrap_err();
        sim.command("set urdma0 1 lid").unwrap_err();
    }
}
