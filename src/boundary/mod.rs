//! The C boundary: `provider_query`, the vtable the daemon calls, and the
//! conversions between the daemon's pointers and the engine's safe values.
//!
//! Every `unsafe` block of the provider is in this module. Every entry point
//! runs inside [`guard`], so a panic is logged and turned into an error
//! value instead of unwinding into C.

mod ibacm;
mod verbs;

use crate::addr::{Address, ADDR_LEN};
use crate::config::Config;
use crate::daemon::{Daemon, COUNTERS};
use crate::engine::{Engine, Topology};
use crate::handle::Handle;
use crate::local::Refused;
use crate::request::msg::{self, MsgBuf};
use crate::runtime::Runtime;
use crate::threads::panic_message;
use acm_prov_sys::{
    acm_address, acm_device, acm_endpoint, acm_msg, acm_port, acm_provider, ACM_STATUS_ENOMEM,
};
use ibacm::Ibacm;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::Instant;

/// What an entry point returns when its body panicked: the error value of
/// its return type, so that no entry point writes one by hand.
trait OnPanic {
    fn on_panic() -> Self;
}

/// The daemon's callbacks report failure as -1.
impl OnPanic for std::ffi::c_int {
    fn on_panic() -> Self {
        -1
    }
}

impl OnPanic for () {
    fn on_panic() -> Self {}
}

impl<T> OnPanic for Option<T> {
    fn on_panic() -> Self {
        None
    }
}

/// Runs an entry point's body; a panic is logged and becomes the return
/// type's error value ([`OnPanic`]).
fn guard<T: OnPanic>(entry: &str, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        internal_error(entry, &*payload);
        T::on_panic()
    })
}

/// Out of line: formatting `entry` in place kept it in memory, stored on
/// every call of every entry point.
#[cold]
#[inline(never)]
fn internal_error(entry: &str, payload: &(dyn std::any::Any + Send)) {
    log::error!(
        "{entry}: internal error, request failed: {}",
        panic_message(payload)
    );
}

/// The provider, from `provider_query` until the library is unloaded.
static RUNTIME: OnceLock<Runtime<Ibacm>> = OnceLock::new();

fn runtime() -> Option<&'static Runtime<Ibacm>> {
    let r = RUNTIME.get();
    if r.is_none() {
        log::error!("called before provider_query succeeded");
    }
    r
}

/// Runs `f` on the engine (see [`Runtime::with_engine`]).
#[inline]
fn with_engine<R>(f: impl FnOnce(&mut Engine<Ibacm>) -> R) -> Option<R> {
    Some(runtime()?.with_engine(f))
}

/// Runs when the library is unloaded (`dlclose`) or the process exits
/// normally: the provider's threads must not run on in unmapped code.
extern "C" fn on_unload() {
    guard("unload", || {
        if let Some(r) = RUNTIME.get() {
            r.stop();
        }
    });
}

// SAFETY: an entry in .fini_array is called once, with no arguments, by
// the dynamic loader at unload or by exit(); `on_unload` has exactly that
// signature and never unwinds (it runs inside the guard).
#[used]
#[link_section = ".fini_array"]
static ON_UNLOAD: extern "C" fn() = on_unload;

/// Contexts handed to the daemon are engine ids: never zero, never
/// dereferenced, so a stale one is an unknown id rather than a dangling
/// pointer.
fn to_ctx(id: impl Handle) -> *mut c_void {
    id.raw() as usize as *mut c_void
}

/// The handle of the kind the callback takes; one of another kind (or
/// NULL) names nothing the engine knows.
fn from_ctx<H: Handle>(ctx: *mut c_void) -> H {
    H::from_raw(ctx as usize as u64)
}

/// Stores a context through the daemon's out-pointer.
fn set_ctx(out: *mut *mut c_void, id: impl Handle) -> c_int {
    if out.is_null() {
        log::error!("NULL context out-pointer");
        return -1;
    }
    // SAFETY: non-NULL, and the daemon passes the address of its own
    // context field, valid for writes during the call.
    unsafe { *out = to_ctx(id) };
    0
}

/// The provider as the daemon's options file configures it, logging
/// through the daemon from the first line on.
fn load(daemon: Ibacm) -> Runtime<Ibacm> {
    let opts = daemon.opts_file();
    let (cfg, diags) = match &opts {
        Some(path) => Config::load(std::path::Path::new(path)),
        None => (Config::default(), Vec::new()),
    };
    crate::log::install(
        move || Box::new(move |level, msg| daemon.write(level, msg)),
        cfg.daemon_log_level,
    );
    for d in &diags {
        log::error!("{d}");
    }
    log::info!("options from {}", opts.as_deref().unwrap_or("(none)"));
    Runtime::new(daemon, cfg, opts.map(std::path::PathBuf::from))
}

/// The entry point the daemon looks up after `dlopen`.
///
/// # Safety
/// `info` and `version` must be NULL or valid for writes (the daemon passes
/// the addresses of two locals).
#[no_mangle]
pub unsafe extern "C" fn provider_query(info: *mut *mut acm_provider, version: *mut u32) -> c_int {
    guard("provider_query", || {
        if RUNTIME.get().is_none() {
            let daemon = match Ibacm::resolve() {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("ibacm-urdma: {e}");
                    return -1;
                }
            };
            let _ = RUNTIME.set(load(daemon));
        }
        if !info.is_null() {
            // SAFETY: non-NULL out-pointer from the daemon; the vtable is a
            // static that lives as long as the library stays loaded.
            unsafe { *info = std::ptr::addr_of!(PROVIDER.0) as *mut acm_provider };
        }
        if !version.is_null() {
            // SAFETY: non-NULL out-pointer from the daemon.
            unsafe { *version = acm_prov_sys::ACM_PROV_VERSION };
        }
        0
    })
}

/// The vtable, with its name pointer: `Sync` because it is never written.
struct Vtable(acm_provider);
// SAFETY: the table is immutable; its only pointer is to a static C string.
unsafe impl Sync for Vtable {}

static PROVIDER: Vtable = Vtable(acm_provider {
    size: std::mem::size_of::<acm_provider>(),
    version: acm_prov_sys::ACM_PROV_VERSION,
    name: c"urdma".as_ptr(),
    open_device: Some(open_device),
    close_device: Some(close_device),
    open_port: Some(open_port),
    close_port: Some(close_port),
    open_endpoint: Some(open_endpoint),
    close_endpoint: Some(close_endpoint),
    add_address: Some(add_address),
    remove_address: Some(remove_address),
    resolve: Some(resolve),
    query: Some(query),
    handle_event: Some(handle_event),
    query_perf: Some(query_perf),
});

unsafe extern "C" fn open_device(
    device: *const acm_device,
    dev_context: *mut *mut c_void,
) -> c_int {
    guard("open_device", || {
        // SAFETY: the daemon passes NULL or its device object, which lives
        // forever.
        let Some(dev) = (unsafe { device.as_ref() }) else {
            log::error!("open_device: NULL device");
            return -1;
        };
        let Some(id) = with_engine(|e| e.open_device(u64::from_be(dev.dev_guid))) else {
            return -1;
        };
        if let Some(r) = runtime() {
            r.serve();
        }
        set_ctx(dev_context, id)
    })
}

unsafe extern "C" fn close_device(dev_context: *mut c_void) {
    guard("close_device", || {
        with_engine(|e| e.change(Topology::CloseDevice(from_ctx(dev_context))));
    })
}

unsafe extern "C" fn open_port(
    port: *const acm_port,
    dev_context: *mut c_void,
    port_context: *mut *mut c_void,
) -> c_int {
    guard("open_port", || {
        // SAFETY: the daemon passes NULL or its port object, which lives
        // forever.
        let Some(port) = (unsafe { port.as_ref() }) else {
            log::error!("open_port: NULL port");
            return -1;
        };
        let Some(info) = verbs::port_info(port) else {
            return -1;
        };
        let Some(opened) = with_engine(|e| e.open_port(from_ctx(dev_context), info)) else {
            return -1;
        };
        match opened {
            Ok(id) => {
                if let Some(r) = runtime() {
                    r.start();
                }
                set_ctx(port_context, id)
            }
            Err(Refused::NotInfiniband(ll)) => {
                log::error!(
                    "port {}: link layer is {ll}, not InfiniBand; urdma serves only InfiniBand-link ports, port refused",
                    port.port_num
                );
                -1
            }
            Err(Refused::NoGid) => {
                log::error!("port {}: GID 0 is empty, port refused", port.port_num);
                -1
            }
            Err(Refused::UnknownDevice) => {
                log::error!(
                    "port {}: device context unknown, port refused",
                    port.port_num
                );
                -1
            }
        }
    })
}

unsafe extern "C" fn close_port(port_context: *mut c_void) {
    guard("close_port", || {
        with_engine(|e| e.change(Topology::ClosePort(from_ctx(port_context))));
    })
}

unsafe extern "C" fn open_endpoint(
    endpoint: *const acm_endpoint,
    port_context: *mut c_void,
    ep_context: *mut *mut c_void,
) -> c_int {
    guard("open_endpoint", || {
        // SAFETY: NULL or the daemon's endpoint, valid during the call (we
        // keep only the P_Key, never the pointer).
        let Some(ep) = (unsafe { endpoint.as_ref() }) else {
            log::error!("open_endpoint: NULL endpoint");
            return -1;
        };
        match with_engine(|e| e.open_endpoint(from_ctx(port_context), ep.pkey)).flatten() {
            Some(id) => set_ctx(ep_context, id),
            None => {
                log::error!("open_endpoint: unknown port context");
                -1
            }
        }
    })
}

unsafe extern "C" fn close_endpoint(ep_context: *mut c_void) {
    guard("close_endpoint", || {
        with_engine(|e| e.change(Topology::CloseEndpoint(from_ctx(ep_context))));
    })
}

unsafe extern "C" fn add_address(
    addr: *const acm_address,
    ep_context: *mut c_void,
    addr_context: *mut *mut c_void,
) -> c_int {
    guard("add_address", || {
        // SAFETY: NULL or the daemon's address, valid only during the call:
        // the type and the 64 address bytes are copied out here.
        let Some(a) = (unsafe { addr.as_ref() }) else {
            log::error!("add_address: NULL address");
            return -1;
        };
        // SAFETY: every bit pattern of the union is a valid byte array.
        let info: [u8; ADDR_LEN] = unsafe { a.info.addr };
        let address = match Address::from_wire(a.type_, &info) {
            Ok(address) => address,
            Err(err) => {
                log::error!(
                    "add_address: cannot use address of type {}: {err:?}",
                    a.type_
                );
                return -1;
            }
        };
        match with_engine(|e| e.add_address(from_ctx(ep_context), address)).flatten() {
            Some(id) => set_ctx(addr_context, id),
            None => {
                log::error!("add_address: unknown endpoint context");
                -1
            }
        }
    })
}

unsafe extern "C" fn remove_address(addr_context: *mut c_void) {
    guard("remove_address", || {
        with_engine(|e| e.change(Topology::RemoveAddress(from_ctx(addr_context))));
    })
}

/// The daemon's message as the engine's buffer type, to answer in place.
fn daemon_msg<'a>(msg: *mut acm_msg) -> Option<&'a mut MsgBuf> {
    // SAFETY: NULL or a whole struct acm_msg (ACM_MSG_SIZE bytes, 8-byte
    // aligned: the size and alignment of MsgBuf, for which every byte is
    // valid) that the daemon hands over for the duration of the call and
    // does not touch until it returns. The reference does not outlive the
    // callback: a request that must wait is copied by the engine.
    unsafe { msg.cast::<MsgBuf>().as_mut() }
}

/// Out of line, like [`internal_error`].
#[cold]
#[inline(never)]
fn null_message(entry: &str) {
    log::error!("{entry}: NULL message, nothing to answer");
}

/// Answers a request exactly once: `handle` turns the daemon's message into
/// its reply (true) or keeps a copy to answer later (false); if the engine
/// panics first, `on_error` turns it into an error reply instead.
fn answer(
    entry: &str,
    msg: *mut acm_msg,
    handle: impl FnOnce(&mut Engine<Ibacm>, &mut MsgBuf) -> bool,
    on_error: fn(&mut MsgBuf),
    send: impl FnOnce(&Ibacm, &MsgBuf) -> c_int,
) -> c_int {
    let Some(m) = daemon_msg(msg) else {
        null_message(entry);
        return -1;
    };
    let Some(r) = runtime() else {
        return -1;
    };
    let outcome = r.with_engine(|e| guard(entry, || Some(handle(e, m))));
    match outcome {
        Some(true) => send(r.daemon(), m),
        Some(false) => 0,
        None => {
            on_error(m);
            send(r.daemon(), m)
        }
    }
}

unsafe extern "C" fn resolve(addr_context: *mut c_void, msg: *mut acm_msg, id: u64) -> c_int {
    guard("resolve", || {
        answer(
            "resolve",
            msg,
            |e, m| e.resolve_in_place(from_ctx(addr_context), m, id, Instant::now),
            |m| m.make_resolve_error(ACM_STATUS_ENOMEM as u8),
            |d, reply| d.resolve_response(id, reply),
        )
    })
}

unsafe extern "C" fn query(addr_context: *mut c_void, msg: *mut acm_msg, id: u64) -> c_int {
    guard("query", || {
        answer(
            "query",
            msg,
            |e, m| {
                *m = e.query_at(from_ctx(addr_context), m, Instant::now()).0;
                true
            },
            |m| *m = msg::query_reply(m, ACM_STATUS_ENOMEM as u8, None),
            |d, reply| d.query_response(id, reply),
        )
    })
}

unsafe extern "C" fn handle_event(
    port_context: *mut c_void,
    event: acm_prov_sys::ibv_event_type,
) -> c_int {
    guard("handle_event", || {
        match with_engine(|e| {
            e.change(Topology::PortEvent {
                port: from_ctx(port_context),
                event,
            })
        }) {
            Some(()) => 0,
            None => -1,
        }
    })
}

unsafe extern "C" fn query_perf(ep_context: *mut c_void, values: *mut u64, cnt: *mut u8) {
    guard("query_perf", || {
        if values.is_null() || cnt.is_null() {
            log::error!("query_perf: NULL output");
            return;
        }
        let counters = with_engine(|e| e.counters(from_ctx(ep_context)))
            .flatten()
            .unwrap_or_else(|| {
                log::error!("query_perf: unknown endpoint context");
                [0; COUNTERS]
            });
        for (i, v) in counters.iter().enumerate() {
            // SAFETY: the daemon's buffer holds 72 values; we write 7.
            unsafe { values.add(i).write_unaligned(v.to_be()) };
        }
        // SAFETY: non-NULL count out-pointer from the daemon.
        unsafe { *cnt = COUNTERS as u8 };
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn the_vtable_is_complete_and_named() {
        let v = &PROVIDER.0;
        assert_eq!(v.size, 120);
        assert_eq!(v.version, 1);
        // SAFETY: a static C string.
        assert_eq!(unsafe { CStr::from_ptr(v.name) }, c"urdma");
        assert!(v.open_device.is_some() && v.close_device.is_some());
        assert!(v.open_port.is_some() && v.close_port.is_some());
        assert!(v.open_endpoint.is_some() && v.close_endpoint.is_some());
        assert!(v.add_address.is_some() && v.remove_address.is_some());
        assert!(v.resolve.is_some() && v.query.is_some());
        assert!(v.handle_event.is_some() && v.query_perf.is_some());
    }

    #[test]
    fn contexts_are_never_null() {
        use crate::handle::AddressId;
        assert!(!to_ctx(AddressId::from_raw(1)).is_null());
        let back: AddressId = from_ctx(to_ctx(AddressId::from_raw(42)));
        assert_eq!(back, AddressId::from_raw(42));
    }

    #[test]
    fn a_panic_becomes_the_error_value() {
        assert_eq!(guard("test", || -> std::ffi::c_int { panic!("boom") }), -1);
        assert_eq!(guard("test", || -> std::ffi::c_int { 3 }), 3);
        assert_eq!(guard("test", || -> Option<u8> { panic!("boom") }), None);
    }
}
