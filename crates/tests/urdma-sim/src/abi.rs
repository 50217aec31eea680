//! The C entry points that replace libibverbs and libibumad when this
//! library is preloaded. This is the only module with `unsafe`: it turns the
//! daemon's raw pointers into lookups in `state` and writes answers back.
//!
//! The definitions are unversioned; the dynamic linker binds the daemon's
//! `@IBVERBS_1.1`/`@IBUMAD_1.0` references to them because a preloaded
//! object is searched first.

use crate::state::{sim, EventChannel, OpenContext};
use acm_prov_sys as sys;
use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

/// The `ibv_device`s handed out. They are never freed: real libibverbs
/// keeps a device alive while any context uses it, and the daemon frees the
/// list right after opening the devices.
struct DeviceTable(Vec<*mut sys::ibv_device>);

// SAFETY: the pointers are written once, before the table is published, and
// only read afterwards (by the daemon, through the pointers we hand out).
unsafe impl Send for DeviceTable {}
// SAFETY: as above; the table itself is immutable once built.
unsafe impl Sync for DeviceTable {}

static DEVICES: OnceLock<DeviceTable> = OnceLock::new();

fn devices() -> &'static [*mut sys::ibv_device] {
    &DEVICES
        .get_or_init(|| {
            let table = sim()
                .device_names()
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let mut dev = sys::ibv_device {
                        node_type: sys::ibv_node_type_IBV_NODE_CA,
                        transport_type: sys::ibv_transport_type_IBV_TRANSPORT_IB,
                        ..Default::default()
                    };
                    copy_str(&mut dev.name, name);
                    copy_str(&mut dev.dev_name, &format!("uverbs{i}"));
                    copy_str(
                        &mut dev.dev_path,
                        &format!("/sys/class/infiniband_verbs/uverbs{i}"),
                    );
                    copy_str(
                        &mut dev.ibdev_path,
                        &format!("/sys/class/infiniband/{name}"),
                    );
                    Box::into_raw(Box::new(dev))
                })
                .collect();
            DeviceTable(table)
        })
        .0
}

/// NUL-terminated copy, truncated to fit (names are checked to fit when the
/// config is parsed).
fn copy_str(dst: &mut [c_char], src: &str) {
    let n = src.len().min(dst.len() - 1);
    for (d, s) in dst.iter_mut().zip(&src.as_bytes()[..n]) {
        *d = *s as c_char;
    }
    dst[n] = 0;
}

fn device_index(dev: *mut sys::ibv_device) -> Option<usize> {
    devices().iter().position(|&d| d == dev)
}

fn set_errno(code: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = code };
}

fn eventfd(flags: c_int) -> io::Result<File> {
    // SAFETY: plain syscall wrapper, no pointers involved.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Creates the control FIFO, accepting one left from an earlier run.
pub fn make_fifo(path: &Path) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c_path` is a valid NUL-terminated string for the call.
    if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_fifo() => Ok(()),
        _ => Err(err),
    }
}

// ---------------------------------------------------------------- verbs

#[no_mangle]
pub extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut sys::ibv_device {
    crate::control::start(sim(), make_fifo);
    let devs = devices();
    // SAFETY: calloc'd so that the caller's ibv_free_device_list (which we
    // also define) can release it with free(); one extra NULL terminator.
    let list = unsafe { libc::calloc(devs.len() + 1, std::mem::size_of::<*mut sys::ibv_device>()) }
        as *mut *mut sys::ibv_device;
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    for (i, &d) in devs.iter().enumerate() {
        // SAFETY: `list` has room for devs.len() + 1 pointers.
        unsafe { list.add(i).write(d) };
    }
    if !num_devices.is_null() {
        // SAFETY: the caller passes a valid int or NULL (checked).
        unsafe { num_devices.write(devs.len() as c_int) };
    }
    list
}

#[no_mangle]
pub extern "C" fn ibv_free_device_list(list: *mut *mut sys::ibv_device) {
    // SAFETY: `list` came from our ibv_get_device_list (calloc) or is NULL.
    unsafe { libc::free(list.cast()) };
}

#[no_mangle]
pub extern "C" fn ibv_get_device_guid(device: *mut sys::ibv_device) -> sys::__be64 {
    device_index(device)
        .and_then(|i| sim().with_device(i, |d| d.node_guid.to_be()))
        .unwrap_or(0)
}

/// librdmacm sorts devices by this; -1 ("no kernel index") makes it sort by
/// GUID instead of asking sysfs/netlink about a device the kernel lacks.
#[no_mangle]
pub extern "C" fn ibv_get_device_index(_device: *mut sys::ibv_device) -> c_int {
    -1
}

#[no_mangle]
pub extern "C" fn ibv_open_device(device: *mut sys::ibv_device) -> *mut sys::ibv_context {
    let Some(index) = device_index(device) else {
        set_errno(libc::ENODEV);
        return ptr::null_mut();
    };
    let events = match eventfd(libc::EFD_SEMAPHORE) {
        Ok(f) => Arc::new(EventChannel::new(f)),
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EMFILE));
            return ptr::null_mut();
        }
    };
    let ctx = Box::into_raw(Box::new(sys::ibv_context {
        device,
        cmd_fd: -1,
        async_fd: events.fd().as_raw_fd(),
        num_comp_vectors: 1,
        // NULL (not the "extended ABI" marker) makes verbs.h's inline
        // ibv_query_port fall back to our exported, compat-layout one.
        abi_compat: ptr::null_mut(),
        ..Default::default()
    }));
    sim().register_context(
        ctx as usize,
        OpenContext {
            device: index,
            events,
        },
    );
    ctx
}

#[no_mangle]
pub extern "C" fn ibv_close_device(context: *mut sys::ibv_context) -> c_int {
    if sim().unregister_context(context as usize).is_none() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the address was registered by ibv_open_device, so it is a
    // Box we leaked there and nobody else frees; the eventfd closes when the
    // last Arc of its channel drops.
    drop(unsafe { Box::from_raw(context) });
    0
}

#[no_mangle]
pub extern "C" fn ibv_query_device(
    context: *mut sys::ibv_context,
    attr: *mut sys::ibv_device_attr,
) -> c_int {
    let Some(ctx) = context_or_errno(context) else {
        return libc::EINVAL;
    };
    let Some(mut out) = sim().with_device(ctx.device, |d| sys::ibv_device_attr {
        node_guid: d.node_guid.to_be(),
        sys_image_guid: d.node_guid.to_be(),
        max_pkeys: d
            .ports
            .iter()
            .flatten()
            .map(|p| p.pkeys.len())
            .max()
            .unwrap_or(0) as u16,
        phys_port_cnt: d.ports.len() as u8,
        max_mr_size: u64::MAX,
        page_size_cap: 0x1000,
        ..Default::default()
    }) else {
        return libc::ENODEV;
    };
    copy_str(&mut out.fw_ver, "0.1.0 (urdma-sim)");
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller passes a writable ibv_device_attr (checked non-NULL).
    unsafe { attr.write(out) };
    0
}

fn context_or_errno(context: *mut sys::ibv_context) -> Option<OpenContext> {
    let ctx = sim().context(context as usize);
    if ctx.is_none() {
        set_errno(libc::EINVAL);
    }
    ctx
}

/// Receives the caller's `ibv_port_attr` cast to the old "compat" struct,
/// which ends before `port_cap_flags2`: only the fields up to `link_layer`
/// may be written (the inline caller has zeroed the whole struct).
#[no_mangle]
pub extern "C" fn ibv_query_port(
    context: *mut sys::ibv_context,
    port_num: u8,
    port_attr: *mut sys::_compat_ibv_port_attr,
) -> c_int {
    let Some(ctx) = context_or_errno(context) else {
        return libc::EINVAL;
    };
    let Some(port) = sim().with_port(ctx.device, port_num, |p| p.clone()) else {
        return libc::EINVAL;
    };
    if port_attr.is_null() {
        return libc::EINVAL;
    }
    let a = port_attr.cast::<sys::ibv_port_attr>();
    // SAFETY: `a` points to at least the compat prefix of an ibv_port_attr;
    // each write goes through a field place (no reference to the whole
    // struct is formed) and every field written lies in that prefix.
    unsafe {
        ptr::addr_of_mut!((*a).state).write(port.state);
        ptr::addr_of_mut!((*a).max_mtu).write(port.max_mtu);
        ptr::addr_of_mut!((*a).active_mtu).write(port.active_mtu);
        ptr::addr_of_mut!((*a).gid_tbl_len).write(port.gids.len() as c_int);
        ptr::addr_of_mut!((*a).port_cap_flags).write(0);
        ptr::addr_of_mut!((*a).max_msg_sz).write(0x8000_0000);
        ptr::addr_of_mut!((*a).bad_pkey_cntr).write(0);
        ptr::addr_of_mut!((*a).qkey_viol_cntr).write(0);
        ptr::addr_of_mut!((*a).pkey_tbl_len).write(port.pkeys.len() as u16);
        ptr::addr_of_mut!((*a).lid).write(port.lid);
        ptr::addr_of_mut!((*a).sm_lid).write(port.sm_lid);
        ptr::addr_of_mut!((*a).lmc).write(port.lmc);
        ptr::addr_of_mut!((*a).max_vl_num).write(1);
        ptr::addr_of_mut!((*a).sm_sl).write(port.sm_sl);
        ptr::addr_of_mut!((*a).subnet_timeout).write(port.subnet_timeout);
        ptr::addr_of_mut!((*a).init_type_reply).write(0);
        ptr::addr_of_mut!((*a).active_width).write(port.width);
        ptr::addr_of_mut!((*a).active_speed).write(port.speed);
        ptr::addr_of_mut!((*a).phys_state).write(port.phys_state());
        ptr::addr_of_mut!((*a).link_layer).write(port.link_layer);
    }
    0
}

/// Beyond the table the call fails, which is how the daemon finds the table
/// size (it stops at the first error or zero interface id).
#[no_mangle]
pub extern "C" fn ibv_query_gid(
    context: *mut sys::ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut sys::ibv_gid,
) -> c_int {
    let Some(ctx) = context_or_errno(context) else {
        return -1;
    };
    let found = usize::try_from(index).ok().and_then(|i| {
        sim()
            .with_port(ctx.device, port_num, |p| p.gids.get(i).copied())
            .flatten()
    });
    match found {
        Some(raw) if !gid.is_null() => {
            // SAFETY: union ibv_gid is 16 plain bytes; the caller passes a
            // writable one (checked non-NULL).
            unsafe { gid.cast::<[u8; 16]>().write_unaligned(raw) };
            0
        }
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[no_mangle]
pub extern "C" fn ibv_query_pkey(
    context: *mut sys::ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut sys::__be16,
) -> c_int {
    let Some(ctx) = context_or_errno(context) else {
        return -1;
    };
    let found = usize::try_from(index).ok().and_then(|i| {
        sim()
            .with_port(ctx.device, port_num, |p| p.pkeys.get(i).copied())
            .flatten()
    });
    match found {
        Some(value) if !pkey.is_null() => {
            // SAFETY: the caller passes a writable __be16 (checked non-NULL).
            unsafe { pkey.write_unaligned(value.to_be()) };
            0
        }
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[no_mangle]
pub extern "C" fn ibv_get_async_event(
    context: *mut sys::ibv_context,
    event: *mut sys::ibv_async_event,
) -> c_int {
    let Some(ctx) = context_or_errno(context) else {
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let Some(pending) = ctx.events.pop() else {
        set_errno(libc::EAGAIN);
        return -1;
    };
    let mut out = sys::ibv_async_event {
        event_type: pending.event_type,
        ..Default::default()
    };
    out.element.port_num = c_int::from(pending.port);
    // SAFETY: the caller passes a writable ibv_async_event (checked).
    unsafe { event.write(out) };
    0
}

/// Port events hold no resources, so there is nothing to release.
#[no_mangle]
pub extern "C" fn ibv_ack_async_event(_event: *mut sys::ibv_async_event) {}

// ----------------------------------------------------------------- umad

static UMAD_DEBUG: AtomicI32 = AtomicI32::new(0);
static UMAD_AGENTS: AtomicI32 = AtomicI32::new(0);

#[no_mangle]
pub extern "C" fn umad_init() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn umad_done() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn umad_debug(level: c_int) -> c_int {
    if level >= 0 {
        UMAD_DEBUG.swap(level, Ordering::Relaxed)
    } else {
        UMAD_DEBUG.load(Ordering::Relaxed)
    }
}

/// The port's fd is an eventfd nobody writes: the daemon's SA thread can
/// poll it (and make it non-blocking) but it never becomes readable.
#[no_mangle]
pub extern "C" fn umad_open_port(_ca_name: *const c_char, _portnum: c_int) -> c_int {
    match eventfd(0) {
        Ok(f) => sim().umad_open(f),
        Err(e) => -e.raw_os_error().unwrap_or(libc::EMFILE),
    }
}

#[no_mangle]
pub extern "C" fn umad_close_port(portid: c_int) -> c_int {
    if sim().umad_close(portid) {
        0
    } else {
        -libc::EINVAL
    }
}

#[no_mangle]
pub extern "C" fn umad_get_fd(portid: c_int) -> c_int {
    sim()
        .with_umad(portid, |f| f.as_raw_fd())
        .unwrap_or(-libc::EINVAL)
}

#[no_mangle]
pub extern "C" fn umad_register(
    portid: c_int,
    _mgmt_class: c_int,
    _mgmt_version: c_int,
    _rmpp_version: u8,
    _method_mask: *mut c_long,
) -> c_int {
    match sim().with_umad(portid, |_| ()) {
        Some(()) => UMAD_AGENTS.fetch_add(1, Ordering::Relaxed),
        None => -libc::EINVAL,
    }
}

/// Dropped on the floor: there is no fabric, so SA queries time out.
#[no_mangle]
pub extern "C" fn umad_send(
    _portid: c_int,
    _agentid: c_int,
    _umad: *mut c_void,
    _length: c_int,
    _timeout_ms: c_int,
    _retries: c_int,
) -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn umad_recv(
    _portid: c_int,
    _umad: *mut c_void,
    _length: *mut c_int,
    _timeout_ms: c_int,
) -> c_int {
    -libc::EWOULDBLOCK
}
