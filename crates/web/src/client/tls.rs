//! TLS of a client connection: the rustls configuration of a protocol (its ALPN from
//! [`Protocol::alpn`], the one mapping), the handshake over TCP, and the check that the server
//! chose that ALPN (TCP and QUIC alike).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

use crate::load::mode::Protocol;
use crate::tls::TlsError;

/// Which server certificates a client accepts.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// Only those issued by this CA (a lab's, DER).
    Ca(&'a CertificateDer<'static>),
    /// Those of the Mozilla roots (`webpki-roots`): servers in the wild.
    WebPki,
}

/// What a client does with TLS sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sessions {
    /// Resume sessions of earlier connections (rustls' in-memory store), without early data.
    Resume,
    /// Resume, and let QUIC send the first requests as 0-RTT data (warm page loads over h3).
    ResumeWithEarlyData,
    /// Every handshake full: no resumption, no early data (handshakes that are measured).
    Full,
}

/// The rustls client configuration of a connection speaking `protocol`: it trusts `trust`,
/// offers exactly the protocol's ALPN (none for cleartext h1c, which needs no configuration)
/// and treats sessions as `sessions` says.
pub fn tls_config(trust: Trust<'_>, protocol: Protocol, sessions: Sessions) -> Result<rustls::ClientConfig, TlsError> {
    let alpn: Vec<&[u8]> = protocol.alpn().into_iter().collect();
    let mut config = match trust {
        Trust::Ca(ca) => crate::tls::client_config_for_ca(ca, &alpn)?,
        Trust::WebPki => crate::tls::client_config_for_web_pki(&alpn)?,
    };
    match sessions {
        Sessions::Resume => config.enable_early_data = false,
        Sessions::ResumeWithEarlyData => config.enable_early_data = true,
        Sessions::Full => {
            config.resumption = rustls::client::Resumption::disabled();
            config.enable_early_data = false;
        }
    }
    Ok(config)
}

/// TLS over a connected TCP stream with SNI `hostname`, requiring the ALPN of `protocol`.
pub(crate) async fn tls_connect(
    tls: Arc<rustls::ClientConfig>,
    protocol: Protocol,
    hostname: &str,
    addr: SocketAddr,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(hostname.to_string()).map_err(|e| format!("{hostname:?} is not a TLS server name: {e}"))?;
    let stream = TlsConnector::from(tls).connect(name, tcp).await.map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    let negotiated = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    check_alpn(protocol, negotiated.as_deref(), addr)?;
    Ok(stream)
}

/// Whether the server at `addr` chose the ALPN `protocol` needs (cleartext needs none).
pub(crate) fn check_alpn(protocol: Protocol, negotiated: Option<&[u8]>, addr: SocketAddr) -> Result<(), String> {
    let want = protocol.alpn();
    if want.is_some() && negotiated != want {
        let shown = |p: Option<&[u8]>| p.map_or_else(|| "none".to_string(), |p| format!("{:?}", String::from_utf8_lossy(p)));
        return Err(format!("{addr} negotiated ALPN {}, the mode needs {}", shown(negotiated), shown(want)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsMaterial;

    fn addr() -> SocketAddr {
        "10.0.0.1:443".parse().unwrap()
    }

    #[test]
    fn alpn_must_match_the_protocol() {
        assert!(check_alpn(Protocol::H2, Some(b"h2"), addr()).is_ok());
        assert!(check_alpn(Protocol::H3, Some(b"h3"), addr()).is_ok());
        assert!(check_alpn(Protocol::H1c, None, addr()).is_ok());
        let e = check_alpn(Protocol::H2, Some(b"http/1.1"), addr()).unwrap_err();
        assert_eq!(e, "10.0.0.1:443 negotiated ALPN \"http/1.1\", the mode needs \"h2\"");
        let e = check_alpn(Protocol::H1, None, addr()).unwrap_err();
        assert_eq!(e, "10.0.0.1:443 negotiated ALPN none, the mode needs \"http/1.1\"");
    }

    #[test]
    fn a_configuration_offers_exactly_the_protocols_alpn() {
        let material = TlsMaterial::generate("t", &[], &[]).unwrap();
        for (protocol, alpn) in [(Protocol::H1, &b"http/1.1"[..]), (Protocol::H2, b"h2"), (Protocol::H3, b"h3")] {
            let config = tls_config(Trust::Ca(&material.ca_der), protocol, Sessions::Resume).unwrap();
            assert_eq!(config.alpn_protocols, vec![alpn.to_vec()], "{protocol:?}");
            let config = tls_config(Trust::WebPki, protocol, Sessions::Resume).unwrap();
            assert_eq!(config.alpn_protocols, vec![alpn.to_vec()], "{protocol:?}");
        }
        assert!(tls_config(Trust::WebPki, Protocol::H1c, Sessions::Resume).unwrap().alpn_protocols.is_empty());
    }

    #[test]
    fn sessions_set_resumption_and_early_data() {
        let resume = tls_config(Trust::WebPki, Protocol::H3, Sessions::Resume).unwrap();
        assert!(!resume.enable_early_data);
        let early = tls_config(Trust::WebPki, Protocol::H3, Sessions::ResumeWithEarlyData).unwrap();
        assert!(early.enable_early_data);
        let full = tls_config(Trust::WebPki, Protocol::H2, Sessions::Full).unwrap();
        assert!(!full.enable_early_data);
        // rustls shows no more of its resumption setting than its Debug form.
        assert!(format!("{:?}", full.resumption).contains("NoClientSessionStorage"), "{:?}", full.resumption);
        assert!(!format!("{:?}", resume.resumption).contains("NoClientSessionStorage"));
    }
}
