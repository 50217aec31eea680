//! This host's side of every answer: the devices, ports, endpoints and
//! addresses the daemon opened. The request path finds local destinations
//! here, and discovery reads here what to announce, what to answer for and
//! which address to send from; neither changes it.

use crate::addr::{Address, Gid};
use crate::fastmap::Map;
use crate::handle::{AddressId, DeviceId, EndpointId, Handle, PortId};
use crate::ib;
use std::net::IpAddr;

/// What the boundary learns about a port from verbs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortInfo {
    pub port_num: u8,
    pub link_layer_ib: bool,
    /// Link layer as verbs names it, for the refusal message.
    pub link_layer: &'static str,
    pub lid: u16,
    pub lmc: u8,
    /// `enum ibv_mtu`, 0 when the port does not report one.
    pub active_mtu: u8,
    pub active_width: u8,
    pub active_speed: u8,
    /// The port's GID table up to its first empty entry.
    pub gids: Vec<Gid>,
}

impl PortInfo {
    /// An InfiniBand port whose GID table holds `gid` and that reports
    /// nothing else (no LID, MTU, width or speed), as urdma ports do.
    pub fn infiniband(port_num: u8, gid: Gid) -> PortInfo {
        PortInfo {
            port_num,
            link_layer_ib: true,
            link_layer: "InfiniBand",
            gids: vec![gid],
            ..Default::default()
        }
    }
}

/// Why `open_port` refused a port.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    UnknownDevice,
    NotInfiniband(&'static str),
    NoGid,
}

pub struct Port {
    pub device: DeviceId,
    pub info: PortInfo,
    pub endpoints: Vec<EndpointId>,
}

pub struct Endpoint {
    pub port: PortId,
    pub pkey: u16,
    pub addresses: Vec<AddressId>,
}

pub struct LocalAddress {
    pub endpoint: EndpointId,
    pub address: Address,
}

/// The MTU and rate a port offers when verbs does not say
/// (`urdma_mtu`, `urdma_rate`).
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    pub mtu: u32,
    pub rate_gbps: u32,
}

/// How much [`Local`] holds ([`Local::sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSizes {
    pub devices: usize,
    pub ports: usize,
    pub endpoints: usize,
    pub addresses: usize,
    /// Addresses told apart (an address on two endpoints is one).
    pub distinct_addresses: usize,
}

pub struct Local {
    offer: Offer,
    devices: Map<DeviceId, u64>,
    device_by_guid: Map<u64, DeviceId>,
    ports: Map<PortId, Port>,
    endpoints: Map<EndpointId, Endpoint>,
    addresses: Map<AddressId, LocalAddress>,
    /// The address handles holding each address.
    by_address: Map<Address, Vec<AddressId>>,
    ids: Ids,
}

/// The handles given out: each new one is unused, whatever its kind, so a
/// stale context the daemon passes back never names a newer object.
struct Ids {
    next: u64,
}

impl Ids {
    fn next<H: Handle>(&mut self) -> H {
        let id = self.next;
        self.next += 1;
        H::from_raw(id)
    }
}

pub(crate) fn ip_of(a: &Address) -> Option<IpAddr> {
    match a {
        Address::Ip4(v4) => Some(IpAddr::V4(*v4)),
        Address::Ip6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

pub(crate) fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

impl Local {
    pub fn new(offer: Offer) -> Local {
        Local {
            offer,
            devices: Map::default(),
            device_by_guid: Map::default(),
            ports: Map::default(),
            endpoints: Map::default(),
            addresses: Map::default(),
            by_address: Map::default(),
            ids: Ids { next: 1 },
        }
    }

    /// Idempotent per GUID: the daemon opens a device again after a failed
    /// `open_port` without closing it first.
    pub fn open_device(&mut self, guid: u64) -> DeviceId {
        if let Some(&id) = self.device_by_guid.get(&guid) {
            return id;
        }
        let id = self.ids.next();
        self.devices.insert(id, guid);
        self.device_by_guid.insert(guid, id);
        log::debug!("device {guid:#018x} opened");
        id
    }

    pub fn ports_of_device(&self, dev: DeviceId) -> Vec<PortId> {
        self.ports
            .iter()
            .filter(|(_, p)| p.device == dev)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Forgets a device whose ports are closed.
    pub fn remove_device(&mut self, dev: DeviceId) {
        if let Some(guid) = self.devices.remove(&dev) {
            self.device_by_guid.remove(&guid);
            log::debug!("device {guid:#018x} closed");
        }
    }

    pub fn add_port(&mut self, dev: DeviceId, info: PortInfo) -> Result<PortId, Refused> {
        let guid = *self.devices.get(&dev).ok_or(Refused::UnknownDevice)?;
        if !info.link_layer_ib {
            return Err(Refused::NotInfiniband(info.link_layer));
        }
        if info.gids.first().is_none_or(Gid::is_zero) {
            return Err(Refused::NoGid);
        }
        log::debug!(
            "device {guid:#018x} port {}: gid {} lid {} mtu {} rate {}",
            info.port_num,
            info.gids[0],
            info.lid,
            info.active_mtu,
            ib::port_rate(info.active_width, info.active_speed).unwrap_or(0)
        );
        let id = self.ids.next();
        let port = Port {
            device: dev,
            info,
            endpoints: Vec::new(),
        };
        self.ports.insert(id, port);
        Ok(id)
    }

    /// Forgets a port whose endpoints are closed.
    pub fn remove_port(&mut self, port: PortId) {
        if let Some(p) = self.ports.remove(&port) {
            log::debug!("port {} closed", p.info.port_num);
        }
    }

    pub fn add_endpoint(&mut self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let id = self.ids.next();
        let p = self.ports.get_mut(&port)?;
        p.endpoints.push(id);
        let endpoint = Endpoint {
            port,
            pkey,
            addresses: Vec::new(),
        };
        self.endpoints.insert(id, endpoint);
        log::debug!("port {} endpoint pkey {pkey:#06x} opened", p.info.port_num);
        Some(id)
    }

    /// Forgets an endpoint whose addresses are removed.
    pub fn remove_endpoint(&mut self, ep: EndpointId) {
        if let Some(e) = self.endpoints.remove(&ep) {
            if let Some(p) = self.ports.get_mut(&e.port) {
                p.endpoints.retain(|&x| x != ep);
            }
        }
    }

    /// The daemon may add an address it already has (after a netlink
    /// overrun); that gets a handle of its own.
    pub fn add_address(&mut self, ep: EndpointId, address: Address) -> Option<AddressId> {
        let id = self.ids.next();
        let e = self.endpoints.get_mut(&ep)?;
        e.addresses.push(id);
        log::debug!("endpoint pkey {:#06x}: address {address}", e.pkey);
        self.by_address.entry(address.clone()).or_default().push(id);
        self.addresses.insert(
            id,
            LocalAddress {
                endpoint: ep,
                address,
            },
        );
        Some(id)
    }

    pub fn remove_address(&mut self, addr: AddressId) -> Option<LocalAddress> {
        let a = self.addresses.remove(&addr)?;
        if let Some(ids) = self.by_address.get_mut(&a.address) {
            ids.retain(|&x| x != addr);
            if ids.is_empty() {
                self.by_address.remove(&a.address);
            }
        }
        if let Some(e) = self.endpoints.get_mut(&a.endpoint) {
            e.addresses.retain(|&x| x != addr);
        }
        log::debug!("address {} removed", a.address);
        Some(a)
    }

    pub fn port(&self, port: PortId) -> Option<&Port> {
        self.ports.get(&port)
    }

    pub fn ports(&self) -> impl Iterator<Item = &Port> {
        self.ports.values()
    }

    pub fn endpoint(&self, ep: EndpointId) -> Option<&Endpoint> {
        self.endpoints.get(&ep)
    }

    pub fn endpoint_ids(&self) -> impl Iterator<Item = EndpointId> + '_ {
        self.endpoints.keys().copied()
    }

    /// The address `addr` names; its endpoint is the one a request made
    /// for it comes from.
    #[inline]
    pub fn address(&self, addr: AddressId) -> Option<&LocalAddress> {
        self.addresses.get(&addr)
    }

    /// The port of endpoint `ep`.
    pub fn port_of(&self, ep: EndpointId) -> Option<&PortInfo> {
        let e = self.endpoints.get(&ep)?;
        self.ports.get(&e.port).map(|p| &p.info)
    }

    /// The addresses of endpoint `ep`.
    pub fn addresses_of(&self, ep: EndpointId) -> impl Iterator<Item = &Address> {
        self.endpoints
            .get(&ep)
            .into_iter()
            .flat_map(|e| &e.addresses)
            .filter_map(|id| self.addresses.get(id).map(|a| &a.address))
    }

    /// Where this host holds `dest`, as (GID, LID): an address of its own
    /// (preferring a port in partition `pkey`), a GID of one of its ports,
    /// or a LID in a port's LMC range.
    pub fn holds(&self, dest: &Address, pkey: u16) -> Option<(Gid, u16)> {
        match dest {
            Address::Gid(g) => self
                .ports
                .values()
                .map(|p| &p.info)
                .find(|i| i.gids.contains(g))
                .map(|i| (*g, i.lid)),
            Address::Lid(l) => self
                .ports
                .values()
                .map(|p| &p.info)
                .find(|i| *l != 0 && (*l & !((1u16 << i.lmc) - 1)) == i.lid)
                .map(|i| (i.gids[0], *l)),
            a => {
                let mut ports: Vec<_> = self
                    .by_address
                    .get(a)?
                    .iter()
                    .map(|id| {
                        let e = &self.endpoints[&self.addresses[id].endpoint];
                        (e.pkey & 0x7fff == pkey & 0x7fff, &self.ports[&e.port].info)
                    })
                    .collect();
                ports.sort_by_key(|(same_pkey, _)| !same_pkey);
                ports.first().map(|(_, i)| (i.gids[0], i.lid))
            }
        }
    }

    /// The endpoint that holds `address`, if this host holds it.
    pub fn holder(&self, address: &Address) -> Option<EndpointId> {
        let id = self.by_address.get(address)?.first()?;
        self.addresses.get(id).map(|a| a.endpoint)
    }

    pub fn is_own_gid(&self, gid: Gid) -> bool {
        self.ports.values().any(|p| p.info.gids.contains(&gid))
    }

    /// Offers `offer` on ports whose verbs do not say (a changed options
    /// file).
    pub fn set_offer(&mut self, offer: Offer) {
        self.offer = offer;
    }

    /// The MTU and rate this host offers on a port.
    pub fn mtu_rate(&self, port: &PortInfo) -> (u8, u8) {
        let cfg_mtu = ib::mtu_enum(self.offer.mtu).unwrap_or(5);
        let mtu = match port.active_mtu {
            0 => cfg_mtu,
            m => m.min(cfg_mtu),
        };
        let rate = ib::port_rate(port.active_width, port.active_speed)
            .or_else(|| ib::rate_enum_x10(self.offer.rate_gbps * 10))
            .unwrap_or(3);
        (mtu, rate)
    }

    /// An address of endpoint `ep` to send to `to` from, so the peer sees
    /// the query come from an address the query's record lists. Link-local
    /// destinations are left to the kernel, which picks the link's own.
    pub fn source_for(&self, ep: EndpointId, to: IpAddr) -> Option<IpAddr> {
        if is_link_local(to) {
            return None;
        }
        self.addresses_of(ep)
            .filter_map(ip_of)
            .find(|ip| ip.is_ipv4() == to.is_ipv4() && !is_link_local(*ip))
    }

    /// An endpoint to send to `to` from: one with an address of `to`'s
    /// family if there is one.
    pub fn endpoint_for(&self, to: IpAddr) -> Option<EndpointId> {
        let same_family = |&ep: &EndpointId| {
            self.addresses_of(ep)
                .filter_map(ip_of)
                .any(|ip| ip.is_ipv4() == to.is_ipv4())
        };
        self.endpoint_ids()
            .find(same_family)
            .or_else(|| self.endpoint_ids().next())
    }

    /// How much it holds, for tests.
    pub fn sizes(&self) -> LocalSizes {
        LocalSizes {
            devices: self.devices.len(),
            ports: self.ports.len(),
            endpoints: self.endpoints.len(),
            addresses: self.addresses.len(),
            distinct_addresses: self.by_address.len(),
        }
    }
}
