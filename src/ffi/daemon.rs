//! The daemon's exported helpers, found at run time.
//!
//! They live in the `ibacm` executable, not in a library. Linking against
//! them would make `dlopen` fail with "undefined symbol" in any other host
//! (and in unit tests); looking them up with `dlsym(RTLD_DEFAULT)` turns a
//! missing symbol into a clear error instead.

use crate::host::{Counter, Host};
use crate::msg::MsgBuf;
use acm_prov_sys::acm_msg;
use std::ffi::{c_char, c_int, CStr, CString};

type AcmWrite = unsafe extern "C" fn(c_int, *const c_char, ...);
type AcmResponse = unsafe extern "C" fn(u64, *mut acm_msg) -> c_int;
type AcmGetOptsFile = unsafe extern "C" fn() -> *const c_char;
type AcmIncrementCounter = unsafe extern "C" fn(c_int);

/// The daemon's helpers, as resolved once at load: plain function
/// pointers into the executable, so copies are free and never dangle.
#[derive(Clone, Copy)]
pub struct Daemon {
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

impl Daemon {
    pub fn resolve() -> Result<Daemon, String> {
        // SAFETY: each symbol is the function of that name declared in
        // <infiniband/acm_prov.h>; the transmutes give it that prototype.
        unsafe {
            Ok(Daemon {
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

impl Host for Daemon {
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
}
