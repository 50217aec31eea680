//! The request path, on the daemon's thread: request → parse → lookup
//! (destination cache, this host, the hosts file, what discovery learned)
//! → resolve (a lookup by discovery when nothing knows) → path → reply.
//! A request that must wait for a lookup is copied and answered when the
//! lookup's outcome arrives.

use super::{Engine, Response, Waiter};
use crate::addr::Address;
use crate::daemon::{Counter, Daemon};
use crate::discovery::state::Learned;
use crate::discovery::{Binding, Refused, Resolution};
use crate::engine::cache::{CacheEntry, CacheLookup};
use crate::handle::{AddressId, EndpointId};
use crate::ib;
use crate::request::msg::{self, MsgBuf, Rejected, ResolveRequest, Target};
use crate::request::path::{Dest, PathRecord, PATH_RECORD_LEN};
use acm_prov_sys::{
    ACM_STATUS_EDESTADDR, ACM_STATUS_EINVAL, ACM_STATUS_ENODATA, ACM_STATUS_ENOMEM,
    ACM_STATUS_ESRCADDR, ACM_STATUS_SUCCESS,
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

impl<D: Daemon> Engine<D> {
    /// Handles a `resolve` made on behalf of the local address `addr` at
    /// `now`. `None`: the request waits for a lookup and is answered later
    /// through the effects.
    pub fn resolve_at(
        &mut self,
        addr: AddressId,
        req: &MsgBuf,
        id: u64,
        now: Instant,
    ) -> Option<MsgBuf> {
        let mut msg = req.clone();
        self.resolve_in_place(addr, &mut msg, id, || now)
            .then_some(msg)
    }

    /// [`Engine::resolve_at`] without copies: `msg` is the request and, when
    /// this returns true, the reply to send. False: the engine holds a copy
    /// of the request and answers it later.
    ///
    /// `now` is not called for a hit on a fresh path (see
    /// the destination cache in `engine/cache.rs`): the clock is the largest cost a
    /// hit would have had.
    ///
    /// Inlined into the daemon's callback, its one caller there: one call
    /// frame less per request.
    #[inline]
    pub fn resolve_in_place(
        &mut self,
        addr: AddressId,
        msg: &mut MsgBuf,
        id: u64,
        now: impl Fn() -> Instant,
    ) -> bool {
        let Some((ep, slot)) = self.counters.source(addr, &self.local) else {
            log::error!("resolve for an address context this provider does not know");
            msg.make_resolve_error(ACM_STATUS_ESRCADDR as u8);
            return true;
        };
        // Most requests: an address whose path is cached. Its encoding goes
        // from the entry straight into the reply (a success: nothing for
        // count_status to count). Nothing of this parse outlives the hit: the
        // rest parses again rather than have every hit keep the whole
        // request on its stack.
        if let Ok(ResolveRequest {
            target: Target::Address(a),
            echo_source,
            ..
        }) = ResolveRequest::parse(msg)
        {
            if let Some(e) = self.cache.hit_entry(ep, a, &now) {
                msg.make_resolve_success(&e.wire, echo_source);
                self.counters.tally_hit(slot, &self.daemon);
                return true;
            }
        }
        let parsed = ResolveRequest::parse(msg);
        self.counters.tally(slot, Counter::Resolve, &self.daemon);
        let now = now();
        self.pending.input(now);
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
                malformed(&mut self.malformed_logged, "resolve", &e.why, now);
                msg.make_resolve_error(e.status);
            }
        }
        self.counters.count_status(ep, msg.status(), &self.daemon);
        true
    }

    /// Handles a `query` (`ib_acme -v`): there is no SA to ask, so the
    /// record is checked against what this provider would build.
    pub fn query_at(&mut self, addr: AddressId, req: &MsgBuf, now: Instant) -> Response {
        let Some((ep, slot)) = self.counters.source(addr, &self.local) else {
            log::error!("query for an address context this provider does not know");
            return Response(msg::query_reply(req, ACM_STATUS_ESRCADDR as u8, None));
        };
        self.counters.tally(slot, Counter::Resolve, &self.daemon);
        let reply = match msg::parse_query(req) {
            Ok(want) => {
                let request = ResolveRequest {
                    target: Target::Path(want),
                    echo_source: None,
                    nodelay: true,
                };
                match self.route(ep, request, None, now) {
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
        self.counters.count_status(ep, reply.status(), &self.daemon);
        Response(reply)
    }

    /// Finds (or builds and caches) the path from endpoint `ep` to the
    /// request's destination. `Ok(None)`: a lookup now holds the request
    /// (`waiter`: its daemon id and message, copied only if it must wait).
    fn route(
        &mut self,
        ep: EndpointId,
        req: ResolveRequest,
        waiter: Option<(u64, &MsgBuf)>,
        now: Instant,
    ) -> Result<Option<[u8; PATH_RECORD_LEN]>, Rejected> {
        let (nodelay, echo_source) = (req.nodelay, req.echo_source);
        let (key, want) = match req.target {
            Target::Address(a) => (a.to_address(), None),
            Target::Path(p) if !p.dgid.is_zero() => (Address::Gid(p.dgid), Some(p)),
            Target::Path(p) => (Address::Lid(p.dlid), Some(p)),
        };
        let (mut path, wire) = match self.cache.lookup(ep, &key, now) {
            CacheLookup::Route(p, wire) => {
                self.counters.count(ep, Counter::RouteCache, &self.daemon);
                (p, wire)
            }
            CacheLookup::Address(dest) => {
                self.counters.count(ep, Counter::AddrCache, &self.daemon);
                self.build_and_cache(ep, key, dest, None, now)?
            }
            CacheLookup::Miss => {
                self.counters.count(ep, Counter::AddrQuery, &self.daemon);
                match self.find(ep, &key, now) {
                    Found::At(dest, learned) => {
                        self.build_and_cache(ep, key, dest, learned, now)?
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
        let sgid_ours = self
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

    fn build_and_cache(
        &mut self,
        ep: EndpointId,
        key: Address,
        dest: Dest,
        reconfirm_at: Option<Instant>,
        now: Instant,
    ) -> Result<(PathRecord, [u8; PATH_RECORD_LEN]), Rejected> {
        self.counters.count(ep, Counter::RouteQuery, &self.daemon);
        let path = self.build_path(ep, dest)?;
        let expiry = self.cfg.addr_timeout.duration().map(|d| now + d);
        let expiry = match (expiry, reconfirm_at) {
            (Some(e), Some(r)) => Some(e.min(r.max(now))),
            (e, r) => e.or(r.map(|r| r.max(now))),
        };
        let entry = CacheEntry::new(
            path,
            dest,
            expiry,
            self.cfg.route_timeout.duration().map(|d| now + d),
        );
        let wire = entry.wire;
        self.cache.insert(ep, key, entry, now);
        Ok((path, wire))
    }

    /// Where a destination is: this host's own addresses and ports first
    /// (preferring the source's partition), then the hosts file, then
    /// discovery, which looks it up if it knows nothing.
    fn find(&mut self, ep: EndpointId, dest: &Address, now: Instant) -> Found {
        let pkey = self.local.endpoint(ep).map(|e| e.pkey);
        let known = pkey.and_then(|p| {
            self.local
                .holds(dest, p)
                .or_else(|| self.hosts.lookup(dest).map(|r| (r.gid, r.lid)))
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
        match self.discovery.resolve(&self.local, ep, dest, now) {
            Resolution::Known(b) if pkey.is_some_and(|p| b.learned.in_partition(p)) => {
                Found::At(dest_of(&b.learned), b.reconfirm_at)
            }
            Resolution::Known(_) => Found::NotInPartition,
            Resolution::Failed(status) => Found::Failed(status),
            Resolution::Started => Found::LookingUp,
            Resolution::Refused(why) => Found::Refused(why),
        }
    }

    fn build_path(&self, ep: EndpointId, dest: Dest) -> Result<PathRecord, Rejected> {
        let (Some(e), Some(port)) = (self.local.endpoint(ep), self.local.port_of(ep)) else {
            return Err(rejected(
                ACM_STATUS_ESRCADDR,
                "source endpoint is gone".into(),
            ));
        };
        let (mut mtu, mut rate) = self.local.mtu_rate(port);
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

    /// The lookup of `key` found `bound`: every request waiting for it
    /// gets its path (or why not, from its own endpoint).
    pub(super) fn answer_resolved(&mut self, key: &Address, bound: Binding, now: Instant) {
        let dest = dest_of(&bound.learned);
        for w in self.waiting.take(key) {
            let pkey = self.local.endpoint(w.endpoint).map(|e| e.pkey);
            let reply = match pkey.is_some_and(|p| bound.learned.in_partition(p)) {
                true => {
                    let (ep, at) = (w.endpoint, bound.reconfirm_at);
                    match self.build_and_cache(ep, key.clone(), dest, at, now) {
                        Ok((_, wire)) => msg::resolve_success(&w.request, &wire, w.echo_source),
                        Err(e) => msg::resolve_error(&w.request, e.status),
                    }
                }
                false => msg::resolve_error(&w.request, ACM_STATUS_ENODATA as u8),
            };
            self.waiting
                .answer(&w, reply, &mut self.counters, &self.daemon);
        }
    }
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
