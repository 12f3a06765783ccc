//! pmlab-remote through its public API, without a network: what `-H/-U/-K` accept and refuse,
//! and a connection that is refused (nothing listens on the loopback port) coming back as a
//! typed error before anything is written on a target.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_remote::{Remote, RemoteError, Target};

fn t(spec: &str) -> Result<Target, RemoteError> {
    Target::parse(spec, None, None)
}

it_test!(host_forms_parse_into_their_parts);
fn host_forms_parse_into_their_parts() {
    for (spec, host, port, user) in [
        ("box", "box", None, None),
        ("me@box", "box", None, Some("me")),
        ("me@box:2222", "box", Some(2222), Some("me")),
        ("[::1]:22", "::1", Some(22), None),
        ("[fe80::1]", "fe80::1", None, None),
        ("fe80::1", "fe80::1", None, None),
        ("10.0.0.7:2200", "10.0.0.7", Some(2200), None),
    ] {
        let tg = t(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(tg.host, host, "{spec}");
        assert_eq!(tg.port, port, "{spec}");
        assert_eq!(tg.user.as_deref(), user, "{spec}");
        assert_eq!(tg.key, None);
    }
    // -U wins over USER@ in the host.
    let tg = Target::parse("me@box", Some("root".into()), None).unwrap();
    assert_eq!(tg.user.as_deref(), Some("root"));
}

it_test!(bad_hosts_and_keys_are_refused_with_what_was_given);
fn bad_hosts_and_keys_are_refused_with_what_was_given() {
    for bad in [
        "",
        "-oProxyCommand=touch /tmp/x",
        "box:notaport",
        "box:70000",
        "@box",
        "a b",
        "box\n",
        "[::1",
        "[::1]x",
    ] {
        match t(bad) {
            Err(e @ RemoteError::BadHost(_)) => {
                assert!(e.to_string().contains(&format!("{bad:?}")), "{e}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for key in [dir.path().join("missing"), dir.path().to_path_buf()] {
        let e = Target::parse("box", None, Some(key.clone())).unwrap_err();
        assert!(matches!(&e, RemoteError::BadKey(k) if *k == key), "{e:?}");
    }
    let key = dir.path().join("id_ed25519");
    std::fs::write(&key, "not checked here: ssh reads it").unwrap();
    let tg = Target::parse("box", None, Some(key.clone())).unwrap();
    assert_eq!(tg.key, Some(key));
}

it_test!(a_refused_connection_is_a_typed_error);
/// Port 1 on the loopback: nothing listens, so ssh fails before any host key or login.
fn a_refused_connection_is_a_typed_error() {
    harness::need_program("ssh", "the OpenSSH client (apt-get install openssh-client)");
    if std::net::TcpStream::connect(("127.0.0.1", 1)).is_ok() {
        skip!("something listens on 127.0.0.1:1");
    }
    let tg = t("127.0.0.1:1").unwrap();
    let e = Remote::connect(tg).unwrap_err();
    match &e {
        RemoteError::ConnectionRefused { host, .. } => assert_eq!(host, "127.0.0.1"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("connection refused"), "{e}");
    let source = std::error::Error::source(&e).expect("ssh's words kept as the cause");
    assert!(!source.to_string().is_empty());
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
