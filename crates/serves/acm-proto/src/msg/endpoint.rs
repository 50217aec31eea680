//! The reply to an EP query (`ib_acme -e`): one endpoint of the daemon's,
//! as `urdma-acm` lists them.

use super::{
    read, ADDR_LEN, EP_ADDRS, EP_ADDR_CNT, EP_GUID, EP_PKEY, EP_PORT, EP_PROV_NAME, LENGTH,
};

/// One endpoint of an EP query reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The device's node GUID.
    pub guid: u64,
    pub port: u8,
    pub pkey: u16,
    /// The provider that serves it.
    pub provider: String,
    pub addresses: Vec<String>,
}

impl Endpoint {
    /// The endpoint an EP query reply describes (`struct
    /// acm_ep_config_data`, integers big-endian, strings NUL-terminated),
    /// from the whole reply as read: the daemon sends 64 bytes per address
    /// after the header, so an endpoint with more than about 30 addresses
    /// is longer than a `struct acm_msg`. `None` when the reply is shorter
    /// than its header says or too short for one endpoint.
    pub fn decode(reply: &[u8]) -> Option<Endpoint> {
        let claimed = usize::from(u16::from_be_bytes(
            reply.get(LENGTH..LENGTH + 2)?.try_into().ok()?,
        ));
        let body = reply.get(..claimed)?;
        if body.len() < EP_ADDRS {
            return None;
        }
        let be16 = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
        let count = usize::from(be16(EP_ADDR_CNT));
        Some(Endpoint {
            guid: u64::from_be_bytes(read(body, EP_GUID)),
            port: body[EP_PORT],
            pkey: be16(EP_PKEY),
            provider: c_string(&body[EP_PROV_NAME..EP_ADDRS]),
            addresses: body[EP_ADDRS..]
                .chunks_exact(ADDR_LEN)
                .take(count)
                .map(c_string)
                .collect(),
        })
    }
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
