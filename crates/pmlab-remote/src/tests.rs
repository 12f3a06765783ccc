//! Unit tests of the remote target's parsing: host specs, probe answers, ssh messages.

use super::ssh::classify;
use super::*;
use std::os::unix::process::ExitStatusExt;

fn t(spec: &str) -> Result<Target, RemoteError> {
    Target::parse(spec, None, None)
}

#[test]
fn host_specs() {
    let a = t("box").unwrap();
    assert_eq!(
        (a.host.as_str(), a.port, a.user.as_deref()),
        ("box", None, None)
    );
    let a = t("me@box:2222").unwrap();
    assert_eq!(
        (a.host.as_str(), a.port, a.user.as_deref()),
        ("box", Some(2222), Some("me"))
    );
    let a = Target::parse("me@box", Some("root".into()), None).unwrap();
    assert_eq!(a.user.as_deref(), Some("root"));
    let a = t("[::1]:22").unwrap();
    assert_eq!((a.host.as_str(), a.port), ("::1", Some(22)));
    let a = t("fe80::1").unwrap();
    assert_eq!((a.host.as_str(), a.port), ("fe80::1", None));
    for bad in [
        "",
        "-oProxyCommand=x",
        "box:notaport",
        "box:70000",
        "@box",
        "a b",
        "[::1",
    ] {
        assert!(matches!(t(bad), Err(RemoteError::BadHost(_))), "{bad:?}");
    }
    let e = Target::parse("box", None, Some("/nonexistent/key".into())).unwrap_err();
    assert!(matches!(e, RemoteError::BadKey(_)), "{e}");
}

#[test]
fn probe_answers() {
    let p = parse_probe(
        "h",
        "arch=x86_64\nuid=1000\ntmp=/tmp\npriv=sudo\nhave=yes\n",
    )
    .unwrap();
    assert_eq!(p.arch, "x86_64");
    assert_eq!(p.uid, 1000);
    assert_eq!(p.privilege, Ok(Privilege::Sudo));
    assert!(p.have_binary);
    let p = parse_probe(
        "h",
        "arch=aarch64\nuid=5\ntmp=/var/tmp\npriv=nosudo\nhave=no",
    )
    .unwrap();
    assert!(p.privilege.is_err() && !p.have_binary);
    assert!(matches!(
        parse_probe("h", "This account is currently not available."),
        Err(RemoteError::Probe { .. })
    ));
    assert_eq!(
        binary_dir("/tmp/", &"ab".repeat(32)),
        format!("/tmp/pmlab-{}", "ab".repeat(8))
    );
}

#[test]
fn ssh_messages_are_typed() {
    let tg = t("box").unwrap();
    let st = std::process::ExitStatus::from_raw(255 << 8);
    let c = |s: &str| classify(&tg, st, s.as_bytes());
    assert!(matches!(
        c("ssh: Could not resolve hostname box: Name or service not known\n"),
        RemoteError::UnknownHost { .. }
    ));
    assert!(matches!(
        c("ssh: connect to host box port 22: Connection refused\n"),
        RemoteError::ConnectionRefused { .. }
    ));
    assert!(matches!(
        c("root@box: Permission denied (publickey).\n"),
        RemoteError::KeyRejected { .. }
    ));
    assert!(matches!(
        c("No ED25519 host key is known for box and you have requested strict checking.\nHost key verification failed.\n"),
        RemoteError::HostKeyUnverified { .. }
    ));
    let e = c("kex_exchange_identification: read: Connection reset by peer\n");
    assert!(matches!(e, RemoteError::Ssh { .. }));
    // The cause chain keeps ssh's own words.
    let src = std::error::Error::source(&e).unwrap().to_string();
    assert!(src.contains("Connection reset by peer"), "{src}");
}
