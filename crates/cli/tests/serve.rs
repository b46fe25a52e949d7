//! `protolab-net serve` as a process: its `listening` event names sockets that accept, a server
//! that cannot start says why, and it raises its open-file limit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

mod common;
use common::{addresses, READY_WITHIN};

#[test]
fn the_listening_event_names_sockets_that_accept() {
    let tls = common::tempdir("listening");
    let tls_dir = tls.display().to_string();
    let mut server = common::start(&[
        "serve", "--listen", "127.0.0.1", "--http-port", "0", "--https-port", "0", "--raw-port", "0", "--tls-dir", &tls_dir,
    ]);
    let ready = server.await_listening(READY_WITHIN).unwrap();
    for (kind, list) in [("http", &ready.http), ("https", &ready.https), ("raw", &ready.raw)] {
        let sockets = addresses(list);
        assert_eq!(sockets.len(), 1, "{kind}: {ready:?}");
        assert!(sockets[0].ip().is_loopback() && sockets[0].port() != 0, "{kind}: {sockets:?}");
        TcpStream::connect_timeout(&sockets[0], Duration::from_secs(10)).unwrap_or_else(|e| panic!("{kind} {}: {e}", sockets[0]));
    }
    assert_eq!(ready.h3, ready.https, "HTTP/3 on the HTTPS port number");
    // Ready means serving: a request on the HTTP address is answered, and the TLS material is
    // written.
    let mut http = TcpStream::connect(addresses(&ready.http)[0]).unwrap();
    http.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    http.write_all(b"GET /empty HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    http.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(ready.tls_dir, tls_dir);
    assert!(tls.join("ca.pem").is_file());
    drop(server);
    let _ = std::fs::remove_dir_all(&tls);
}

#[test]
fn a_server_that_cannot_start_is_reported_with_its_stderr() {
    let tls = common::tempdir("cannot-start");
    let mut server = common::start(&["serve", "--manifest", "/nonexistent/page.json", "--tls-dir", &tls.display().to_string()]);
    let error = server.await_listening(READY_WITHIN).unwrap_err();
    assert!(error.contains("exit status: 2") && error.contains("/nonexistent/page.json"), "{error}");
    assert!(!tls.join("ca.pem").exists(), "a server that cannot start leaves no TLS material");
    let _ = std::fs::remove_dir_all(&tls);
}

/// Under a soft limit of 1024 open files (Debian's default) a server would run out of descriptors
/// at about 500 TCP connections (two each): it raises the soft limit to the hard one at start-up.
#[test]
fn a_server_raises_its_open_file_limit_to_the_hard_one() {
    let tls = common::tempdir("nofile");
    let mut server = common::start_under(
        &["prlimit", "--nofile=1024:8192"],
        &["serve", "--listen", "127.0.0.1", "--http-port", "0", "--https-port", "0", "--raw-port", "off", "--tls-dir", &tls.display().to_string()],
    );
    server.await_listening(READY_WITHIN).unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.id())).unwrap();
    let open_files = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let numbers: Vec<&str> = open_files.split_whitespace().filter(|w| w.parse::<u64>().is_ok()).collect();
    assert_eq!(numbers, ["8192", "8192"], "{open_files}");
    drop(server);
    let _ = std::fs::remove_dir_all(&tls);
}
