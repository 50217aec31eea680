//! Any options file, as bytes: parsed without panicking; every diagnostic
//! names a line of the file that is not a comment.
#![no_main]

use ibacm_urdma::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (_cfg, diags) = Config::parse(data, "opts");
    let lines: Vec<&[u8]> = acm_proto::text::lines(data)
        .map(|(_, l)| l)
        .collect();
    for d in diags {
        assert!(d.line >= 1 && d.line <= lines.len(), "{d}");
        assert!(!lines[d.line - 1].starts_with(b"#"), "{d}");
    }
});
