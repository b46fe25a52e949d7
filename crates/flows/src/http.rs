//! Cleartext HTTP/1.x: the first request line (method, target) and its Host header; and the
//! HTTP/2 connection preface (h2c with prior knowledge), which starts like a request line.

use crate::tls::Parse;

/// The first request of a cleartext HTTP stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method token ("GET").
    pub method: String,
    /// Request target as sent (path and query, or an absolute URI for a proxy).
    pub target: String,
    /// The Host header, if it came within the bytes kept.
    pub host: Option<String>,
    /// The stream starts with the HTTP/2 preface (`PRI * HTTP/2.0`), not an HTTP/1.x request.
    pub h2_preface: bool,
}

const MAX_METHOD: usize = 20;
const MAX_TARGET: usize = 8192;
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads the first request from the start of a client stream. `full`: no more bytes will come
/// (the kept prefix is full), so a request whose headers are cut is taken as it is.
pub fn request(stream: &[u8], full: bool) -> Parse<Request> {
    // Method: a token of letters (and '-' or '_', as in M-SEARCH), then a space.
    let Some(sp1) = stream.iter().take(MAX_METHOD + 1).position(|&b| b == b' ') else {
        let consistent = stream.len() <= MAX_METHOD && stream.iter().all(|&b| is_method_byte(b));
        return if consistent && !full { Parse::NeedMore } else { Parse::NotThis };
    };
    let method = &stream[..sp1];
    if method.is_empty() || !method.iter().all(|&b| is_method_byte(b)) || !method[0].is_ascii_uppercase() {
        return Parse::NotThis;
    }
    let rest = &stream[sp1 + 1..];
    let Some(sp2) = rest.iter().take(MAX_TARGET + 1).position(|&b| b == b' ') else {
        let consistent = rest.len() <= MAX_TARGET && rest.iter().all(|&b| (0x21..0x7f).contains(&b));
        return if consistent && !full { Parse::NeedMore } else { Parse::NotThis };
    };
    let target = &rest[..sp2];
    if target.is_empty() || !target.iter().all(|&b| (0x21..0x7f).contains(&b)) {
        return Parse::NotThis;
    }
    let rest = &rest[sp2 + 1..];
    const VERSIONS: [&[u8]; 3] = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0"];
    if rest.len() < 10 {
        let prefix_ok = VERSIONS.iter().any(|v| {
            let n = rest.len().min(v.len());
            rest[..n] == v[..n]
        });
        return if prefix_ok && !full { Parse::NeedMore } else { Parse::NotThis };
    }
    let version = &rest[..8];
    if !VERSIONS.contains(&version) || !(rest[8..].starts_with(b"\r\n") || rest[8..].starts_with(b"\n")) {
        return Parse::NotThis;
    }
    if version == b"HTTP/2.0" {
        // Only the connection preface carries HTTP/2.0 in a request line.
        let n = stream.len().min(H2_PREFACE.len());
        if stream[..n] != H2_PREFACE[..n] {
            return Parse::NotThis;
        }
        if n < H2_PREFACE.len() && !full {
            return Parse::NeedMore;
        }
        return Parse::Done(Request { method: "PRI".into(), target: "*".into(), host: None, h2_preface: true });
    }
    let headers = &rest[8..];
    let complete = find(headers, b"\r\n\r\n").is_some() || find(headers, b"\n\n").is_some();
    if !complete && !full {
        return Parse::NeedMore;
    }
    let host = headers
        .split(|&b| b == b'\n')
        .skip(1)
        .take_while(|line| !line.is_empty() && *line != b"\r")
        .find_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            if !line[..colon].eq_ignore_ascii_case(b"host") {
                return None;
            }
            let value = String::from_utf8_lossy(&line[colon + 1..]);
            Some(value.trim().to_string())
        });
    Parse::Done(Request {
        method: String::from_utf8_lossy(method).into_owned(),
        target: String::from_utf8_lossy(target).into_owned(),
        host,
        h2_preface: false,
    })
}

fn is_method_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b == b'-' || b == b'_'
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_with_host() {
        let r = b"GET /index.html?x=1 HTTP/1.1\r\nUser-Agent: t\r\nhost:  example.test:8080 \r\n\r\n";
        let Parse::Done(req) = request(r, false) else { panic!() };
        assert_eq!(req.method, "GET");
        assert_eq!(req.target, "/index.html?x=1");
        assert_eq!(req.host.as_deref(), Some("example.test:8080"));
        for cut in 1..r.len() - 1 {
            assert_eq!(request(&r[..cut], false), Parse::NeedMore, "cut at {cut}");
        }
    }

    #[test]
    fn not_http() {
        assert_eq!(request(b"\x16\x03\x01\x02\x00", false), Parse::NotThis);
        assert_eq!(request(b"get / HTTP/1.1\r\n", false), Parse::NotThis);
        assert_eq!(request(b"GET / HTTP/3.0\r\n\r\n", false), Parse::NotThis);
        assert_eq!(request(b"SSH-2.0-OpenSSH_9.6\r\n", false), Parse::NotThis);
        assert_eq!(request(b"GET", true), Parse::NotThis);
    }

    #[test]
    fn h2_preface() {
        let Parse::Done(req) = request(H2_PREFACE, false) else { panic!() };
        assert!(req.h2_preface);
        assert_eq!(request(&H2_PREFACE[..18], false), Parse::NeedMore);
    }
}
