//! Answering the queries other hosts send: only the holder of an address
//! answers, a group query once across both families, a unicast one within
//! the asker's reply allowance (`urdma_reply_rate`), and a host that has
//! just started refuses nothing it may not hold yet ([`super::STARTING`]).

use super::inflight::MAX_CHECKS;
use super::ratelimit::RateLimiter;
use super::wire::{Answer, Message, Query};
use super::{record_for, Datagram};
use crate::addr::Gid;
use crate::bounded::Expiring;
use crate::buggify::{Buggify, Fault};
use crate::config::Config;
use crate::local::Local;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long the copies of one group query are taken for one: they arrive
/// together (one per family); a try sent again comes `urdma_timeout`
/// later and is answered again.
const SAME_QUERY: Duration = Duration::from_millis(20);

/// What a query gets ([`Responder::answer`]).
#[derive(Debug)]
pub(super) enum Answered {
    /// This reply.
    Reply(Datagram),
    /// Nothing: the asker drained its reply allowance (counted).
    RateLimited,
    /// Nothing: not ours to answer, or answered already.
    Nothing,
}

pub(super) struct Responder {
    /// The reply allowance of each asker, for unicast queries.
    reply_limit: RateLimiter,
    /// When the sockets opened: a host refuses no address before
    /// [`super::STARTING`] has passed since.
    up_at: Option<Instant>,
    /// Group queries answered lately, by transaction id and asker: the
    /// asker sends each one to the IPv4 and the IPv6 group, and one answer
    /// is enough (a second one costs a second confirmation).
    answered_groups: Expiring<(u64, Gid), ()>,
}

impl Responder {
    pub(super) fn new(cfg: &Config) -> Responder {
        Responder {
            reply_limit: RateLimiter::new(cfg.reply_rate),
            up_at: None,
            answered_groups: Expiring::new(MAX_CHECKS * 4),
        }
    }

    /// The sockets opened at `now`.
    pub(super) fn opened(&mut self, now: Instant) {
        self.up_at = Some(now);
    }

    /// What query `q`, from `from` to `to` (a group's address, or this
    /// host's; `None`: the socket cannot say), gets from this host.
    pub(super) fn answer(
        &mut self,
        local: &Local,
        q: &Query,
        (from, to): (SocketAddr, Option<IpAddr>),
        buggify: &mut Buggify,
        now: Instant,
    ) -> Answered {
        // Where the socket cannot say, the query may have been a group's:
        // never refuse it then.
        let group = to.is_none_or(|ip| ip.is_multicast());
        let target = q.target().address();
        let answer = match local
            .holder(target)
            .and_then(|ep| record_for(local, ep, Some(target)))
        {
            Some(record) => Answer::Found(record),
            // Every host of the segment gets a group query: only the
            // holder answers, or one query would bring a reply from each.
            None if group => return Answered::Nothing,
            None if self.starting(local, now) => {
                log::trace!("discovery: {from} asked for {target}: not ours yet, starting");
                return Answered::Nothing;
            }
            None => Answer::Refused,
        };
        let found = matches!(answer, Answer::Found(_));
        if group {
            let copy = (q.txid().get(), q.sender().gid());
            if !self.answered_groups.mark(copy, now, now + SAME_QUERY) {
                // The same query through the other family's group.
                return Answered::Nothing;
            }
        }
        // Group queries unlimited: forged in an asker's name they would
        // silence the holder's claims to it (trust table: group query).
        if !group && !self.reply_limit.allow(from.ip(), now) {
            return Answered::RateLimited;
        }
        if buggify.fires(Fault::ReplyWithheld) {
            return Answered::Nothing;
        }
        let Ok(reply) = q.reply(answer) else {
            return Answered::Nothing;
        };
        log::trace!(
            "discovery: {from} asked for {target}: {}",
            if found { "ours" } else { "refused" }
        );
        // A reply to a unicast query comes from the queried address, the
        // only source the asker accepts.
        Answered::Reply(Datagram::Unicast {
            to: from,
            from: to.filter(|ip| !ip.is_multicast()),
            bytes: Message::from(reply).encode(),
        })
    }

    /// Whether this host may not hold all its addresses yet: within
    /// [`super::STARTING`] of its sockets' opening, or holding none.
    fn starting(&self, local: &Local, now: Instant) -> bool {
        let recent = self.up_at.is_none_or(|t| now < t + super::STARTING);
        recent
            || local
                .endpoint_ids()
                .all(|ep| local.addresses_of(ep).next().is_none())
    }

    /// Forgets the group queries answered long enough ago.
    pub(super) fn sweep(&mut self, now: Instant) {
        self.answered_groups.sweep(now, |_, _| {});
    }

    pub(super) fn sweep_due(&self) -> Option<Instant> {
        self.answered_groups.sweep_due()
    }
}
