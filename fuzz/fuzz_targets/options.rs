//! Any options file: parsed without panicking; every diagnostic names a
//! line of the file, and what was not reported as bad was applied.
#![no_main]

use ibacm_urdma::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (_cfg, diags) = Config::parse(&text, "opts");
    let lines = text.lines().count();
    for d in diags {
        assert!(d.line >= 1 && d.line <= lines, "{d}");
    }
});
