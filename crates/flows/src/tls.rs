//! TLS handshake labels: SNI, the client's ALPN offer and versions from the ClientHello; the
//! negotiated version and, up to TLS 1.2, the server's ALPN choice from the ServerHello. Message
//! contents are decoded by `tls-parser`; this module finds the first handshake message in a
//! stream, across records and segments.

use std::borrow::Cow;

use tls_parser::{
    parse_tls_client_hello_extension, parse_tls_handshake_client_hello, parse_tls_handshake_server_hello,
    parse_tls_server_hello_extension, SNIType, TlsExtension,
};

/// Outcome of reading a message from the bytes received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// Consistent so far: more bytes are needed.
    NeedMore,
    /// Read.
    Done(T),
    /// Not this protocol, or malformed.
    NotThis,
}

/// Handshake record content type.
const HANDSHAKE: u8 = 22;
/// A record's payload is at most 2^14 bytes (plus expansion for protected records).
const MAX_RECORD: usize = (1 << 14) + 2048;
/// Largest hello accepted (real ones are a few KB).
const MAX_HELLO: usize = 1 << 16;
/// Handshake message types.
pub const CLIENT_HELLO: u8 = 1;
pub const SERVER_HELLO: u8 = 2;

/// The first handshake message (4-byte header included) of a TLS stream: borrowed when one
/// record holds it, copied when it spans records.
pub fn first_handshake_message(stream: &[u8]) -> Parse<Cow<'_, [u8]>> {
    let mut pos = 0;
    let mut joined: Option<Vec<u8>> = None;
    loop {
        let Some(header) = stream.get(pos..pos + 5) else {
            return Parse::NeedMore;
        };
        // Only handshake records can precede the first handshake message; SSL 3 to TLS 1.3
        // all write major version 3 in the record header.
        if header[0] != HANDSHAKE || header[1] != 3 {
            return Parse::NotThis;
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD {
            return Parse::NotThis;
        }
        let body_start = pos + 5;
        let available = &stream[body_start..stream.len().min(body_start + len)];
        let complete_record = available.len() == len;
        let message: &[u8] = match &mut joined {
            None => available,
            Some(v) => {
                v.extend_from_slice(available);
                v
            }
        };
        if message.len() >= 4 {
            let mlen = 4 + u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if mlen > MAX_HELLO {
                return Parse::NotThis;
            }
            if message.len() >= mlen {
                return Parse::Done(match joined {
                    None => Cow::Borrowed(&available[..mlen]),
                    Some(mut v) => {
                        v.truncate(mlen);
                        Cow::Owned(v)
                    }
                });
            }
        }
        if !complete_record {
            return Parse::NeedMore;
        }
        if joined.is_none() {
            joined = Some(available.to_vec());
        }
        pos = body_start + len;
    }
}

/// The first handshake message of a QUIC CRYPTO stream (no records there).
pub fn first_crypto_message(stream: &[u8]) -> Parse<&[u8]> {
    if stream.len() < 4 {
        return Parse::NeedMore;
    }
    let mlen = 4 + u32::from_be_bytes([0, stream[1], stream[2], stream[3]]) as usize;
    if mlen > MAX_HELLO {
        return Parse::NotThis;
    }
    match stream.get(..mlen) {
        Some(m) => Parse::Done(m),
        None => Parse::NeedMore,
    }
}

/// What a ClientHello says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The first host name of the server_name extension.
    pub sni: Option<String>,
    /// The ALPN protocols offered, in the client's order.
    pub alpn: Vec<String>,
    /// The highest version offered (supported_versions, else the legacy field), GREASE ignored.
    pub max_version: u16,
}

/// What a ServerHello says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServerHello {
    /// The negotiated version (supported_versions in TLS 1.3, else the legacy field).
    pub version: u16,
    /// The ALPN protocol chosen (only TLS 1.2 and earlier send it in the clear).
    pub alpn: Option<String>,
}

/// Reads a ClientHello message (4-byte header included).
pub fn client_hello(message: &[u8]) -> Option<ClientHello> {
    if message.first() != Some(&CLIENT_HELLO) || message.len() < 4 {
        return None;
    }
    let (_, ch) = parse_tls_handshake_client_hello(&message[4..]).ok()?;
    let mut out = ClientHello { max_version: ch.version.0, ..ClientHello::default() };
    let Some(ext) = ch.ext else { return Some(out) };
    each_extension(ext, |one| {
        let Ok((_, e)) = parse_tls_client_hello_extension(one) else { return };
        match e {
            TlsExtension::SNI(names) if out.sni.is_none() => {
                out.sni = names.iter().find(|(t, _)| *t == SNIType::HostName).map(|(_, n)| text(n));
            }
            TlsExtension::ALPN(protocols) => out.alpn = protocols.iter().map(|p| text(p)).collect(),
            TlsExtension::SupportedVersions(versions) => {
                if let Some(v) = versions.iter().map(|v| v.0).filter(|v| !is_grease(*v)).max() {
                    out.max_version = v;
                }
            }
            _ => {}
        }
    });
    Some(out)
}

/// Reads a ServerHello message (4-byte header included).
pub fn server_hello(message: &[u8]) -> Option<ServerHello> {
    if message.first() != Some(&SERVER_HELLO) || message.len() < 4 {
        return None;
    }
    let (_, sh) = parse_tls_handshake_server_hello(&message[4..]).ok()?;
    let mut out = ServerHello { version: sh.version.0, alpn: None };
    let Some(ext) = sh.ext else { return Some(out) };
    each_extension(ext, |one| {
        let Ok((_, e)) = parse_tls_server_hello_extension(one) else { return };
        match e {
            TlsExtension::ALPN(protocols) => out.alpn = protocols.first().map(|p| text(p)),
            TlsExtension::SupportedVersions(versions) => {
                if let Some(v) = versions.first() {
                    out.version = v.0;
                }
            }
            _ => {}
        }
    });
    Some(out)
}

/// Extension types read: server_name, ALPN, supported_versions. Others (key shares, signature
/// algorithms, ...) are not decoded at all: that would cost allocations for nothing.
const WANTED: [u16; 3] = [0, 16, 43];

/// Calls `f` with each wanted extension (type, length and data) of an extension block, one at a
/// time, so that one malformed extension does not hide the others.
fn each_extension<'a>(mut ext: &'a [u8], mut f: impl FnMut(&'a [u8])) {
    while ext.len() >= 4 {
        let kind = u16::from_be_bytes([ext[0], ext[1]]);
        let end = 4 + usize::from(u16::from_be_bytes([ext[2], ext[3]]));
        let Some(one) = ext.get(..end) else { break };
        if WANTED.contains(&kind) {
            f(one);
        }
        ext = &ext[end..];
    }
}

/// GREASE values (RFC 8701) are 0x?a?a.
fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a
}

/// Protocol names and host names are ASCII in practice; anything else is kept readable.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A TLS version's usual name ("TLSv1.3"); unknown ones in hex.
pub fn version_name(v: u16) -> String {
    match v {
        0x0300 => "SSLv3".into(),
        0x0301 => "TLSv1.0".into(),
        0x0302 => "TLSv1.1".into(),
        0x0303 => "TLSv1.2".into(),
        0x0304 => "TLSv1.3".into(),
        0x7f00..=0x7fff => format!("TLSv1.3-draft{}", v & 0xff),
        _ => format!("{v:#06x}"),
    }
}
