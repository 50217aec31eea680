//! The request path, on the daemon's thread: request → parse → lookup
//! (destination cache, this host, the hosts file, what discovery learned)
//! → resolve (a lookup by discovery when nothing knows) → path → reply.
//! A request that must wait for a lookup is copied and answered when the
//! lookup's outcome arrives. [`Requests`] owns what the path keeps between
//! requests; the engine lends it the rest.

use super::cache::{Cache, CacheEntry, CacheLookup};
use super::counters::{Counters, Slot};
use super::waiters::Waiters;
use super::{Response, Waiter};
use crate::addr::Address;
use crate::config::hosts::Hosts;
use crate::config::Config;
use crate::daemon::{Counter, Daemon};
use crate::discovery::state::Learned;
use crate::discovery::{Binding, Discovery, Outcome, Refused, Resolution};
use crate::handle::{AddressId, EndpointId};
use crate::ib;
use crate::local::Local;
use crate::request::msg::{self, MsgBuf, Rejected, ResolveRequest, Target};
use crate::request::path::{Dest, PathRecord, PATH_RECORD_LEN};
use acm_prov_sys::{
    ACM_STATUS_EDESTADDR, ACM_STATUS_EINVAL, ACM_STATUS_ENODATA, ACM_STATUS_ENOMEM,
    ACM_STATUS_ENOTCONN, ACM_STATUS_ESRCADDR, ACM_STATUS_SUCCESS,
};
use std::time::Instant;

/// A destination, looked up in what is known right now.
enum Found {
    /// With, for a binding discovery learned, when it is to be confirmed
    /// again: the cache keeps it no longer, so the binding is looked at
    /// then (`urdma_reconfirm`).
    At(Dest, Option<Instant>),
    NotInPartition,
    /// Discovery's answer when it holds no binding for it: a failure
    /// remembered, a lookup started (or joined), or none possible.
    Failed(u8),
    LookingUp,
    Refused(Refused),
}

/// Where a binding learned by discovery leads.
fn dest_of(l: &Learned) -> Dest {
    Dest {
        gid: l.gid,
        lid: l.lid,
        mtu: l.mtu,
        rate: l.rate,
    }
}

/// Why no lookup of `key` could start, as the request is answered.
fn refused(key: &Address, why: Refused) -> Rejected {
    match why {
        Refused::Unknown => rejected(ACM_STATUS_ENODATA, format!("{key} is unknown")),
        Refused::Full => rejected(
            ACM_STATUS_ENOMEM,
            format!("{key}: too many lookups in flight"),
        ),
    }
}

fn rejected(status: u32, why: String) -> Rejected {
    Rejected {
        status: status as u8,
        why,
    }
}

/// The request path's own state: the destination cache, the requests
/// waiting for lookups, the daemon's counters per endpoint, and the
/// throttle of the log of malformed requests. What it reads besides
/// (this host, the hosts file, the options, discovery) is the engine's,
/// lent per request as [`Sources`]; the engine reaches into the cache and
/// the waiters for the changes it routes here (ports, addresses, reloads).
pub(super) struct Requests {
    pub cache: Cache,
    pub waiting: Waiters,
    pub counters: Counters,
    malformed_logged: crate::summary::Throttle,
}

/// What a request is answered from besides the request path's own state,
/// lent by the engine for one request (or one lookup's end).
pub(super) struct Sources<'a, D> {
    pub local: &'a Local,
    pub hosts: &'a Hosts,
    pub cfg: &'a Config,
    pub daemon: &'a D,
    /// Asked on a miss: it knows, or looks the destination up.
    pub discovery: &'a mut Discovery,
}

impl Requests {
    pub fn new(max_cached: usize) -> Requests {
        Requests {
            cache: Cache::new(max_cached),
            waiting: Waiters::default(),
            counters: Counters::default(),
            malformed_logged: Default::default(),
        }
    }

    /// The hot path of a `resolve`: a request from a known source for an
    /// address whose path is cached is answered in `msg`, as is one from
    /// an unknown source. `Some`: the request's endpoint and counters' slot,
    /// for [`Requests::resolve_miss`].
    ///
    /// `now` is not called for a hit on a fresh path (see the destination
    /// cache in `engine/cache.rs`): the clock is the largest cost a hit
    /// would have had.
    #[inline]
    pub fn resolve_hit<D: Daemon>(
        &mut self,
        addr: AddressId,
        msg: &mut MsgBuf,
        local: &Local,
        daemon: &D,
        now: &impl Fn() -> Instant,
    ) -> Option<(EndpointId, Slot)> {
        let Some((ep, slot)) = self.counters.source(addr, local) else {
            log::error!("resolve for an address context this provider does not know");
            msg.make_resolve_error(ACM_STATUS_ESRCADDR as u8);
            return None;
        };
        // Most requests: an address whose path is cached. Its encoding goes
        // from the entry straight into the reply (a success: nothing for
        // count_status to count). Nothing of this parse outlives the hit: the
        // rest parses again rather than have every hit keep the whole
        // request on its stack. The match keeps only the two fields a hit
        // uses: with `if let` on the whole `Result`, its drop made the
        // compiler spill the request to the stack (some 15 instructions a hit).
        let cached = match ResolveRequest::parse(msg) {
            Ok(ResolveRequest {
                target: Target::Address(a),
                echo_source,
                ..
            }) => Some((a, echo_source)),
            _ => None,
        };
        if let Some((a, echo_source)) = cached {
            if let Some(e) = self.cache.hit_entry(ep, a, now) {
                msg.make_resolve_success(&e.wire, echo_source);
                self.counters.tally_hit(slot, daemon);
                return None;
            }
        }
        Some((ep, slot))
    }

    /// A `resolve` that missed the cache ([`Requests::resolve_hit`]), from
    /// endpoint `ep`: true when `msg` is now its reply; false when a
    /// lookup holds a copy of it (daemon id `id`), answered later.
    pub fn resolve_miss<D: Daemon>(
        &mut self,
        (ep, slot): (EndpointId, Slot),
        msg: &mut MsgBuf,
        id: u64,
        now: Instant,
        s: &mut Sources<D>,
    ) -> bool {
        let parsed = ResolveRequest::parse(msg);
        self.counters.tally(slot, Counter::Resolve, s.daemon);
        match parsed {
            Ok(r) => match (r.echo_source, self.route(ep, r, Some((id, msg)), now, s)) {
                (echo, Ok(Some(wire))) => msg.make_resolve_success(&wire, echo),
                (_, Ok(None)) => return false,
                (_, Err(e)) => {
                    log::trace!("resolve tid {:#x}: {}", msg.tid(), e.why);
                    msg.make_resolve_error(e.status);
                }
            },
            Err(e) => {
                malformed(&mut self.malformed_logged, "resolve", &e.why, now);
                msg.make_resolve_error(e.status);
            }
        }
        self.counters.count_status(ep, msg.status(), s.daemon);
        true
    }

    /// Handles a `query` (`ib_acme -v`): there is no SA to ask, so the
    /// record is checked against what this provider would build.
    pub fn query<D: Daemon>(
        &mut self,
        addr: AddressId,
        req: &MsgBuf,
        now: Instant,
        s: &mut Sources<D>,
    ) -> Response {
        let Some((ep, slot)) = self.counters.source(addr, s.local) else {
            log::error!("query for an address context this provider does not know");
            return Response(msg::query_reply(req, ACM_STATUS_ESRCADDR as u8, None));
        };
        self.counters.tally(slot, Counter::Resolve, s.daemon);
        let reply = match msg::parse_query(req) {
            Ok(want) => {
                let request = ResolveRequest {
                    target: Target::Path(want),
                    echo_source: None,
                    nodelay: true,
                };
                match self.route(ep, request, None, now, s) {
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
                malformed(&mut self.malformed_logged, "query", &e.why, now);
                msg::query_reply(req, e.status, None)
            }
        };
        self.counters.count_status(ep, reply.status(), s.daemon);
        Response(reply)
    }

    /// Finds (or builds and caches) the path from endpoint `ep` to the
    /// request's destination. `Ok(None)`: a lookup now holds the request
    /// (`waiter`: its daemon id and message, copied only if it must wait).
    fn route<D: Daemon>(
        &mut self,
        ep: EndpointId,
        req: ResolveRequest,
        waiter: Option<(u64, &MsgBuf)>,
        now: Instant,
        s: &mut Sources<D>,
    ) -> Result<Option<[u8; PATH_RECORD_LEN]>, Rejected> {
        let (nodelay, echo_source) = (req.nodelay, req.echo_source);
        let (key, want) = match req.target {
            Target::Address(a) => (a.to_address(), None),
            Target::Path(p) if !p.dgid.is_zero() => (Address::Gid(p.dgid), Some(p)),
            Target::Path(p) => (Address::Lid(p.dlid), Some(p)),
        };
        let (mut path, wire) = match self.cache.lookup(ep, &key, now) {
            CacheLookup::Route(p, wire) => {
                self.counters.count(ep, Counter::RouteCache, s.daemon);
                (p, wire)
            }
            CacheLookup::Address(dest) => {
                self.counters.count(ep, Counter::AddrCache, s.daemon);
                self.build_and_cache(ep, key, dest, None, now, s)?
            }
            CacheLookup::Miss => {
                self.counters.count(ep, Counter::AddrQuery, s.daemon);
                match find(ep, &key, now, s) {
                    Found::At(dest, learned) => {
                        self.build_and_cache(ep, key, dest, learned, now, s)?
                    }
                    Found::NotInPartition => {
                        return Err(rejected(
                            ACM_STATUS_ENODATA,
                            format!("{key} is not in partition of the source endpoint"),
                        ))
                    }
                    Found::Failed(status) => {
                        return Err(rejected(
                            u32::from(status),
                            format!("{key} failed recently"),
                        ))
                    }
                    Found::Refused(why) => return Err(refused(&key, why)),
                    Found::LookingUp => {
                        let waiter = waiter.filter(|_| !nodelay);
                        return self.wait(ep, key, waiter, echo_source);
                    }
                }
            }
        };
        // An address's path goes out as cached; a path request's record is
        // completed with the fields it asked for.
        let Some(want) = want else {
            return Ok(Some(wire));
        };
        path.service_id = want.service_id;
        if want.tclass != 0 {
            path.tclass = want.tclass;
        }
        // A source GID other than GID 0 of the same port is honoured.
        let sgid_ours = s
            .local
            .port_of(ep)
            .is_some_and(|p| p.gids.contains(&want.sgid));
        if !want.sgid.is_zero() && sgid_ours {
            path.sgid = want.sgid;
        }
        Ok(Some(path.encode()))
    }

    /// A destination being looked up: the request waits for the lookup
    /// (`Ok(None)`), or with NODELAY (no `waiter`) is answered now and the
    /// lookup serves the next one.
    fn wait(
        &mut self,
        ep: EndpointId,
        key: Address,
        waiter: Option<(u64, &MsgBuf)>,
        echo_source: Option<usize>,
    ) -> Result<Option<[u8; PATH_RECORD_LEN]>, Rejected> {
        let Some((id, request)) = waiter else {
            return Err(rejected(
                ACM_STATUS_ENODATA,
                format!("{key} is not cached; lookup started"),
            ));
        };
        let w = Waiter {
            endpoint: ep,
            id,
            request: request.clone(),
            echo_source,
        };
        self.waiting.add(key, w);
        Ok(None)
    }

    fn build_and_cache<D: Daemon>(
        &mut self,
        ep: EndpointId,
        key: Address,
        dest: Dest,
        reconfirm_at: Option<Instant>,
        now: Instant,
        s: &Sources<D>,
    ) -> Result<(PathRecord, [u8; PATH_RECORD_LEN]), Rejected> {
        self.counters.count(ep, Counter::RouteQuery, s.daemon);
        let path = build_path(s.local, s.cfg, ep, dest)?;
        let expiry = s.cfg.addr_timeout.duration().map(|d| now + d);
        let expiry = match (expiry, reconfirm_at) {
            (Some(e), Some(r)) => Some(e.min(r.max(now))),
            (e, r) => e.or(r.map(|r| r.max(now))),
        };
        let entry = CacheEntry::new(
            path,
            dest,
            expiry,
            s.cfg.route_timeout.duration().map(|d| now + d),
        );
        let wire = entry.wire;
        self.cache.insert(ep, key, entry, now);
        Ok((path, wire))
    }

    /// Acts on what discovery decided: a changed binding leaves the
    /// cache, a lookup's end answers the requests waiting for it.
    pub fn apply<D: Daemon>(&mut self, outcome: Outcome, now: Instant, s: &Sources<D>) {
        match outcome {
            Outcome::Changed(a) => {
                self.cache.evict(&a);
            }
            Outcome::Resolved(a, bound) => self.answer_resolved(&a, bound, now, s),
            Outcome::Failed(a, status) => {
                self.waiting.fail(&a, status, &mut self.counters, s.daemon);
            }
        }
    }

    /// The lookup of `key` found `bound`: every request waiting for it
    /// gets its path (or why not, from its own endpoint).
    fn answer_resolved<D: Daemon>(
        &mut self,
        key: &Address,
        bound: Binding,
        now: Instant,
        s: &Sources<D>,
    ) {
        let dest = dest_of(&bound.learned);
        for w in self.waiting.take(key) {
            let pkey = s.local.endpoint(w.endpoint).map(|e| e.pkey);
            let reply = match pkey.is_some_and(|p| bound.learned.in_partition(p)) {
                true => {
                    let (ep, at) = (w.endpoint, bound.reconfirm_at);
                    match self.build_and_cache(ep, key.clone(), dest, at, now, s) {
                        Ok((_, wire)) => msg::resolve_success(&w.request, &wire, w.echo_source),
                        Err(e) => msg::resolve_error(&w.request, e.status),
                    }
                }
                false => msg::resolve_error(&w.request, ACM_STATUS_ENODATA as u8),
            };
            self.waiting.answer(&w, reply, &mut self.counters, s.daemon);
        }
    }

    /// Endpoint `ep` is closing: the requests waiting on it are answered
    /// (its port is going down), its counters and cached paths go. The
    /// lookups they waited for go on for others (discovery is told whose
    /// record to go on with) or end.
    pub fn endpoint_closed<D: Daemon>(
        &mut self,
        ep: EndpointId,
        local: &Local,
        discovery: &mut Discovery,
        daemon: &D,
    ) {
        let orphaned = self.waiting.take_endpoint(ep);
        let waiting = &self.waiting;
        discovery.endpoint_closed(local, ep, |key| waiting.first_endpoint(key));
        let status = ACM_STATUS_ENOTCONN as u8;
        self.waiting
            .abandon(orphaned, status, &mut self.counters, daemon);
        self.counters.close(ep);
        self.cache.flush_endpoint(ep);
    }

    /// Answers every waiting request with `status`; returns how many
    /// were answered.
    pub fn abandon_all<D: Daemon>(&mut self, status: u8, daemon: &D) -> usize {
        let keys = self.waiting.keys();
        let counters = &mut self.counters;
        keys.iter()
            .map(|k| self.waiting.fail(k, status, counters, daemon))
            .sum()
    }
}

/// Where a destination is: this host's own addresses and ports first
/// (preferring the source's partition), then the hosts file, then
/// discovery, which looks it up if it knows nothing.
fn find<D>(ep: EndpointId, dest: &Address, now: Instant, s: &mut Sources<D>) -> Found {
    let pkey = s.local.endpoint(ep).map(|e| e.pkey);
    let known = pkey.and_then(|p| {
        s.local
            .holds(dest, p)
            .or_else(|| s.hosts.lookup(dest).map(|r| (r.gid, r.lid)))
    });
    if let Some((gid, lid)) = known {
        let dest = Dest {
            gid,
            lid,
            mtu: None,
            rate: None,
        };
        return Found::At(dest, None);
    }
    match s.discovery.resolve(s.local, ep, dest, now) {
        Resolution::Known(b) if pkey.is_some_and(|p| b.learned.in_partition(p)) => {
            Found::At(dest_of(&b.learned), b.reconfirm_at)
        }
        Resolution::Known(_) => Found::NotInPartition,
        Resolution::Failed(status) => Found::Failed(status),
        Resolution::Started => Found::LookingUp,
        Resolution::Refused(why) => Found::Refused(why),
    }
}

/// The path from endpoint `ep` to `dest`, from its port and the options.
fn build_path(
    local: &Local,
    cfg: &Config,
    ep: EndpointId,
    dest: Dest,
) -> Result<PathRecord, Rejected> {
    let (Some(e), Some(port)) = (local.endpoint(ep), local.port_of(ep)) else {
        return Err(rejected(
            ACM_STATUS_ESRCADDR,
            "source endpoint is gone".into(),
        ));
    };
    let (mut mtu, mut rate) = local.mtu_rate(port);
    // A remote port that told us its MTU and rate bounds the path too.
    if let Some(m) = dest.mtu {
        mtu = mtu.min(m);
    }
    if let Some(r) = dest.rate {
        rate = ib::min_rate(rate, r);
    }
    if ib::rate_x10(rate).is_none() {
        return Err(rejected(ACM_STATUS_EDESTADDR, "no usable rate".into()));
    }
    Ok(PathRecord {
        service_id: 0,
        dgid: dest.gid,
        sgid: port.gids[0],
        dlid: dest.lid,
        slid: port.lid,
        flow_label: 0,
        hop_limit: cfg.hop_limit,
        tclass: cfg.tclass,
        reversible: true,
        pkey: e.pkey,
        sl: cfg.sl,
        mtu,
        rate,
        packet_lifetime: cfg.packet_lifetime,
    })
}

/// Logs a malformed request, at most one line per
/// [`crate::summary::EVERY`]: any local client can send them.
fn malformed(logged: &mut crate::summary::Throttle, kind: &str, why: &str, now: Instant) {
    if let Some(line) = malformed_line(logged, kind, why, now) {
        log::warn!("{line}");
    }
}

/// The line [`malformed`] logs, if one is due.
fn malformed_line(
    logged: &mut crate::summary::Throttle,
    kind: &str,
    why: &str,
    now: Instant,
) -> Option<String> {
    let held = logged.pass(now, crate::summary::EVERY)?;
    let more = match held {
        0 => String::new(),
        n => format!(" ({n} more since the last such line)"),
    };
    Some(format!("malformed {kind} request: {why}{more}"))
}

#[cfg(test)]
mod malformed_tests {
    use super::*;

    #[test]
    fn a_flood_of_malformed_requests_is_one_line_per_interval() {
        let mut logged = crate::summary::Throttle::default();
        let t = Instant::now();
        let lines: Vec<String> = (0..1000)
            .filter_map(|i| malformed_line(&mut logged, "resolve", "short", t + i * MS))
            .collect();
        assert_eq!(lines, ["malformed resolve request: short"]);
        let later = malformed_line(&mut logged, "query", "bad", t + crate::summary::EVERY);
        assert_eq!(
            later.as_deref(),
            Some("malformed query request: bad (999 more since the last such line)")
        );
    }

    const MS: std::time::Duration = std::time::Duration::from_millis(1);
}
