//! Names off the segment (`urdma_name_lookup nss`): the system's resolver
//! (asked by the runtime, off every loop that must not wait) gives
//! addresses, and each is asked by unicast; the hosts that answer decide
//! as claimants of a name on the segment do.

use super::{Cx, Lookups};
use crate::addr::Address;
use crate::buggify::Fault;
use crate::discovery::inflight::{Doing, Purpose, Stage, MAX_CLAIMS};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Why the system's resolver gave no address for a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NssError {
    /// It said the name does not exist, or has no address (`EAI_NONAME`,
    /// `EAI_NODATA`): a no.
    NoSuchName(String),
    /// It could not find out (`EAI_AGAIN`: no server answered in time,
    /// `EAI_FAIL`, a system error, ...): no answer at all.
    Failed(String),
}

impl std::fmt::Display for NssError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NssError::NoSuchName(why) | NssError::Failed(why) => f.write_str(why),
        }
    }
}

impl Lookups {
    /// What the system's resolver said about the name of lookup `key`:
    /// each address it gave is asked by unicast, and the hosts that answer
    /// decide as claimants of the name do; no address ends the stage with
    /// a no, an error that is not "no such name" as one that could not
    /// find out.
    pub(in crate::discovery) fn on_nss(
        &mut self,
        cx: &mut Cx<'_>,
        key: &Address,
        answer: Result<Vec<IpAddr>, NssError>,
        now: Instant,
    ) {
        let Some(l) = self.inflight.lookup_mut(key) else {
            return;
        };
        if l.stage != Stage::Nss || l.doing != Doing::Resolving {
            return;
        }
        l.doing = Doing::Asking;
        let ep = l.endpoint;
        cx.counts.lookups.nss_asked += 1;
        let answer = match answer {
            Ok(_) if cx.buggify.fires(Fault::ResolverFailed) => Err(NssError::Failed(
                "Temporary failure in name resolution".into(),
            )),
            a => a,
        };
        let mut ips = match answer {
            Ok(ips) if !ips.is_empty() => ips,
            Ok(_) => {
                cx.counts.lookups.nss_failed += 1;
                return self.next_stage(cx, key, ACM_STATUS_ENODATA as u8, now);
            }
            Err(e) => {
                cx.counts.lookups.nss_failed += 1;
                log::debug!("lookup {key}: the system's resolver: {e}");
                crate::discovery::why::note(
                    &mut self.inflight,
                    key,
                    format!("the system's resolver: {e}"),
                );
                let status = match e {
                    NssError::NoSuchName(_) => ACM_STATUS_ENODATA,
                    NssError::Failed(_) => {
                        cx.counts.lookups.nss_errors += 1;
                        ACM_STATUS_ETIMEDOUT
                    }
                };
                return self.next_stage(cx, key, status as u8, now);
            }
        };
        ips.sort();
        ips.dedup();
        ips.truncate(MAX_CLAIMS);
        log::trace!("lookup {key}: the system's resolver gives {ips:?}");
        let mut asked = 0;
        for ip in ips {
            let to = SocketAddr::new(ip, cx.cfg.discovery_port);
            let target = Address::from(ip);
            let sent = self.send_probe(cx, key, target, Some(to), Purpose::Address, ep, now);
            asked += usize::from(sent.is_some());
        }
        if asked == 0 && self.inflight.has_lookup(key) {
            // None of them could be asked.
            self.next_stage(cx, key, ACM_STATUS_ETIMEDOUT as u8, now);
        }
    }
}
