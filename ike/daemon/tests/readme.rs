//! The README's "Negotiated SAs" example is a configuration iked reads, and the one that
//! `tests/strongswan_tunnel.rs` runs against strongSwan (same addresses, ids, selectors,
//! proposals and key).

use ike_core::config::StartAction;
use iked::config::Config;

#[test]
fn the_readme_example_is_a_valid_configuration() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = readme.split("## Negotiated SAs").nth(1).expect("the README has the section");
    let block =
        section.split("```swanctl\n").nth(1).and_then(|b| b.split("```").next()).expect("a swanctl block");
    let dir = std::env::temp_dir().join(format!("iked-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("iked.conf"), block).unwrap();
    let c = Config::load(&dir.join("iked.conf")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(c.connections.len(), 1);
    let site = &c.connections[0];
    assert_eq!(site.name, "site");
    assert_eq!(site.local_addrs, ["10.95.0.1".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(site.children[0].start_action, StartAction::Start);
    let test = include_str!("strongswan_tunnel.rs");
    for same in ["aes128gcm16-prfsha256-x25519", "10.95.1.0/24", "10.95.2.0/24", "gw-a.example.org"] {
        assert!(block.contains(same) && test.contains(same), "{same}");
    }
    let key = block.split("secret = ").nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(test.contains(key), "the same key as the strongSwan test");
}
