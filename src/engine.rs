//! The provider's state and its request path:
//! request → parse → lookup → resolve → path → reply.
//!
//! Everything here is safe Rust. The boundary turns the daemon's pointers
//! into the ids and values used here. Engine methods never send anything
//! themselves: replies and datagrams are collected as [`Effects`], which the
//! caller performs after releasing the engine's lock, so no daemon lock is
//! ever taken while the engine is held.

use crate::addr::{Address, Gid};
use crate::cache::{Cache, Entry, Lookup};
use crate::config::Config;
use crate::fastmap::Map;
use crate::host::{Counter, Host, COUNTERS};
use crate::hosts::Hosts;
use crate::msg::{self, MsgBuf, Rejected, ResolveRequest, Target};
use crate::path::{self, Dest, PathRecord, PATH_RECORD_LEN};
use crate::resolver::{Resolver, Waiter};
use acm_prov_sys::{
    ACM_STATUS_EDESTADDR, ACM_STATUS_EINVAL, ACM_STATUS_ENODATA, ACM_STATUS_ENOMEM,
    ACM_STATUS_ENOTCONN, ACM_STATUS_ESRCADDR, ACM_STATUS_SUCCESS,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Handle of a device, port, endpoint or address; never zero, so the
/// boundary can give it to the daemon as a non-NULL context.
pub type Id = u64;

/// `IBV_EVENT_CLIENT_REREGISTER`, the only event the daemon forwards.
pub const EVENT_CLIENT_REREGISTER: acm_prov_sys::ibv_event_type =
    acm_prov_sys::ibv_event_type_IBV_EVENT_CLIENT_REREGISTER;

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

pub(crate) struct Port {
    pub(crate) device: Id,
    pub(crate) info: PortInfo,
    pub(crate) endpoints: Vec<Id>,
}

pub(crate) struct Endpoint {
    pub(crate) port: Id,
    pub(crate) pkey: u16,
    pub(crate) addresses: Vec<Id>,
}

pub(crate) struct LocalAddress {
    pub(crate) endpoint: Id,
    pub(crate) address: Address,
}

/// The reply a request gets; the boundary sends it exactly once.
#[derive(Debug, PartialEq)]
pub struct Reply(pub MsgBuf);

/// A reply to send to the daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub id: u64,
    pub msg: MsgBuf,
    /// Answers a `query` (acm_query_response) rather than a `resolve`.
    pub query: bool,
}

/// A discovery datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram {
    /// To one host; `from` pins the source address (replies to unicast
    /// queries must come from the queried address).
    Unicast {
        to: SocketAddr,
        from: Option<IpAddr>,
        bytes: Vec<u8>,
    },
    /// To the discovery groups on every interface.
    Multicast { bytes: Vec<u8> },
}

/// Work the caller performs once it has released the engine.
#[derive(Debug, Default)]
pub struct Effects {
    pub replies: Vec<Outgoing>,
    pub datagrams: Vec<Datagram>,
    /// The worker thread has something to do before its next deadline.
    pub wake: bool,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.datagrams.is_empty() && !self.wake
    }
}

/// Discovery datagrams dropped, by reason; each drop is also logged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DropCounts {
    pub malformed: u64,
    pub unsolicited: u64,
    pub wrong_source: u64,
    pub own: u64,
    /// Without a valid MAC of a known key (authentication on).
    pub unauthenticated: u64,
    /// Verified, but seen before or outside the time window.
    pub replayed: u64,
    /// Queries left unanswered by the per-source reply limit.
    pub rate_limited: u64,
}

impl DropCounts {
    pub fn total(&self) -> u64 {
        self.malformed
            + self.unsolicited
            + self.wrong_source
            + self.own
            + self.unauthenticated
            + self.replayed
            + self.rate_limited
    }
}

impl std::fmt::Display for DropCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (malformed {}, unsolicited {}, wrong source {}, own {}, unauthenticated {}, \
             replayed {}, rate-limited {})",
            self.total(),
            self.malformed,
            self.unsolicited,
            self.wrong_source,
            self.own,
            self.unauthenticated,
            self.replayed,
            self.rate_limited
        )
    }
}

/// A destination, looked up in what is known right now.
pub(crate) enum Found {
    At(Dest),
    NotInPartition,
    Unknown,
}

pub struct Engine<H: Host> {
    pub(crate) host: H,
    pub(crate) cfg: Config,
    /// Shared so that a reload can compare the old file with the new one
    /// off the daemon's event loop and without the engine's lock.
    hosts: std::sync::Arc<Hosts>,
    devices: Map<Id, u64>,
    device_by_guid: Map<u64, Id>,
    pub(crate) ports: Map<Id, Port>,
    pub(crate) endpoints: Map<Id, Endpoint>,
    pub(crate) addresses: Map<Id, LocalAddress>,
    /// This daemon's own endpoint addresses, for local destinations.
    pub(crate) local: Map<Address, Vec<Id>>,
    pub(crate) cache: Cache,
    pub(crate) resolver: Resolver,
    pub(crate) effects: Effects,
    /// Set by the boundary once the discovery sockets are open.
    pub(crate) discovery_up: bool,
    /// When this host's endpoints are announced next.
    pub(crate) announce_at: Vec<Instant>,
    /// Addresses to withdraw, per endpoint record (GID, LID, MTU, rate,
    /// P_Key), and when.
    pub(crate) withdrawals: Vec<(crate::discovery::RecordKey, crate::discovery::Pending)>,
    pub(crate) withdraw_at: Option<Instant>,
    /// Announcements and withdrawals waiting to leave, paced.
    pub(crate) announcements: std::collections::VecDeque<Vec<u8>>,
    /// When the next batch of them may leave.
    pub(crate) announcements_at: Instant,
    pub(crate) drops: DropCounts,
    /// What the last drop summary in the log said, and when.
    pub(crate) drops_logged: crate::discovery::Summary<DropCounts>,
    /// Hints not checked because [`crate::resolver::MAX_CHECKS`] checks
    /// were in flight.
    pub(crate) checks_skipped: u64,
    /// Name lookups left unanswered because hosts with different GIDs
    /// confirmed the name.
    pub(crate) conflicts: u64,
    /// What the last summary of tables at their bounds said, and when.
    pub(crate) limits_logged: crate::discovery::Summary<[u64; 5]>,
    /// When the tables are swept of what expired next.
    pub(crate) next_sweep: Instant,
    /// Seals and opens discovery datagrams when authentication is on.
    pub(crate) auth: Option<crate::auth::Auth>,
    pub(crate) reply_limit: crate::ratelimit::RateLimiter,
    /// Counters per endpoint. Every request bumps two or three, and
    /// endpoints are few: a short scan costs less than hashing each time.
    counters: Vec<(Id, [u64; COUNTERS])>,
    /// The address context of the last request, its endpoint and the slot
    /// of that endpoint's counters (see [`Engine::source`]). Forgotten
    /// whenever an address is removed or the counters move.
    last_source: Option<(Id, Id, usize)>,
    next_id: Id,
}

impl<H: Host> Engine<H> {
    pub fn new(host: H, cfg: Config, hosts: Hosts) -> Self {
        let (cache_size, max_learned, max_lookups) =
            (cfg.max_cached, cfg.max_learned, cfg.max_lookups);
        Engine {
            reply_limit: crate::ratelimit::RateLimiter::new(cfg.reply_rate),
            host,
            cfg,
            hosts: std::sync::Arc::new(hosts),
            devices: Map::default(),
            device_by_guid: Map::default(),
            ports: Map::default(),
            endpoints: Map::default(),
            addresses: Map::default(),
            local: Map::default(),
            cache: Cache::new(cache_size),
            resolver: Resolver::new(max_learned, max_lookups),
            effects: Effects::default(),
            discovery_up: false,
            announce_at: Vec::new(),
            withdrawals: Vec::new(),
            withdraw_at: None,
            announcements: std::collections::VecDeque::new(),
            announcements_at: Instant::now(),
            drops: DropCounts::default(),
            drops_logged: Default::default(),
            checks_skipped: 0,
            conflicts: 0,
            limits_logged: Default::default(),
            next_sweep: Instant::now(),
            auth: None,
            counters: Vec::new(),
            last_source: None,
            next_id: 1,
        }
    }

    pub fn host(&self) -> &H {
        &self.host
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether there is anything for [`Engine::take_effects`].
    pub fn effects_pending(&self) -> bool {
        !self.effects.is_empty()
    }

    /// Replies and datagrams produced since the last call.
    pub fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    /// The replies produced since the last call, and whether the worker
    /// has something to do (datagrams to send, a new deadline): what the
    /// daemon's thread takes. Datagrams stay for the worker, which alone
    /// sends, so they leave in the order they were made.
    pub fn take_replies(&mut self) -> Effects {
        let wake = self.effects.wake || !self.effects.datagrams.is_empty();
        self.effects.wake = false;
        Effects {
            replies: std::mem::take(&mut self.effects.replies),
            datagrams: Vec::new(),
            wake,
        }
    }

    fn new_id(&mut self) -> Id {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Idempotent per GUID: the daemon opens a device again after a failed
    /// `open_port` without closing it first.
    pub fn open_device(&mut self, guid: u64) -> Id {
        if let Some(&id) = self.device_by_guid.get(&guid) {
            return id;
        }
        let id = self.new_id();
        self.devices.insert(id, guid);
        self.device_by_guid.insert(guid, id);
        log::debug!("device {guid:#018x} opened");
        id
    }

    pub fn close_device(&mut self, dev: Id) {
        let ports: Vec<Id> = self
            .ports
            .iter()
            .filter(|(_, p)| p.device == dev)
            .map(|(&id, _)| id)
            .collect();
        for p in ports {
            self.close_port(p);
        }
        if let Some(guid) = self.devices.remove(&dev) {
            self.device_by_guid.remove(&guid);
            log::debug!("device {guid:#018x} closed");
        }
    }

    pub fn open_port(&mut self, dev: Id, info: PortInfo) -> Result<Id, Refused> {
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
            path::port_rate(info.active_width, info.active_speed).unwrap_or(0)
        );
        let id = self.new_id();
        self.ports.insert(
            id,
            Port {
                device: dev,
                info,
                endpoints: Vec::new(),
            },
        );
        // Paths to this host's own addresses may now lead elsewhere.
        self.cache.flush_all();
        self.schedule_announce(Instant::now());
        Ok(id)
    }

    pub fn close_port(&mut self, port: Id) {
        let Some(p) = self.ports.get(&port) else {
            return;
        };
        for ep in p.endpoints.clone() {
            self.close_endpoint(ep);
        }
        if let Some(p) = self.ports.remove(&port) {
            log::debug!("port {} closed", p.info.port_num);
        }
        self.cache.flush_all();
    }

    pub fn open_endpoint(&mut self, port: Id, pkey: u16) -> Option<Id> {
        let id = self.new_id();
        let p = self.ports.get_mut(&port)?;
        p.endpoints.push(id);
        self.endpoints.insert(
            id,
            Endpoint {
                port,
                pkey,
                addresses: Vec::new(),
            },
        );
        log::debug!("port {} endpoint pkey {pkey:#06x} opened", p.info.port_num);
        self.counters.push((id, [0; COUNTERS]));
        Some(id)
    }

    /// Closing an endpoint answers every request still waiting on it: its
    /// port is going down.
    pub fn close_endpoint(&mut self, ep: Id) {
        let Some(e) = self.endpoints.get(&ep) else {
            return;
        };
        let addresses = e.addresses.clone();
        self.withdraw(ep, None);
        for a in addresses {
            self.forget_address(a);
        }
        self.abandon_waiters(ep, ACM_STATUS_ENOTCONN as u8);
        if let Some(e) = self.endpoints.remove(&ep) {
            if let Some(p) = self.ports.get_mut(&e.port) {
                p.endpoints.retain(|&x| x != ep);
            }
        }
        self.counters.retain(|(id, _)| *id != ep);
        self.last_source = None;
        self.cache.flush_endpoint(ep);
    }

    /// Adds one of this host's addresses. The daemon may add an address it
    /// already has (after a netlink overrun); that returns a fresh handle.
    pub fn add_address(&mut self, ep: Id, address: Address) -> Option<Id> {
        let id = self.new_id();
        let e = self.endpoints.get_mut(&ep)?;
        e.addresses.push(id);
        log::debug!("endpoint pkey {:#06x}: address {address}", e.pkey);
        self.local.entry(address.clone()).or_default().push(id);
        self.addresses.insert(
            id,
            LocalAddress {
                endpoint: ep,
                address,
            },
        );
        self.cache.flush_all();
        self.schedule_announce(Instant::now());
        Some(id)
    }

    pub fn remove_address(&mut self, addr: Id) {
        if let Some(a) = self.addresses.get(&addr) {
            let (ep, address) = (a.endpoint, a.address.clone());
            self.withdraw(ep, Some(&address));
        }
        self.forget_address(addr);
    }

    fn forget_address(&mut self, addr: Id) {
        let Some(a) = self.addresses.remove(&addr) else {
            return;
        };
        self.last_source = None;
        if let Some(ids) = self.local.get_mut(&a.address) {
            ids.retain(|&x| x != addr);
            if ids.is_empty() {
                self.local.remove(&a.address);
            }
        }
        if let Some(e) = self.endpoints.get_mut(&a.endpoint) {
            e.addresses.retain(|&x| x != addr);
        }
        log::debug!("address {} removed", a.address);
        self.cache.flush_all();
    }

    pub fn handle_event(&mut self, port: Id, event: u32) {
        let Some(p) = self.ports.get(&port) else {
            return;
        };
        if event == EVENT_CLIENT_REREGISTER {
            let n: usize = p
                .endpoints
                .iter()
                .map(|&ep| self.cache.flush_endpoint(ep))
                .sum();
            log::debug!(
                "port {}: client reregister, {n} cached destinations flushed",
                p.info.port_num
            );
        } else {
            log::trace!("port {}: event {event} ignored", p.info.port_num);
        }
    }

    /// The seven `ACM_CNTR_*` counters of an endpoint, host order.
    pub fn counters(&self, ep: Id) -> Option<[u64; COUNTERS]> {
        self.counters
            .iter()
            .find(|(id, _)| *id == ep)
            .map(|(_, c)| *c)
    }

    pub(crate) fn count(&mut self, ep: Id, c: Counter) {
        let slot = self.counter_slot(ep);
        self.bump(slot, c);
    }

    /// Where the counters of `ep` are; out of range if nowhere.
    fn counter_slot(&self, ep: Id) -> usize {
        self.counters
            .iter()
            .position(|(id, _)| *id == ep)
            .unwrap_or(usize::MAX)
    }

    /// [`Engine::count`] on the counters at `slot`, already found.
    #[inline]
    fn bump(&mut self, slot: usize, c: Counter) {
        if let Some((_, counters)) = self.counters.get_mut(slot) {
            counters[c as usize] += 1;
        }
        if matches!(
            c,
            Counter::AddrQuery | Counter::AddrCache | Counter::RouteQuery | Counter::RouteCache
        ) {
            self.host.increment_counter(c);
        }
    }

    /// Counts a reply's status the way `ib_acme -P` reports it.
    pub(crate) fn count_status(&mut self, ep: Id, status: u8) {
        match u32::from(status) {
            ACM_STATUS_SUCCESS => {}
            ACM_STATUS_ENODATA => self.count(ep, Counter::NoData),
            _ => self.count(ep, Counter::Error),
        }
    }

    /// The endpoint of the address context `addr`, and where its counters
    /// are: found once per request, for the two or three it bumps, and kept
    /// for the next request, which mostly comes from the same address (the
    /// lookups were a tenth of a cache hit).
    #[inline]
    fn source(&mut self, addr: Id) -> Option<(Id, usize)> {
        match self.last_source {
            Some((a, ep, slot)) if a == addr => Some((ep, slot)),
            _ => {
                let ep = self.addresses.get(&addr)?.endpoint;
                let slot = self.counter_slot(ep);
                self.last_source = Some((addr, ep, slot));
                Some((ep, slot))
            }
        }
    }

    /// Handles a `resolve` made on behalf of the local address `addr`.
    /// `None`: the request waits for a lookup and is answered later through
    /// [`Effects`].
    pub fn resolve(&mut self, addr: Id, req: &MsgBuf, id: u64) -> Option<MsgBuf> {
        let mut msg = req.clone();
        self.resolve_in_place(addr, &mut msg, id).then_some(msg)
    }

    /// [`Engine::resolve`] without copies: `msg` is the request and, when
    /// this returns true, the reply to send. False: a lookup holds a copy of
    /// the request and answers it later.
    ///
    /// Inlined into the daemon's callback, its one caller there: one call
    /// frame less per request.
    #[inline]
    pub fn resolve_in_place(&mut self, addr: Id, msg: &mut MsgBuf, id: u64) -> bool {
        let Some((ep, slot)) = self.source(addr) else {
            log::error!("resolve for an address context this provider does not know");
            msg.make_resolve_error(ACM_STATUS_ESRCADDR as u8);
            return true;
        };
        self.bump(slot, Counter::Resolve);
        let now = Instant::now();
        let parsed = ResolveRequest::parse(msg);
        // Most requests: an address whose path is cached. Its encoding goes
        // from the entry straight into the reply (a success: nothing for
        // count_status to count). Read where the parser left it: moving the
        // request out first copied all of it.
        if let Ok(ResolveRequest {
            target: Target::Address(a),
            echo_source,
            ..
        }) = &parsed
        {
            if let Some(e) = self.cache.hit_entry(ep, *a, now) {
                msg.make_resolve_success(&e.wire, *echo_source);
                self.bump(slot, Counter::RouteCache);
                return true;
            }
        }
        match parsed {
            Ok(r) => match (r.echo_source, self.route(ep, r, Some((id, msg)), now)) {
                (echo, Ok(Some(wire))) => msg.make_resolve_success(&wire, echo),
                (_, Ok(None)) => return false,
                (_, Err(e)) => {
                    log::trace!("resolve tid {:#x}: {}", msg.tid(), e.why);
                    msg.make_resolve_error(e.status);
                }
            },
            Err(e) => {
                log::warn!("malformed resolve request: {}", e.why);
                msg.make_resolve_error(e.status);
            }
        }
        self.count_status(ep, msg.status());
        true
    }

    /// Handles a `query` (`ib_acme -v`): there is no SA to ask, so the
    /// record is checked against what this provider would build.
    pub fn query(&mut self, addr: Id, req: &MsgBuf) -> Reply {
        let Some((ep, slot)) = self.source(addr) else {
            log::error!("query for an address context this provider does not know");
            return Reply(msg::query_reply(req, ACM_STATUS_ESRCADDR as u8, None));
        };
        self.bump(slot, Counter::Resolve);
        let reply = match msg::parse_query(req) {
            Ok(want) => {
                let request = ResolveRequest {
                    target: Target::Path(want),
                    echo_source: None,
                    nodelay: true,
                };
                match self.route(ep, request, None, Instant::now()) {
                    Ok(Some(wire)) => match PathRecord::decode(&wire).satisfies(&want) {
                        Ok(()) => msg::query_reply(req, ACM_STATUS_SUCCESS as u8, Some(&wire)),
                        Err(field) => {
                            log::trace!(
                                "query tid {:#x}: {field} differs from the path this provider builds",
                                req.tid()
                            );
                            msg::query_reply(req, ACM_STATUS_EINVAL as u8, None)
                        }
                    },
                    Ok(None) => msg::query_reply(req, ACM_STATUS_ENODATA as u8, None),
                    Err(e) => msg::query_reply(req, e.status, None),
                }
            }
            Err(e) => {
                log::warn!("malformed query request: {}", e.why);
                msg::query_reply(req, e.status, None)
            }
        };
        self.count_status(ep, reply.status());
        Reply(reply)
    }

    /// Finds (or builds and caches) the path from endpoint `ep` to the
    /// request's destination. `Ok(None)`: a lookup now holds the request
    /// (`waiter`: its daemon id and message, copied only if it must wait).
    fn route(
        &mut self,
        ep: Id,
        req: ResolveRequest,
        waiter: Option<(u64, &MsgBuf)>,
        now: Instant,
    ) -> Result<Option<[u8; PATH_RECORD_LEN]>, Rejected> {
        let (key, want) = match req.target {
            Target::Address(a) => (a.to_address(), None),
            Target::Path(p) if !p.dgid.is_zero() => (Address::Gid(p.dgid), Some(p)),
            Target::Path(p) => (Address::Lid(p.dlid), Some(p)),
        };
        let (mut path, wire) = match self.cache.lookup(ep, &key, now) {
            Lookup::Route(p, wire) => {
                self.count(ep, Counter::RouteCache);
                (p, wire)
            }
            Lookup::Address(dest) => {
                self.count(ep, Counter::AddrCache);
                self.build_and_cache(ep, key, dest, now)?
            }
            Lookup::Miss => {
                self.count(ep, Counter::AddrQuery);
                match self.find(ep, &key, now) {
                    Found::At(dest) => self.build_and_cache(ep, key, dest, now)?,
                    Found::NotInPartition => {
                        return Err(Rejected {
                            status: ACM_STATUS_ENODATA as u8,
                            why: format!("{key} is not in partition of the source endpoint"),
                        })
                    }
                    Found::Unknown => {
                        if let Some(status) = self.resolver.failure(&key, now) {
                            return Err(Rejected {
                                status,
                                why: format!("{key} failed recently"),
                            });
                        }
                        if !self.can_look_up(&key) {
                            return Err(Rejected {
                                status: ACM_STATUS_ENODATA as u8,
                                why: format!("{key} is unknown"),
                            });
                        }
                        if !self.lookup_room(&key) {
                            return Err(Rejected {
                                status: ACM_STATUS_ENOMEM as u8,
                                why: format!("{key}: too many lookups in flight"),
                            });
                        }
                        // NODELAY: start the lookup for next time, answer now.
                        let waiter = waiter.filter(|_| !req.nodelay).map(|(id, m)| Waiter {
                            endpoint: ep,
                            id,
                            request: m.clone(),
                            echo_source: req.echo_source,
                        });
                        let waits = waiter.is_some();
                        self.start_lookup(ep, key.clone(), waiter, now);
                        if waits {
                            return Ok(None);
                        }
                        return Err(Rejected {
                            status: ACM_STATUS_ENODATA as u8,
                            why: format!("{key} is not cached; lookup started"),
                        });
                    }
                }
            }
        };
        // An address's path goes out as cached; a path request's record is
        // completed with the fields it asked for.
        let Some(want) = want else {
            return Ok(Some(wire));
        };
        {
            path.service_id = want.service_id;
            if want.tclass != 0 {
                path.tclass = want.tclass;
            }
            // A source GID other than GID 0 of the same port is honoured.
            let port = &self.ports[&self.endpoints[&ep].port];
            if !want.sgid.is_zero() && port.info.gids.contains(&want.sgid) {
                path.sgid = want.sgid;
            }
        }
        Ok(Some(path.encode()))
    }

    pub(crate) fn build_and_cache(
        &mut self,
        ep: Id,
        key: Address,
        dest: Dest,
        now: Instant,
    ) -> Result<(PathRecord, [u8; PATH_RECORD_LEN]), Rejected> {
        self.count(ep, Counter::RouteQuery);
        let path = self.build_path(ep, dest)?;
        let entry = Entry::new(
            path,
            dest,
            self.cfg.addr_timeout.duration().map(|d| now + d),
            self.cfg.route_timeout.duration().map(|d| now + d),
        );
        let wire = entry.wire;
        self.cache.insert(ep, key, entry);
        Ok((path, wire))
    }

    /// Where a destination is: this host's own addresses and ports first
    /// (preferring the source's partition), then the hosts file, then what
    /// discovery learned.
    pub(crate) fn find(&mut self, ep: Id, dest: &Address, now: Instant) -> Found {
        let Some(pkey) = self.endpoints.get(&ep).map(|e| e.pkey) else {
            return Found::Unknown;
        };
        let at = |gid: Gid, lid: u16| {
            Found::At(Dest {
                gid,
                lid,
                mtu: None,
                rate: None,
            })
        };
        let local = match dest {
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
            a => self.local.get(a).and_then(|ids| {
                let mut ports: Vec<_> = ids
                    .iter()
                    .map(|id| {
                        let e = &self.endpoints[&self.addresses[id].endpoint];
                        (e.pkey & 0x7fff == pkey & 0x7fff, &self.ports[&e.port].info)
                    })
                    .collect();
                ports.sort_by_key(|(same_pkey, _)| !same_pkey);
                ports.first().map(|(_, i)| (i.gids[0], i.lid))
            }),
        };
        if let Some((gid, lid)) = local.or_else(|| self.hosts.lookup(dest).map(|r| (r.gid, r.lid)))
        {
            return at(gid, lid);
        }
        match self.resolver.learned(dest, now) {
            Some(l) if !l.in_partition(pkey) => Found::NotInPartition,
            Some(l) => Found::At(Dest {
                gid: l.gid,
                lid: l.lid,
                mtu: l.mtu,
                rate: l.rate,
            }),
            None => Found::Unknown,
        }
    }

    /// The MTU and rate this host offers on a port.
    pub(crate) fn port_mtu_rate(&self, port: &PortInfo) -> (u8, u8) {
        let cfg_mtu = path::mtu_enum(self.cfg.mtu).unwrap_or(5);
        let mtu = match port.active_mtu {
            0 => cfg_mtu,
            m => m.min(cfg_mtu),
        };
        let rate = path::port_rate(port.active_width, port.active_speed)
            .or_else(|| path::rate_enum_x10(self.cfg.rate_gbps * 10))
            .unwrap_or(3);
        (mtu, rate)
    }

    fn build_path(&self, ep: Id, dest: Dest) -> Result<PathRecord, Rejected> {
        let e = self.endpoints.get(&ep).ok_or_else(|| Rejected {
            status: ACM_STATUS_ESRCADDR as u8,
            why: "source endpoint is gone".into(),
        })?;
        let port = &self.ports[&e.port].info;
        let (mut mtu, mut rate) = self.port_mtu_rate(port);
        // A remote port that told us its MTU and rate bounds the path too.
        if let Some(m) = dest.mtu {
            mtu = mtu.min(m);
        }
        if let Some(r) = dest.rate {
            rate = path::min_rate(rate, r);
        }
        if path::rate_x10(rate).is_none() {
            return Err(Rejected {
                status: ACM_STATUS_EDESTADDR as u8,
                why: "no usable rate".into(),
            });
        }
        Ok(PathRecord {
            service_id: 0,
            dgid: dest.gid,
            sgid: port.gids[0],
            dlid: dest.lid,
            slid: port.lid,
            flow_label: 0,
            hop_limit: self.cfg.hop_limit,
            tclass: self.cfg.tclass,
            reversible: true,
            pkey: e.pkey,
            sl: self.cfg.sl,
            mtu,
            rate,
            packet_lifetime: self.cfg.packet_lifetime,
        })
    }

    /// Entries in the destination cache, for tests and statistics.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    pub fn drops(&self) -> &DropCounts {
        &self.drops
    }

    /// The hosts file in force.
    pub fn hosts(&self) -> std::sync::Arc<Hosts> {
        self.hosts.clone()
    }

    /// Puts a new version of the hosts file in force. `changed` (from
    /// [`Hosts::changes`]) leave the destination cache and the memory of
    /// failed lookups, so they resolve by the new file at the next request.
    pub fn replace_hosts(&mut self, hosts: std::sync::Arc<Hosts>, changed: &[Address]) {
        self.hosts = hosts;
        // A whole new file changes more than is cached: then forgetting
        // everything is cheaper than a removal per address, and only costs
        // rebuilding paths (failed lookups are asked again).
        if changed.len() > self.cache.len() + self.resolver.failed.len() {
            self.cache.flush_all();
            self.resolver.failed.clear();
            return;
        }
        for a in changed {
            self.cache.evict(a);
            self.resolver.failed.remove(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Lifetime;
    use crate::host::FakeHost;
    use crate::msg::tests::{addr_entry, request};
    use crate::msg::Entry;
    use acm_prov_sys::{
        ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_EP_FLAG_SOURCE,
        ACM_EP_INFO_PATH, ACM_FLAGS_NODELAY, ACM_FLAGS_QUERY_SA,
    };

    const GID0: &str = "fe80::5054:ff:fe12:3456";
    const GID1: &str = "fe80::5054:ff:fe12:3457";
    const REMOTE: &str = "fe80::5054:ff:fe12:9999";

    fn port(gid: &str) -> PortInfo {
        PortInfo::infiniband(1, gid.parse().unwrap())
    }

    struct Fixture {
        e: Engine<FakeHost>,
        /// Address contexts of 10.0.0.1 and node1 on urdma0.
        ip: Id,
        name: Id,
        ep: Id,
        port: Id,
    }

    fn fixture_with(cfg: Config, port0: PortInfo) -> Fixture {
        let hosts = "node3 fe80::5054:ff:fe12:9999 lid=9\n10.0.0.3 fe80::5054:ff:fe12:9999\nfd00::3 fe80::5054:ff:fe12:9999\n";
        let (hosts, d) = Hosts::parse(hosts, "hosts");
        assert!(d.is_empty());
        let mut e = Engine::new(FakeHost::default(), cfg, hosts);
        let dev = e.open_device(0x505400fffe123456);
        let port0 = e.open_port(dev, port0).unwrap();
        let ep = e.open_endpoint(port0, 0xffff).unwrap();
        let ip = e
            .add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
            .unwrap();
        let name = e.add_address(ep, Address::name("node1").unwrap()).unwrap();
        let dev1 = e.open_device(0x505400fffe123457);
        let port1 = e.open_port(dev1, port(GID1)).unwrap();
        let ep1 = e.open_endpoint(port1, 0xffff).unwrap();
        e.add_address(ep1, Address::Ip4([10, 0, 1, 1].into()))
            .unwrap();
        Fixture {
            e,
            ip,
            name,
            ep,
            port: port0,
        }
    }

    fn fixture() -> Fixture {
        fixture_with(Config::default(), port(GID0))
    }

    fn dest(kind: u16, bytes: &[u8]) -> Entry {
        addr_entry(ACM_EP_FLAG_DEST, kind, bytes)
    }

    fn path_req(path: PathRecord, flags: u32) -> MsgBuf {
        let mut info = [0; 64];
        info.copy_from_slice(&path.encode());
        request(
            &[Entry {
                flags,
                kind: ACM_EP_INFO_PATH as u16,
                info,
            }],
            false,
            5,
        )
    }

    /// A resolve that must be answered at once (no lookup involved).
    fn res(e: &mut Engine<FakeHost>, addr: Id, req: &MsgBuf) -> Reply {
        Reply(e.resolve(addr, req, 1).expect("answered at once"))
    }

    fn reply_path(r: &Reply) -> PathRecord {
        assert_eq!(r.0.status(), 0, "status");
        assert_eq!(r.0.entry(0).flags, 0x2B);
        PathRecord::decode(r.0.entry(0).info.first_chunk().unwrap())
    }

    #[test]
    fn own_address_resolves_locally_with_sgid_equal_dgid() {
        let mut f = fixture();
        let r = res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_NAME, b"NODE1")], false, 9),
        );
        let p = reply_path(&r);
        assert_eq!(r.0.tid(), 9);
        assert_eq!(p.sgid, GID0.parse().unwrap());
        assert_eq!(p.dgid, p.sgid);
        assert_eq!(
            (p.pkey, p.mtu, p.rate, p.packet_lifetime),
            (0xffff, 5, 16, 18)
        );
        assert!(p.reversible);
    }

    #[test]
    fn another_local_port_is_reached_at_its_own_gid() {
        let mut f = fixture();
        let r = res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_IP, &[10, 0, 1, 1])], false, 1),
        );
        let p = reply_path(&r);
        assert_eq!(
            (p.sgid, p.dgid),
            (GID0.parse().unwrap(), GID1.parse().unwrap())
        );
    }

    #[test]
    fn hosts_file_destinations_of_every_type() {
        let mut f = fixture();
        let remote: Gid = REMOTE.parse().unwrap();
        for req in [
            request(&[dest(ACM_ADDRESS_IP, &[10, 0, 0, 3])], false, 1),
            request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
            request(
                &[dest(
                    ACM_ADDRESS_IP6,
                    &"fd00::3".parse::<std::net::Ipv6Addr>().unwrap().octets(),
                )],
                false,
                1,
            ),
            path_req(
                PathRecord {
                    dgid: remote,
                    ..Default::default()
                },
                ACM_EP_FLAG_DEST,
            ),
            path_req(
                PathRecord {
                    dlid: 9,
                    ..Default::default()
                },
                ACM_EP_FLAG_DEST,
            ),
        ] {
            let p = reply_path(&res(&mut f.e, f.ip, &req));
            assert_eq!(p.dgid, remote);
            assert_eq!(p.dlid, 9, "the LID from the hosts file");
        }
    }

    #[test]
    fn kernel_path_requests_keep_service_id_and_tclass() {
        let mut f = fixture();
        let want = PathRecord {
            service_id: 0x1_0000_0106,
            dgid: REMOTE.parse().unwrap(),
            tclass: 32,
            ..Default::default()
        };
        let p = reply_path(&res(&mut f.e, f.ip, &path_req(want, ACM_EP_FLAG_DEST)));
        assert_eq!((p.service_id, p.tclass), (0x1_0000_0106, 32));
    }

    #[test]
    fn unknown_destination_is_enodata_at_once_and_counted() {
        let mut f = fixture();
        let r = res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_IP, &[10, 9, 9, 9])], false, 3),
        );
        assert_eq!((r.0.status(), r.0.length(), r.0.tid()), (3, 16, 3));
        let c = f.e.counters(f.ep).unwrap();
        assert_eq!(
            (
                c[Counter::Resolve as usize],
                c[Counter::NoData as usize],
                c[Counter::Error as usize]
            ),
            (1, 1, 0)
        );
        let lid = path_req(
            PathRecord {
                dlid: 77,
                ..Default::default()
            },
            ACM_EP_FLAG_DEST,
        );
        assert_eq!(res(&mut f.e, f.ip, &lid).0.status(), 3);
    }

    #[test]
    fn nodelay_answers_from_static_data_without_waiting() {
        let mut f = fixture();
        let r = res(
            &mut f.e,
            f.ip,
            &request(
                &[addr_entry(
                    ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY,
                    ACM_ADDRESS_NAME,
                    b"node3",
                )],
                false,
                1,
            ),
        );
        assert_eq!(reply_path(&r).dgid, REMOTE.parse().unwrap());
        let r = res(
            &mut f.e,
            f.ip,
            &request(
                &[addr_entry(
                    ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY,
                    ACM_ADDRESS_NAME,
                    b"nobody",
                )],
                false,
                1,
            ),
        );
        assert_eq!(r.0.status(), 3);
    }

    #[test]
    fn the_source_the_daemon_chose_is_echoed() {
        let mut f = fixture();
        let req = request(
            &[
                dest(ACM_ADDRESS_IP, &[10, 0, 0, 3]),
                addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP, &[10, 0, 0, 1]),
            ],
            true,
            1,
        );
        let r = res(&mut f.e, f.ip, &req);
        assert_eq!(r.0.length(), 16 + 2 * 72);
        assert_eq!(
            (r.0.entry(1).flags, r.0.entry(1).kind),
            (ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP)
        );
        assert_eq!(&r.0.entry(1).info[..4], &[10, 0, 0, 1]);
        // A client that named its source does not get it back.
        let mut quiet = req.clone();
        quiet.0[3] = 0;
        assert_eq!(res(&mut f.e, f.ip, &quiet).0.length(), 16 + 72);
    }

    #[test]
    fn counters_follow_cache_hits_and_reach_the_daemon() {
        let mut f = fixture();
        let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
        res(&mut f.e, f.name, &req);
        res(&mut f.e, f.name, &req);
        res(&mut f.e, f.name, &req);
        let c = f.e.counters(f.ep).unwrap();
        assert_eq!(c, [0, 3, 0, 1, 0, 1, 2]);
        assert_eq!(
            *f.e.host().counters.lock().unwrap(),
            vec![
                Counter::AddrQuery,
                Counter::RouteQuery,
                Counter::RouteCache,
                Counter::RouteCache
            ]
        );
        assert_eq!(f.e.cached(), 1);
    }

    #[test]
    fn requests_follow_their_source_address_as_it_comes_and_goes() {
        let mut f = fixture();
        let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
        let ep1 = f.e.counters.last().unwrap().0;
        let other =
            f.e.add_address(ep1, Address::Ip6("fd00::1".parse().unwrap()));
        let other = other.unwrap();
        for _ in 0..2 {
            assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
            assert_eq!(res(&mut f.e, f.ip, &req).0.status(), 0);
            assert_eq!(res(&mut f.e, f.ip, &req).0.status(), 0);
        }
        assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Resolve as usize], 4);
        assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 2);
        // Its endpoint's counters move when an endpoint before it closes
        // (one without addresses left, so no address is removed with it).
        f.e.remove_address(f.ip);
        f.e.remove_address(f.name);
        assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
        f.e.close_endpoint(f.ep);
        assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
        assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 4);
        // A removed address is unknown from then on.
        f.e.remove_address(other);
        let r = res(&mut f.e, other, &req);
        assert_eq!(r.0.status(), ACM_STATUS_ESRCADDR as u8);
        assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 4);
    }

    #[test]
    fn lifetimes_from_the_configuration() {
        let cfg = Config {
            addr_timeout: Lifetime::Never,
            route_timeout: Lifetime::Minutes(0),
            ..Config::default()
        };
        let mut f = fixture_with(cfg, port(GID0));
        let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
        res(&mut f.e, f.ip, &req);
        res(&mut f.e, f.ip, &req);
        // The route expires at once, the address never: one address query,
        // then address-cache hits that rebuild the route.
        assert_eq!(f.e.counters(f.ep).unwrap(), [0, 2, 0, 1, 1, 2, 0]);
    }

    #[test]
    fn mtu_and_rate_come_from_the_port_when_it_reports_them() {
        let cfg = Config {
            mtu: 2048,
            ..Config::default()
        };
        let mut p = port(GID0);
        (p.active_mtu, p.active_width, p.active_speed) = (5, 2, 128); // 4096, 4x NDR
        let mut f = fixture_with(cfg, p);
        let r = res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
        );
        let path = reply_path(&r);
        assert_eq!(
            (path.mtu, path.rate),
            (4, 21),
            "MTU capped by urdma_mtu; 400 Gb/s"
        );
        let cfg = Config {
            rate_gbps: 25,
            ..Config::default()
        };
        let mut p = port(GID0);
        p.active_mtu = 3;
        let mut f = fixture_with(cfg, p);
        let path = reply_path(&res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
        ));
        assert_eq!(
            (path.mtu, path.rate),
            (3, 15),
            "port MTU 1024; configured 25 Gb/s"
        );
    }

    #[test]
    fn devices_are_idempotent_and_bad_ports_refused() {
        let mut f = fixture();
        let dev = f.e.open_device(0x505400fffe123456);
        assert_eq!(dev, f.e.open_device(0x505400fffe123456));
        let mut eth = port(GID0);
        (eth.link_layer_ib, eth.link_layer) = (false, "Ethernet");
        assert_eq!(
            f.e.open_port(dev, eth),
            Err(Refused::NotInfiniband("Ethernet"))
        );
        assert_eq!(f.e.open_port(dev, port("::")), Err(Refused::NoGid));
        assert_eq!(f.e.open_port(999, port(GID0)), Err(Refused::UnknownDevice));
    }

    #[test]
    fn close_port_and_reregister_flush_the_cache() {
        let mut f = fixture();
        let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
        res(&mut f.e, f.ip, &req);
        assert_eq!(f.e.cached(), 1);
        f.e.handle_event(f.port, 10);
        assert_eq!(f.e.cached(), 1, "other events keep the cache");
        f.e.handle_event(f.port, EVENT_CLIENT_REREGISTER);
        assert_eq!(f.e.cached(), 0);
        res(&mut f.e, f.ip, &req);
        f.e.close_port(f.port);
        assert_eq!(f.e.cached(), 0);
        assert_eq!(f.e.counters(f.ep), None, "the port's endpoints are gone");
        let r = res(&mut f.e, f.ip, &req);
        assert_eq!(
            r.0.status(),
            ACM_STATUS_ESRCADDR as u8,
            "a stale context still gets one reply"
        );
    }

    #[test]
    fn query_verifies_against_the_path_this_provider_builds() {
        let mut f = fixture();
        let ours = reply_path(&res(
            &mut f.e,
            f.ip,
            &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
        ));
        let ok = f.e.query(f.ip, &path_req(ours, ACM_FLAGS_QUERY_SA));
        assert_eq!((ok.0.opcode(), ok.0.status(), ok.0.length()), (0x81, 0, 88));
        assert_eq!(
            PathRecord::decode(ok.0.entry(0).info.first_chunk().unwrap()),
            ours
        );
        let wrong = f.e.query(
            f.ip,
            &path_req(PathRecord { mtu: 1, ..ours }, ACM_FLAGS_QUERY_SA),
        );
        assert_eq!(wrong.0.status(), ACM_STATUS_EINVAL as u8);
        let unknown = f.e.query(
            f.ip,
            &path_req(
                PathRecord {
                    dgid: "fe80::77".parse().unwrap(),
                    ..ours
                },
                ACM_FLAGS_QUERY_SA,
            ),
        );
        assert_eq!(unknown.0.status(), ACM_STATUS_ENODATA as u8);
        let not_query = f.e.query(f.ip, &path_req(ours, 0));
        assert_eq!(not_query.0.status(), ACM_STATUS_EINVAL as u8);
        assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Error as usize], 2);
    }

    #[test]
    fn malformed_requests_get_one_error_reply() {
        let mut f = fixture();
        let mut m = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 42);
        m.0[6] = 17;
        let r = res(&mut f.e, f.ip, &m);
        assert_eq!((r.0.status(), r.0.tid()), (ACM_STATUS_EINVAL as u8, 42));
        assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Error as usize], 1);
    }
}
