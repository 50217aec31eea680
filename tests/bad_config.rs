//! Malformed options and hosts-file lines: each one is reported exactly
//! once, at its `file:line`, saying what stays in force, and nothing else
//! in the file is lost.

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::Config;
use ibacm_urdma::hosts::Hosts;

/// (line, what its report must say).
const BAD_OPTIONS: &[(&str, &str)] = &[
    ("urdma_mtu 4097", "keeping urdma_mtu 4096"),
    ("urdma_mtu abc", "keeping urdma_mtu 4096"),
    ("urdma_mtu", "'urdma_mtu' has no value"),
    ("urdma_rate 33", "keeping urdma_rate 100"),
    ("urdma_rate 0", "keeping urdma_rate 100"),
    // An earlier good line set 5: a bad one keeps what is in force.
    ("urdma_sl 16", "keeping urdma_sl 5"),
    ("urdma_sl -1", "keeping urdma_sl 5"),
    (
        "urdma_packet_lifetime 64",
        "keeping urdma_packet_lifetime 18",
    ),
    ("urdma_hop_limit 256", "keeping urdma_hop_limit 0"),
    ("urdma_tclass 300", "keeping urdma_tclass 0"),
    ("urdma_addr_timeout -2", "keeping urdma_addr_timeout 1440"),
    ("urdma_route_timeout soon", "keeping urdma_route_timeout -1"),
    ("urdma_discovery maybe", "keeping urdma_discovery yes"),
    (
        "urdma_discovery_port 0",
        "keeping urdma_discovery_port 6126",
    ),
    (
        "urdma_discovery_port 70000",
        "keeping urdma_discovery_port 6126",
    ),
    ("urdma_timeout 0", "keeping urdma_timeout 500"),
    ("urdma_retries 11", "keeping urdma_retries 2"),
    (
        "urdma_negative_timeout -5",
        "keeping urdma_negative_timeout 5000",
    ),
    ("urdma_derive eui64,arp", "keeping urdma_derive none"),
    ("urdma_derive eui64,eui64", "listed twice"),
    (
        "urdma_hosts_file",
        "keeping urdma_hosts_file /etc/rdma/ibacm_urdma_hosts.data",
    ),
    ("urdma_colour blue", "unknown key 'urdma_colour'"),
];

const BAD_HOSTS: &[(&str, &str)] = &[
    ("node fe80::zz", "'fe80::zz' is not a GID"),
    ("lonely", "no GID after 'lonely'"),
    ("10.0.0.9 ::", "GID :: is zero"),
    ("x fe80::2 lid=0", "'0' is not a unicast LID"),
    ("y fe80::2 lid=70000", "'70000' is not a unicast LID"),
    ("z fe80::2 lid=49152", "'49152' is not a unicast LID"),
    ("w fe80::2 color=red", "unknown field 'color=red'"),
    (
        "a-name-that-is-far-too-long-to-fit-the-sixty-four-byte-field-of-acm",
        "is not an IPv4/IPv6 address or a host name",
    ),
];

#[test]
fn every_bad_option_is_reported_once_where_it_is_and_the_rest_applies() {
    // Good lines around the bad ones: they must still take effect.
    let mut text = String::from("# options\nurdma_sl 5\n");
    for (line, _) in BAD_OPTIONS {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("urdma_mtu 1024\n");
    let (cfg, diags) = Config::parse(&text, "/etc/rdma/ibacm_opts.cfg");
    assert_eq!(diags.len(), BAD_OPTIONS.len(), "{diags:#?}");
    for (i, ((line, want), d)) in BAD_OPTIONS.iter().zip(&diags).enumerate() {
        assert_eq!(d.line, i + 3, "{line}");
        let shown = d.to_string();
        assert!(
            shown.starts_with(&format!("/etc/rdma/ibacm_opts.cfg:{}: ", i + 3)),
            "{shown}"
        );
        assert!(
            shown.contains(want),
            "`{line}` reported as `{shown}`, expected `{want}`"
        );
    }
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
}

#[test]
fn every_bad_hosts_line_is_reported_once_and_good_lines_load() {
    let mut text = String::from("good1 fe80::10\n");
    for (line, _) in BAD_HOSTS {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("good2 fe80::11 lid=3\n");
    let (hosts, diags) = Hosts::parse(&text, "/etc/rdma/ibacm_urdma_hosts.data");
    assert_eq!(diags.len(), BAD_HOSTS.len(), "{diags:#?}");
    for (i, ((line, want), d)) in BAD_HOSTS.iter().zip(&diags).enumerate() {
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
    for name in ["x", "y", "z", "w", "node", "lonely"] {
        assert!(
            hosts.lookup(&Address::name(name).unwrap()).is_none(),
            "{name} was skipped"
        );
    }
}
