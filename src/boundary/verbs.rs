//! What the engine needs to know about a port, read from verbs through the
//! shim (`verbs_shim.c`: `ibv_query_port` is a static inline in the
//! header, which Rust cannot call).

use crate::addr::Gid;
use crate::local::PortInfo;
use acm_prov_sys::{
    acm_port, ibv_context, ibv_gid, ibv_port_attr, IBV_LINK_LAYER_ETHERNET,
    IBV_LINK_LAYER_INFINIBAND,
};
use std::ffi::c_int;

extern "C" {
    fn urdma_query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
    fn urdma_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
}

/// Reads what the engine needs about a port from verbs.
pub(super) fn port_info(port: &acm_port) -> Option<PortInfo> {
    // SAFETY: the daemon's port object points at its device object, which
    // holds the daemon's own open verbs context; both live forever.
    let verbs = unsafe { port.dev.as_ref() }?.verbs;
    if verbs.is_null() {
        return None;
    }
    let mut attr = ibv_port_attr::default();
    // SAFETY: valid context and a zeroed attribute struct of the size the
    // shim was compiled with.
    if unsafe { urdma_query_port(verbs, port.port_num, &mut attr) } != 0 {
        log::error!("port {}: ibv_query_port failed", port.port_num);
        return None;
    }
    let mut gids = Vec::new();
    for index in 0..attr.gid_tbl_len.max(0) {
        let mut gid = ibv_gid::default();
        // SAFETY: valid context, index within the port's table, and a
        // 16-byte out parameter.
        if unsafe { urdma_query_gid(verbs, port.port_num, index, &mut gid) } != 0 {
            break;
        }
        // SAFETY: every bit pattern of the union is a valid byte array.
        let g = Gid(unsafe { gid.raw });
        // The daemon's GID table ends at the first entry without an
        // interface id; matching it keeps indices consistent with its own.
        if g.interface_id() == [0; 8] {
            break;
        }
        gids.push(g);
    }
    let link_layer = match u32::from(attr.link_layer) {
        IBV_LINK_LAYER_INFINIBAND => "InfiniBand",
        IBV_LINK_LAYER_ETHERNET => "Ethernet",
        _ => "unspecified",
    };
    Some(PortInfo {
        port_num: port.port_num,
        link_layer_ib: u32::from(attr.link_layer) == IBV_LINK_LAYER_INFINIBAND,
        link_layer,
        lid: attr.lid,
        lmc: attr.lmc,
        active_mtu: attr.active_mtu as u8,
        active_width: attr.active_width,
        active_speed: attr.active_speed,
        gids,
    })
}
