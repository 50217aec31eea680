//! The shipped sample `ibacm.conf` documents every key with its default.
use ibacm_urdma::config::{Config, KEYS};

#[test]
fn the_sample_names_every_key_with_its_default() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ibacm.conf")).unwrap();
    let (cfg, diags) = Config::parse(&text, "ibacm.conf");
    assert!(diags.is_empty(), "the sample has errors: {diags:?}");
    assert_eq!(
        cfg,
        Config::default(),
        "the sample's values are the defaults"
    );
    for key in KEYS {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("{key} is not in ibacm.conf"));
        let default = Config::default().describe(key).unwrap();
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(default.as_str()),
            "{key}"
        );
    }
}
