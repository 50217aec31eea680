//! How a stage that asks hosts is decided: a name's claimants are each
//! asked again by unicast, and the name goes to the hosts that confirmed
//! it once every holder had its chance to claim it (the claim window);
//! two that disagree get no answer, as a wrong answer is worse than none.

use super::{Cx, Lookups};
use crate::addr::Address;
use crate::discovery::inflight::{Doing, Purpose, Stage, NO, UNKNOWN};
use crate::discovery::why;
use std::time::{Duration, Instant};

/// Whether a stage asks hosts, whose confirmations decide it.
pub(super) fn asks(stage: Stage) -> bool {
    matches!(stage, Stage::Discover | Stage::Nss)
}

/// Without authentication, claims to a name asked of the groups are heard
/// for this share of `urdma_timeout` after the query left before the name
/// is decided (50 ms by default): every holder's claim must be in, or a
/// liar that answers first would win. The measurements behind it are in
/// docs/protocol.md, *Trust*.
pub const CLAIM_WINDOW_SHARE: u32 = 10;

/// Of what two probes of a stage came to, what the stage knows: no only
/// if both said no.
fn weakest(a: u8, b: u8) -> u8 {
    if a == NO && b == NO {
        NO
    } else {
        UNKNOWN
    }
}

/// How long after a group query left its claims are heard before the
/// name is decided (docs/protocol.md, *Trust*): for a name two endpoints
/// announced, the whole try, as they are two claimants, one lying or both
/// misconfigured; else none with authentication, where only key holders
/// can claim, and `set` (simulations) or [`CLAIM_WINDOW_SHARE`] of
/// `urdma_timeout` without.
fn claim_window(
    disputed: bool,
    authenticated: bool,
    set: Option<Duration>,
    timeout: Duration,
) -> Duration {
    match (disputed, authenticated) {
        (true, _) => timeout,
        (false, true) => Duration::ZERO,
        (false, false) => set.unwrap_or(timeout / CLAIM_WINDOW_SHARE),
    }
}

impl Lookups {
    /// The tries that timed out, and the stages whose time is up:
    /// claims not confirmed in time do not count; those confirmed decide.
    pub(in crate::discovery) fn on_timers(&mut self, cx: &mut Cx<'_>, now: Instant) {
        for txid in self.inflight.probes().due(now) {
            self.probe_due(cx, txid, now);
        }
        for key in self.inflight.due_lookups(now) {
            // A claim still unconfirmed at the stage's end is a claimant
            // silent.
            let confirmed = self.inflight.lookup(&key).is_some_and(|l| {
                let silent = l.probes().iter().any(|t| {
                    self.inflight
                        .probes()
                        .get(*t)
                        .is_some_and(|p| p.claimed && p.tries > 0)
                });
                asks(l.stage) && !l.confirmed.is_empty() && !silent
            });
            if confirmed {
                self.inflight.end_probes_of(&key, now);
                self.settle(cx, &key, now);
            } else {
                why::stage_over(&mut self.inflight, &key, now);
                self.next_stage(cx, &key, UNKNOWN, now);
            }
        }
    }

    /// One of a lookup's probes ended without a binding.
    pub(super) fn probe_ended(
        &mut self,
        cx: &mut Cx<'_>,
        key: &Address,
        status: Option<u8>,
        now: Instant,
    ) {
        let Some(l) = self.inflight.lookup_mut(key) else {
            return;
        };
        if let Some(s) = status {
            l.failure = weakest(l.failure, s);
        }
        self.settle(cx, key, now);
    }

    /// Decides a lookup's discovery stage once no claim is left to
    /// confirm: the name goes to the hosts that confirmed it if they agree;
    /// two hosts claiming one name with different GIDs get no answer (which
    /// one is right cannot be told, and a wrong answer is worse than none);
    /// with nothing confirmed and nothing more to wait for, the stage fails.
    pub(in crate::discovery) fn settle(&mut self, cx: &mut Cx<'_>, key: &Address, now: Instant) {
        let Some(l) = self.inflight.lookup(key) else {
            return;
        };
        if !asks(l.stage) || l.doing == Doing::Resolving {
            return;
        }
        let claims_pending = l
            .probes()
            .iter()
            .filter_map(|t| self.inflight.probes().get(*t))
            .any(|p| matches!(p.purpose, Purpose::Claim | Purpose::Address));
        if claims_pending {
            return;
        }
        let group = l.probes().iter().copied().find(|t| {
            self.inflight
                .probes()
                .get(*t)
                .is_some_and(|p| p.purpose == Purpose::Lookup && p.to.is_none())
        });
        if let (Some(g), false) = (group, l.confirmed.is_empty()) {
            // Whoever else holds the name answers the group query soon
            // after it left, and must be heard: the first host to confirm
            // may be the one that lies, fastest. The query ends when its
            // claim window is over (`probe_due`), or now if it is.
            let authenticated = cx.keyed;
            let timeout = self.retry.timeout(None, now);
            let disputed = l.doing == Doing::AskingDisputed;
            let window = claim_window(disputed, authenticated, cx.cfg.claim_window, timeout);
            let sent = self.inflight.probes().get(g).and_then(|p| p.sent_at);
            let decide_at = sent.map_or(now, |t| t + window);
            if now < decide_at {
                if let Some(p) = self.inflight.probes_mut().get_mut(g) {
                    p.answered = true;
                }
                let due = self
                    .inflight
                    .probes()
                    .deadline(g)
                    .map_or(decide_at, |d| d.min(decide_at));
                self.inflight.probes_mut().set_deadline(g, due);
                return;
            }
            self.inflight.end_probe(g, now);
        }
        let Some(l) = self.inflight.lookup(key) else {
            return;
        };
        if l.claim_silent && !l.confirmed.is_empty() {
            // A host that claimed the name never confirmed it: it may be
            // its holder, silenced (its reply allowance for this host
            // drained by queries forged in this host's name), and the
            // others liars. Not decided; asked again at the next request.
            log::debug!("lookup {key}: a claimant never confirmed it; not decided");
            return self.next_stage(cx, key, UNKNOWN, now);
        }
        if let Some((_, first)) = l.confirmed.first() {
            let first = first.clone();
            if l.confirmed.iter().all(|(_, c)| c.gid == first.gid) {
                return self.succeed(cx.found(), key, first, now);
            }
            let who: Vec<String> = l
                .confirmed
                .iter()
                .map(|(at, c)| format!("{} at {at}", c.gid))
                .collect();
            log::warn!(
                "lookup {key}: claimed by hosts with different GIDs ({}); not answered",
                who.join(", ")
            );
            cx.counts.conflicts += 1;
            return self.next_stage(cx, key, NO, now);
        }
        if l.probes().is_empty() && !self.ask_groups(cx, key, now) {
            let status = self.inflight.lookup(key).map_or(UNKNOWN, |l| l.failure);
            self.next_stage(cx, key, status, now);
        }
    }

    /// A name asked of the host its announcements named, which refused
    /// it or left all tries but its last unanswered: asks the groups too,
    /// within the stage's time. A refusal means the name moved, and the hint goes.
    /// False if the lookup was not hinted, or the groups could not be
    /// asked.
    pub(super) fn ask_groups(&mut self, cx: &mut Cx<'_>, key: &Address, now: Instant) -> bool {
        let Some(l) = self.inflight.lookup_mut(key) else {
            return false;
        };
        if l.doing != Doing::AskingAnnouncer || l.stage != Stage::Discover {
            return false;
        }
        l.doing = Doing::Asking;
        let ep = l.endpoint;
        if l.failure == NO && l.probes().is_empty() {
            cx.presence.hints_mut().forget(key);
        }
        log::trace!("lookup {key}: its announcer did not confirm it; asking the groups");
        let sent = self.send_probe(cx, key, key.clone(), None, Purpose::Lookup, ep, now);
        if sent.is_none() {
            if let Some(l) = self.inflight.lookup_mut(key) {
                // Not asked: the stage could not find out.
                l.failure = UNKNOWN;
            }
        }
        sent.is_some()
    }
}
