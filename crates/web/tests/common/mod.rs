//! What the endpoint tests share: a two-origin page and a server on loopback (ports chosen by
//! the kernel, TCP congestion control reno so that tests can check it is applied).
#![allow(dead_code)] // each test file uses its own subset

pub mod abuse;

use std::net::SocketAddr;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use web::{Limits, Manifest, ServeOptions, Server, Site, TlsMaterial};

pub const PAGE: &str = r#"{
  "schema_version": 1,
  "name": "loopback",
  "seed": 42,
  "origins": [
    {"hostname": "www.a.test", "address": "127.0.0.1"},
    {"hostname": "static.a.test", "address": "127.0.0.1"}
  ],
  "objects": [
    {"path": "/", "origin": "www.a.test", "size": 14000, "content_type": "text/html; charset=utf-8"},
    {"path": "/s.css", "origin": "www.a.test", "size": 1, "content_type": "text/css", "parent": "/",
     "headers": {"cache-control": "max-age=3600", "x-extra": "yes"}},
    {"path": "/app.js?v=2", "origin": "static.a.test", "size": 70000, "content_type": "text/javascript", "parent": "//www.a.test/s.css", "delay_ms": 3},
    {"path": "/big.jpg", "origin": "static.a.test", "size": 2500000, "content_type": "image/jpeg", "parent": "//www.a.test/"}
  ]
}"#;

/// How often `wait_until` looks at its condition.
const POLL: Duration = Duration::from_millis(10);

/// Waits until `condition` holds, looking every 10 ms; fails the test naming `what` after
/// `within` (a generous bound that only a hung server exceeds). For conditions nothing
/// announces: a counter, a file, a socket's state.
pub async fn wait_until(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "not {what} within {within:?}");
        tokio::time::sleep(POLL).await;
    }
}

pub struct Lab {
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// HTTP/3: UDP on the HTTPS port number.
    pub h3: SocketAddr,
    /// The raw bulk protocol (TCP).
    pub raw: SocketAddr,
    pub material: TlsMaterial,
    pub manifest: Manifest,
    /// The server's open connections.
    pub open: web::server::OpenConnections,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Lab {
    pub async fn start(limits: Limits) -> Lab {
        Lab::start_with(limits, web::transport::QuicOptions::default()).await
    }

    /// A lab whose server runs these QUIC options (e.g. another controller).
    pub async fn start_with(limits: Limits, quic: web::transport::QuicOptions) -> Lab {
        let manifest = Manifest::parse(PAGE, "page.json").unwrap();
        let site = Site::new(&[("page.json".into(), manifest.clone())]).unwrap();
        let origins: Vec<_> = site.origins().iter().map(|(h, a)| (h.clone(), vec![*a])).collect();
        let material = TlsMaterial::generate("test", &origins, &["localhost".into(), "127.0.0.1".into()]).unwrap();
        let options = ServeOptions {
            listen: vec!["127.0.0.1".parse().unwrap()],
            http_port: 0,
            https_port: 0,
            tcp_congestion: Some("reno".into()),
            raw_port: Some(0),
            limits,
            quic,
            ..ServeOptions::default()
        };
        let server = Server::bind(&options, Arc::new(site), material.server_config(&[b"h2", b"http/1.1"]).unwrap()).unwrap();
        for l in server.listeners() {
            assert_eq!(web::server::tcp_congestion_of(l).unwrap(), "reno");
        }
        let http = server.http_addrs()[0];
        let https = server.https_addrs()[0];
        let h3 = server.h3_addrs()[0];
        let raw = server.raw_addrs()[0];
        assert_eq!(h3, https, "HTTP/3 listens on the HTTPS port number");
        let open = server.open_connections();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        Lab { http, https, h3, raw, material, manifest, open, stop: Some(tx), task: Some(task) }
    }

    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task.take().unwrap()).await.unwrap().unwrap();
    }

    pub fn expected(&self, host: &str, path: &str) -> Vec<u8> {
        Site::new(&[("page.json".into(), self.manifest.clone())]).unwrap().body(host, path).unwrap()
    }
}

/// A scratch directory `protolab-<name>-<pid>` under the system's temporary directory: emptied
/// when made, removed when dropped, also when its test fails (the tests left hundreds behind).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("protolab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
