//! The daemon's exported helpers, found at run time.
//!
//! They live in the `ibacm` executable, not in a library. Linking against
//! them would make `dlopen` fail with "undefined symbol" in any other host
//! (and in unit tests); looking them up with `dlsym(RTLD_DEFAULT)` turns a
//! missing symbol into a clear error instead.

use crate::daemon::{Counter, Daemon};
use crate::request::msg::MsgBuf;
use acm_prov_sys::acm_msg;
use std::ffi::{c_char, c_int, CStr, CString};

type AcmWrite = unsafe extern "C" fn(c_int, *const c_char, ...);
type AcmResponse = unsafe extern "C" fn(u64, *mut acm_msg) -> c_int;
type AcmGetOptsFile = unsafe extern "C" fn() -> *const c_char;
type AcmIncrementCounter = unsafe extern "C" fn(c_int);

/// The daemon's helpers, as resolved once at load: plain function
/// pointers into the executable, so copies are free and never dangle.
#[derive(Clone, Copy)]
pub struct Ibacm {
    write: AcmWrite,
    resolve_response: AcmResponse,
    query_response: AcmResponse,
    get_opts_file: AcmGetOptsFile,
    increment_counter: AcmIncrementCounter,
}

fn lookup(name: &CStr) -> Result<*mut libc::c_void, String> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no
    // preconditions; the result is checked for NULL.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        Err(format!(
            "the host process does not export {} (is this provider loaded by ibacm?)",
            name.to_string_lossy()
        ))
    } else {
        Ok(p)
    }
}

impl Ibacm {
    pub fn resolve() -> Result<Ibacm, String> {
        // SAFETY: each symbol is the function of that name declared in
        // <infiniband/acm_prov.h>; the transmutes give it that prototype.
        unsafe {
            Ok(Ibacm {
                write: std::mem::transmute::<*mut libc::c_void, AcmWrite>(lookup(c"acm_write")?),
                resolve_response: std::mem::transmute::<*mut libc::c_void, AcmResponse>(lookup(
                    c"acm_resolve_response",
                )?),
                query_response: std::mem::transmute::<*mut libc::c_void, AcmResponse>(lookup(
                    c"acm_query_response",
                )?),
                get_opts_file: std::mem::transmute::<*mut libc::c_void, AcmGetOptsFile>(lookup(
                    c"acm_get_opts_file",
                )?),
                increment_counter: std::mem::transmute::<*mut libc::c_void, AcmIncrementCounter>(
                    lookup(c"acm_increment_counter")?,
                ),
            })
        }
    }

    /// `acm_write(level, "%s: %s\n", "urdma", msg)`: a constant format, so
    /// nothing in a message is ever interpreted by printf.
    pub fn write(&self, level: u8, msg: &str) {
        let text = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
        // SAFETY: acm_write is printf-like; the format takes exactly the two
        // NUL-terminated strings passed, which outlive the call.
        unsafe {
            (self.write)(
                c_int::from(level),
                c"%s: %s\n".as_ptr(),
                c"urdma".as_ptr(),
                text.as_ptr(),
            )
        }
    }

    pub fn opts_file(&self) -> Option<String> {
        // SAFETY: acm_get_opts_file returns NULL or a NUL-terminated string
        // owned by the daemon for its whole life.
        unsafe {
            let p = (self.get_opts_file)();
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
        }
    }
}

impl Daemon for Ibacm {
    fn resolve_response(&self, id: u64, msg: &MsgBuf) -> c_int {
        // SAFETY: MsgBuf has the size and alignment of struct acm_msg; the
        // daemon only reads it during the call (it sends hdr.length bytes).
        unsafe { (self.resolve_response)(id, msg.0.as_ptr() as *mut acm_msg) }
    }

    fn query_response(&self, id: u64, msg: &MsgBuf) -> c_int {
        // SAFETY: as for resolve_response.
        unsafe { (self.query_response)(id, msg.0.as_ptr() as *mut acm_msg) }
    }

    fn increment_counter(&self, counter: Counter) {
        // SAFETY: the daemon range-checks the counter; ours are 3..=6.
        unsafe { (self.increment_counter)(counter as c_int) }
    }

    /// ibacm 44 does not ignore SIGPIPE, and a reply written to a client
    /// that hung up raises it: the whole daemon dies (seen with 2,000
    /// clients hanging up while their lookups ran). With SIGPIPE blocked on
    /// this thread the write fails with EPIPE instead, which the daemon
    /// handles; a SIGPIPE raised meanwhile is taken off the pending set
    /// before the thread's mask is restored, so it is never delivered.
    fn answer_late(&self, send: &mut dyn FnMut()) {
        let _blocked = SigpipeBlocked::new();
        send();
    }
}

/// SIGPIPE blocked on this thread for the value's lifetime (also if a
/// panic unwinds through it).
struct SigpipeBlocked {
    pipe: libc::sigset_t,
    old: libc::sigset_t,
    was_pending: bool,
}

impl SigpipeBlocked {
    fn new() -> SigpipeBlocked {
        // SAFETY: both sets are initialised (sigemptyset, or filled in by
        // pthread_sigmask) before they are read; pthread_sigmask changes
        // only the calling thread's mask.
        unsafe {
            let mut pipe: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut pipe);
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
            SigpipeBlocked {
                pipe,
                old,
                was_pending: sigpipe_pending(),
            }
        }
    }
}

fn sigpipe_pending() -> bool {
    // SAFETY: sigpending fills the set it is given, which is then only read.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, libc::SIGPIPE) == 1
    }
}

impl Drop for SigpipeBlocked {
    fn drop(&mut self) {
        // SAFETY: `pipe` and `old` were initialised in `new`; a zero
        // timeout makes sigtimedwait take a pending SIGPIPE without ever
        // waiting; pthread_sigmask restores this thread's own mask.
        unsafe {
            if !self.was_pending && sigpipe_pending() {
                let now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&self.pipe, std::ptr::null_mut(), &now);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}
