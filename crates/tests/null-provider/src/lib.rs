//! The benchmark baseline: an ibacm provider named `null` that answers every
//! `resolve` at once, from inside the callback, with one constant path, and
//! does nothing else. Whatever a request costs with it is the daemon's own
//! cost: the limit the urdma provider is measured against.
//!
//! A test fixture, not shipped; it panics on nothing and checks only what
//! the daemon could get wrong.

use acm_prov_sys::{
    acm_address, acm_device, acm_endpoint, acm_msg, acm_port, acm_provider, ibv_event_type,
    ACM_EP_INFO_PATH, ACM_MSG_EP_LENGTH, ACM_MSG_HDR_LENGTH, ACM_OP_ACK,
    ACM_PATH_FLAGS_PRIMARY_ROUTE, ACM_PROV_VERSION,
};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type Response = unsafe extern "C" fn(u64, *mut acm_msg) -> c_int;

/// `acm_resolve_response` and `acm_query_response`, found in the daemon.
static RESPONSES: OnceLock<Option<(Response, Response)>> = OnceLock::new();

fn lookup(name: &std::ffi::CStr) -> Option<Response> {
    // SAFETY: dlsym has no preconditions; a non-NULL result is the daemon's
    // function of that name, whose prototype is `Response`.
    unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
        (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, Response>(p))
    }
}

/// Any non-NULL value: the daemon only compares contexts with NULL.
const CTX: *mut c_void = std::ptr::dangling_mut::<c_void>();

fn set(out: *mut *mut c_void) -> c_int {
    if out.is_null() {
        return -1;
    }
    // SAFETY: the daemon passes the address of its context field.
    unsafe { *out = CTX };
    0
}

unsafe extern "C" fn open_device(_: *const acm_device, ctx: *mut *mut c_void) -> c_int {
    set(ctx)
}
unsafe extern "C" fn open_port(_: *const acm_port, _: *mut c_void, ctx: *mut *mut c_void) -> c_int {
    set(ctx)
}
unsafe extern "C" fn open_endpoint(
    _: *const acm_endpoint,
    _: *mut c_void,
    ctx: *mut *mut c_void,
) -> c_int {
    set(ctx)
}
unsafe extern "C" fn add_address(
    _: *const acm_address,
    _: *mut c_void,
    ctx: *mut *mut c_void,
) -> c_int {
    set(ctx)
}
unsafe extern "C" fn close(_: *mut c_void) {}

/// The constant path: fe80::1 → fe80::2, P_Key 0xffff, 4096/100 Gb/s.
fn path() -> [u8; 64] {
    let mut p = [0u8; 64];
    p[8] = 0xfe;
    p[9] = 0x80;
    p[23] = 2;
    p[24] = 0xfe;
    p[25] = 0x80;
    p[39] = 1;
    p[49] = 0x81;
    p[50] = 0xff;
    p[51] = 0xff;
    p[54] = 0x85;
    p[55] = 0x90;
    p[56] = 0x92;
    p
}

unsafe extern "C" fn resolve(_: *mut c_void, msg: *mut acm_msg, id: u64) -> c_int {
    let Some(Some((respond, _))) = RESPONSES.get() else {
        return -1;
    };
    // SAFETY: NULL or the daemon's whole message, valid during the call.
    let Some(m) = (unsafe { msg.as_mut() }) else {
        return -1;
    };
    m.hdr.status = 0;
    m.hdr.data = [0; 3];
    m.hdr.length = (ACM_MSG_HDR_LENGTH + ACM_MSG_EP_LENGTH) as u16;
    // SAFETY: the message is a whole struct acm_msg; entry 0 is the 72
    // bytes after the 16-byte header.
    let entry =
        unsafe { std::slice::from_raw_parts_mut((m as *mut acm_msg as *mut u8).add(16), 72) };
    entry[0..4].copy_from_slice(&ACM_PATH_FLAGS_PRIMARY_ROUTE.to_ne_bytes());
    entry[4..6].copy_from_slice(&(ACM_EP_INFO_PATH as u16).to_ne_bytes());
    entry[6..8].fill(0);
    entry[8..].copy_from_slice(&path());
    // SAFETY: a valid message and the id the daemon gave for it.
    unsafe { respond(id, m) }
}

unsafe extern "C" fn query(_: *mut c_void, msg: *mut acm_msg, id: u64) -> c_int {
    let Some(Some((_, respond))) = RESPONSES.get() else {
        return -1;
    };
    // SAFETY: NULL or the daemon's whole message, valid during the call.
    let Some(m) = (unsafe { msg.as_mut() }) else {
        return -1;
    };
    m.hdr.opcode |= ACM_OP_ACK as u8;
    m.hdr.status = 0;
    // SAFETY: a valid message and the id the daemon gave for it.
    unsafe { respond(id, m) }
}

unsafe extern "C" fn handle_event(_: *mut c_void, _: ibv_event_type) -> c_int {
    0
}

unsafe extern "C" fn query_perf(_: *mut c_void, values: *mut u64, cnt: *mut u8) {
    if values.is_null() || cnt.is_null() {
        return;
    }
    // SAFETY: the daemon's buffer holds 72 values; seven zeros.
    unsafe {
        std::ptr::write_bytes(values, 0, 7);
        *cnt = 7;
    }
}

struct Vtable(acm_provider);
// SAFETY: immutable; its only pointer is to a static C string.
unsafe impl Sync for Vtable {}

static PROVIDER: Vtable = Vtable(acm_provider {
    size: std::mem::size_of::<acm_provider>(),
    version: ACM_PROV_VERSION,
    name: c"null".as_ptr(),
    open_device: Some(open_device),
    close_device: Some(close),
    open_port: Some(open_port),
    close_port: Some(close),
    open_endpoint: Some(open_endpoint),
    close_endpoint: Some(close),
    add_address: Some(add_address),
    remove_address: Some(close),
    resolve: Some(resolve),
    query: Some(query),
    handle_event: Some(handle_event),
    query_perf: Some(query_perf),
});

/// # Safety
/// `info` and `version` must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn provider_query(info: *mut *mut acm_provider, version: *mut u32) -> c_int {
    let found = RESPONSES.get_or_init(|| {
        Some((
            lookup(c"acm_resolve_response")?,
            lookup(c"acm_query_response")?,
        ))
    });
    if found.is_none() {
        // Not inside ibacm: fail the load instead of crashing later.
        return -1;
    }
    if !info.is_null() {
        // SAFETY: non-NULL out-pointer from the daemon; a static vtable.
        unsafe { *info = std::ptr::addr_of!(PROVIDER.0) as *mut acm_provider };
    }
    if !version.is_null() {
        // SAFETY: non-NULL out-pointer from the daemon.
        unsafe { *version = ACM_PROV_VERSION };
    }
    0
}
