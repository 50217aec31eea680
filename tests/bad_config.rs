//! Malformed options and hosts-file lines: each one is reported exactly
//! once, at its `file:line`, saying what stays in force, and nothing else
//! in the file is lost.

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::hosts::Hosts;
use ibacm_urdma::config::Config;

/// (line, what its report must say). None of these is about discovery
/// itself, so each keeps the value in force and nothing else changes.
const BAD_OPTIONS: &[(&[u8], &str)] = &[
    (b"urdma_mtu 4097", "keeping urdma_mtu 4096"),
    (b"urdma_mtu abc", "keeping urdma_mtu 4096"),
    (b"urdma_mtu", "'urdma_mtu' has no value"),
    (b"urdma_mtu 10\xe924", "bad value for urdma_mtu: not valid UTF-8 text (byte 0xe9 at column 3); keeping urdma_mtu 4096"),
    (b"urdma_rate 33", "keeping urdma_rate 100"),
    (b"urdma_rate 0", "keeping urdma_rate 100"),
    // An earlier good line set 5: a bad one keeps what is in force.
    (b"urdma_sl 16", "keeping urdma_sl 5"),
    (b"urdma_sl -1", "keeping urdma_sl 5"),
    (
        b"urdma_packet_lifetime 64",
        "keeping urdma_packet_lifetime 18",
    ),
    (b"urdma_hop_limit 256", "keeping urdma_hop_limit 0"),
    (b"urdma_tclass 300", "keeping urdma_tclass 0"),
    (b"urdma_addr_timeout -2", "keeping urdma_addr_timeout 1440"),
    (b"urdma_route_timeout soon", "keeping urdma_route_timeout -1"),
    (b"urdma_timeout 0", "keeping urdma_timeout 500"),
    (b"urdma_retries 11", "keeping urdma_retries 2"),
    (
        b"urdma_negative_timeout -5",
        "keeping urdma_negative_timeout 5000",
    ),
    (b"urdma_derive eui64,arp", "keeping urdma_derive none"),
    (b"urdma_derive eui64,eui64", "listed twice"),
    (
        b"urdma_hosts_file",
        "keeping urdma_hosts_file /etc/rdma/ibacm_urdma_hosts.data",
    ),
    (b"urdma_reply_rate fast", "keeping urdma_reply_rate 5000"),
];

/// (line, what its report must say): lines that may be about whether,
/// where or how securely discovery runs. Each turns discovery off rather
/// than leave it on defaults, and says so.
const CLOSING_OPTIONS: &[(&[u8], &str)] = &[
    (
        b"urdma_discovery maybe",
        "bad value 'maybe' for urdma_discovery",
    ),
    (
        b"urdma_discovery_port 0",
        "bad value '0' for urdma_discovery_port",
    ),
    (
        b"urdma_discovery_port 70000",
        "bad value '70000' for urdma_discovery_port",
    ),
    (b"urdma_auth_key_file", "'urdma_auth_key_file' has no value"),
    (
        b"urdma_auth_key_file rel/key",
        "bad value 'rel/key' for urdma_auth_key_file",
    ),
    (
        b"urdma_discovery y\xe9s",
        "bad value for urdma_discovery: not valid UTF-8 text",
    ),
    (b"urdma_colour blue", "unknown key 'urdma_colour'"),
    (
        b"urdma_auth_key_fil\xe9 /etc/rdma/k",
        "key not valid UTF-8 text (byte 0xe9 at column 19)",
    ),
];

fn options(lines: &[(&[u8], &str)]) -> Vec<u8> {
    // Good lines around the bad ones: they must still take effect.
    let mut text = b"# options, with a Latin-1 comment: caf\xe9\nurdma_sl 5\n".to_vec();
    for (line, _) in lines {
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    text.extend_from_slice(b"urdma_mtu 1024\n");
    text
}

/// Each line of `table` (from line 3 of the file) has exactly one report,
/// at its line, saying `want` and ending with `ends`.
fn expect_reports(diags: &[ibacm_urdma::config::Diagnostic], table: &[(&[u8], &str)], ends: &str) {
    assert_eq!(diags.len(), table.len(), "{diags:#?}");
    for (i, ((line, want), d)) in table.iter().zip(diags).enumerate() {
        let line = String::from_utf8_lossy(line);
        assert_eq!(d.line, i + 3, "{line}");
        let shown = d.to_string();
        assert!(
            shown.starts_with(&format!("/etc/rdma/ibacm_opts.cfg:{}: ", i + 3)),
            "{shown}"
        );
        assert!(
            shown.contains(want) && shown.ends_with(ends),
            "`{line}` reported as `{shown}`, expected `{want}` ... `{ends}`"
        );
    }
}

const BAD_HOSTS: &[(&[u8], &str)] = &[
    (b"node fe80::zz", "'fe80::zz' is not a GID"),
    (b"lonely", "no GID after 'lonely'"),
    (b"10.0.0.9 ::", "GID :: is zero"),
    (b"x fe80::2 lid=0", "'0' is not a unicast LID"),
    (b"y fe80::2 lid=70000", "'70000' is not a unicast LID"),
    (b"z fe80::2 lid=49152", "'49152' is not a unicast LID"),
    (b"w fe80::2 color=red", "unknown field 'color=red'"),
    (
        b"a-name-that-is-far-too-long-to-fit-the-sixty-four-byte-field-of-acm",
        "is not an IPv4/IPv6 address or a host name",
    ),
    (
        b"caf\xe9 fe80::3",
        "not valid UTF-8 text (byte 0xe9 at column 4)",
    ),
    (
        b"v fe80::3 lid=\xff",
        "not valid UTF-8 text (byte 0xff at column 15)",
    ),
];

#[test]
fn every_bad_option_is_reported_once_where_it_is_and_the_rest_applies() {
    let (cfg, diags) = Config::parse(options(BAD_OPTIONS), "/etc/rdma/ibacm_opts.cfg");
    for (d, (_, want)) in diags.iter().zip(BAD_OPTIONS) {
        assert!(
            d.message.contains("keeping") || d.message.contains("listed twice"),
            "{d}: {want}"
        );
    }
    expect_reports(&diags, BAD_OPTIONS, "");
    assert_eq!((cfg.sl, cfg.mtu), (5, 1024), "good lines still apply");
    let defaults = Config {
        sl: 5,
        mtu: 1024,
        ..Config::default()
    };
    assert_eq!(
        cfg, defaults,
        "every bad value fell back to the value in force"
    );
    assert!(cfg.discovery, "nothing here is about discovery");
}

#[test]
fn a_bad_line_that_may_be_about_discovery_keeps_it_off_and_the_rest_applies() {
    for one in CLOSING_OPTIONS.chunks(1) {
        let (cfg, diags) = Config::parse(options(one), "/etc/rdma/ibacm_opts.cfg");
        expect_reports(&diags, one, "discovery stays off until this line is fixed");
        assert!(!cfg.discovery, "{}", diags[0]);
        assert_eq!((cfg.sl, cfg.mtu), (5, 1024), "good lines still apply");
        assert_eq!(
            cfg.auth_key_file, None,
            "nothing half-read is taken for a key file"
        );
    }
}

#[test]
fn every_bad_hosts_line_is_reported_once_and_good_lines_load() {
    let mut text = b"good1 fe80::10 # in Latin-1: caf\xe9\n".to_vec();
    for (line, _) in BAD_HOSTS {
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    text.extend_from_slice(b"good2 fe80::11 lid=3\n");
    let (hosts, diags) = Hosts::parse(&text, "/etc/rdma/ibacm_urdma_hosts.data");
    assert_eq!(diags.len(), BAD_HOSTS.len(), "{diags:#?}");
    for (i, ((line, want), d)) in BAD_HOSTS.iter().zip(&diags).enumerate() {
        let line = String::from_utf8_lossy(line);
        let shown = d.to_string();
        assert!(
            shown.starts_with(&format!("/etc/rdma/ibacm_urdma_hosts.data:{}: ", i + 2)),
            "{shown}"
        );
        assert!(
            shown.contains(want) && shown.ends_with("line skipped"),
            "`{line}` reported as `{shown}`"
        );
    }
    assert_eq!(hosts.len(), 2, "exactly the two good lines loaded");
    assert!(hosts.lookup(&Address::name("good1").unwrap()).is_some());
    assert_eq!(
        hosts.lookup(&Address::Lid(3)).map(|r| r.gid),
        Some("fe80::11".parse().unwrap())
    );
    for name in ["x", "y", "z", "w", "v", "node", "lonely"] {
        assert!(
            hosts.lookup(&Address::name(name).unwrap()).is_none(),
            "{name} was skipped"
        );
    }
}
