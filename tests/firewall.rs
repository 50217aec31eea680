//! The firewall rules the packages ship for discovery (a firewalld service
//! and a ufw application profile) open what the provider uses: its default
//! port, UDP, and they name its groups. A changed default would otherwise
//! leave operators' firewalls closed to it without a word.

use ibacm_urdma::config::DEFAULT_DISCOVERY_PORT;
use ibacm_urdma::discovery::wire::{V4_GROUP, V6_GROUP};

fn file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/firewall/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn the_firewalld_service_opens_the_discovery_port() {
    let xml = file("ibacm-urdma.xml");
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"));
    let ports: Vec<&str> = xml
        .lines()
        .filter(|l| l.trim_start().starts_with("<port "))
        .collect();
    assert_eq!(
        ports,
        [format!(
            "  <port protocol=\"udp\" port=\"{DEFAULT_DISCOVERY_PORT}\"/>"
        )],
        "{xml}"
    );
    for group in [V4_GROUP.to_string(), V6_GROUP.to_string()] {
        assert!(xml.contains(&group), "{group} not named:\n{xml}");
    }
    // Well-formed: one service element, comments without "--" inside.
    assert_eq!(xml.matches("<service>").count(), 1);
    assert!(xml.trim_end().ends_with("</service>"));
    for comment in xml.split("<!--").skip(1) {
        let body = comment.split("-->").next().unwrap();
        assert!(!body.contains("--"), "{body}");
    }
}

#[test]
fn the_ufw_profile_opens_the_discovery_port() {
    let profile = file("ibacm-urdma.ufw");
    let mut lines = profile.lines();
    assert_eq!(lines.next(), Some("[ibacm-urdma]"));
    let fields: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once('=')).collect();
    let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["title", "description", "ports"]);
    assert_eq!(fields[2].1, format!("{DEFAULT_DISCOVERY_PORT}/udp"));
    assert!(fields[1].1.contains(&V4_GROUP.to_string()));
}
