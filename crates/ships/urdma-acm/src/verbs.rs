//! What libibverbs reports about the RDMA devices, read through the same
//! calls the daemon makes when it opens devices and brings ports up. This
//! is the tool's only `unsafe` code: everything leaves it as plain values.

use acm_prov_sys::{ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_port_attr};
use std::ffi::{c_char, c_int, CStr};
use std::io;

extern "C" {
    fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_free_device_list(list: *mut *mut ibv_device);
    fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char;
    fn ibv_get_device_guid(device: *mut ibv_device) -> u64;
    fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context;
    fn ibv_close_device(context: *mut ibv_context) -> c_int;
    fn ibv_query_device(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
    fn ibv_query_gid(context: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid)
        -> c_int;
    fn ibv_query_pkey(context: *mut ibv_context, port: u8, index: c_int, pkey: *mut u16) -> c_int;
    /// The provider's shim (`src/boundary/verbs_shim.c` of ibacm-urdma), linked
    /// in with that crate.
    fn urdma_query_port(context: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
}

/// One port as `ibv_query_port`, `ibv_query_gid` and `ibv_query_pkey` see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttrs {
    /// `enum ibv_port_state`.
    pub state: u32,
    /// `IBV_LINK_LAYER_*`.
    pub link_layer: u8,
    /// GID index 0, `None` if it cannot be read.
    pub gid0: Option<[u8; 16]>,
    /// The P_Key table entries that could be read, host order.
    pub pkeys: Vec<u16>,
    /// The table length the port reports (entries may fail to read).
    pub pkey_tbl_len: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub num: u8,
    pub attrs: Result<PortAttrs, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    /// Node GUID, host order.
    pub guid: u64,
    /// Why the device could not be opened or queried, if it could not.
    pub ports: Result<Vec<Port>, String>,
}

/// Every device libibverbs lists, in its order (the daemon's order).
pub fn devices() -> Result<Vec<Device>, String> {
    let mut count: c_int = 0;
    // SAFETY: a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut count) };
    if list.is_null() {
        let e = io::Error::last_os_error();
        // ENOSYS: no /sys/class/infiniband_verbs at all.
        let hint = match e.kind() {
            io::ErrorKind::Unsupported => " (no RDMA support in the kernel: is ib_uverbs loaded?)",
            _ => "",
        };
        return Err(format!("libibverbs cannot list RDMA devices: {e}{hint}"));
    }
    let mut out = Vec::new();
    for i in 0..usize::try_from(count).unwrap_or(0) {
        // SAFETY: the list holds `count` valid device pointers.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        out.push(device(dev));
    }
    // SAFETY: the list came from ibv_get_device_list and is freed once;
    // the contexts opened from its devices are already closed.
    unsafe { ibv_free_device_list(list) };
    Ok(out)
}

fn device(dev: *mut ibv_device) -> Device {
    // SAFETY: a device of the live list; its name is a NUL-terminated array
    // inside it.
    let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    let guid = u64::from_be(unsafe { ibv_get_device_guid(dev) });
    // SAFETY: as above; the context is closed before returning.
    let ctx = unsafe { ibv_open_device(dev) };
    if ctx.is_null() {
        let e = io::Error::last_os_error();
        return Device {
            name,
            guid,
            ports: Err(format!("ibv_open_device failed: {e}")),
        };
    }
    let ports = ports(ctx);
    // SAFETY: opened above, closed once.
    unsafe { ibv_close_device(ctx) };
    Device { name, guid, ports }
}

fn ports(ctx: *mut ibv_context) -> Result<Vec<Port>, String> {
    let mut attr = ibv_device_attr::default();
    // SAFETY: an open context and a zeroed out-struct of the header's size.
    let rc = unsafe { ibv_query_device(ctx, &mut attr) };
    if rc != 0 {
        return Err(format!(
            "ibv_query_device failed: {}",
            io::Error::from_raw_os_error(rc.abs())
        ));
    }
    Ok((1..=attr.phys_port_cnt)
        .map(|num| Port {
            num,
            attrs: port(ctx, num),
        })
        .collect())
}

fn port(ctx: *mut ibv_context, num: u8) -> Result<PortAttrs, String> {
    let mut attr = ibv_port_attr::default();
    // SAFETY: an open context and a zeroed out-struct of the size the shim
    // was compiled with (the same header).
    let rc = unsafe { urdma_query_port(ctx, num, &mut attr) };
    if rc != 0 {
        return Err(format!(
            "ibv_query_port failed: {}",
            io::Error::from_raw_os_error(rc.abs())
        ));
    }
    let mut gid = ibv_gid::default();
    // SAFETY: an open context and a 16-byte out-union.
    let read = unsafe { ibv_query_gid(ctx, num, 0, &mut gid) } == 0;
    // SAFETY: every bit pattern of the union is a valid byte array.
    let gid0 = read.then_some(unsafe { gid.raw });
    let mut pkeys = Vec::new();
    for index in 0..attr.pkey_tbl_len {
        let mut pkey: u16 = 0;
        // SAFETY: an open context, an index below the reported table
        // length and a 2-byte out-parameter (big-endian).
        if unsafe { ibv_query_pkey(ctx, num, c_int::from(index), &mut pkey) } == 0 {
            pkeys.push(u16::from_be(pkey));
        }
    }
    Ok(PortAttrs {
        state: attr.state,
        link_layer: attr.link_layer,
        gid0,
        pkeys,
        pkey_tbl_len: attr.pkey_tbl_len,
    })
}
