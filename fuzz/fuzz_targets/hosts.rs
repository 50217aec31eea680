//! Any hosts file, as bytes: parsed without panicking, every diagnostic names a line
//! of the file, and every address the file binds resolves to a non-zero GID.
#![no_main]

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::hosts::Hosts;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (hosts, diags) = Hosts::parse(data, "hosts");
    let lines = acm_proto::text::lines(data).count();
    for d in &diags {
        assert!(d.line >= 1 && d.line <= lines, "{d}");
    }
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(a) = line
            .split_ascii_whitespace()
            .next()
            .and_then(Address::parse_host)
        {
            if let Some(r) = hosts.lookup(&a) {
                assert!(!r.gid.is_zero());
            }
        }
    }
});
