//! The responsiveness test's server side (draft-ietf-ippm-responsiveness, "Responsiveness Test
//! Server" and the `/.well-known/nq` discovery document): the paths and the configuration
//! document. The server routes these paths on every protocol; this module has no I/O.

/// The configuration document (RFC 8615 well-known URI, application name "nq").
pub const CONFIG_PATH: &str = "/.well-known/nq";
/// A 1-byte object (foreign and self probes).
pub const SMALL_PATH: &str = "/rpm/small";
/// An effectively unbounded download (load-generating connections).
pub const LARGE_PATH: &str = "/rpm/large";
/// The upload sink (load-generating connections).
pub const UPLOAD_PATH: &str = "/rpm/upload";
/// Whether `path` is one of the responsiveness endpoints (they answer CORS preflights).
pub fn is_endpoint(path: &str) -> bool {
    matches!(path, CONFIG_PATH | SMALL_PATH | LARGE_PATH | UPLOAD_PATH)
}

/// Size of the large object: 8 GB, as the draft's examples; a client closes the connection
/// long before (a 20 s direction at 1 Gbit/s moves 2.5 GB).
pub const LARGE_BYTES: u64 = 8_000_000_000;

/// The configuration document for a request that arrived with `scheme` (`http`/`https`) and
/// `authority` (`host[:port]`): the draft's keys, plus the older names that existing clients
/// (Apple's networkQuality, the Go client) still read. All URLs name the same host, as the
/// draft requires, so that they can share a connection.
pub fn config_document(scheme: &str, authority: &str) -> String {
    let url = |path: &str| format!("{scheme}://{authority}{path}");
    let doc = serde_json::json!({
        "version": 1,
        "urls": {
            "small_download_url": url(SMALL_PATH),
            "large_download_url": url(LARGE_PATH),
            "upload_url": url(UPLOAD_PATH),
            "small_https_download_url": url(SMALL_PATH),
            "large_https_download_url": url(LARGE_PATH),
            "https_upload_url": url(UPLOAD_PATH),
        },
    });
    format!("{doc}\n")
}

/// The three URLs of a configuration document: the draft's keys, else the older ones. The
/// error says which field is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigUrls {
    /// The small object.
    pub small: String,
    /// The large object.
    pub large: String,
    /// The upload sink.
    pub upload: String,
    /// `test_endpoint`, when given: the host to connect to instead of the URLs' host.
    pub test_endpoint: Option<String>,
}

impl ConfigUrls {
    /// Parses a configuration document (at most 64 KiB).
    pub fn parse(body: &[u8]) -> Result<ConfigUrls, String> {
        if body.len() > 65_536 {
            return Err(format!("the document has {} bytes (at most 65536)", body.len()));
        }
        let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let obj = value.as_object().ok_or("not a JSON object")?;
        match obj.get("version").and_then(serde_json::Value::as_u64) {
            Some(1) => {}
            Some(v) => return Err(format!("version: {v} is not 1 (the only version this client knows)")),
            None => return Err("version: missing or not an integer".into()),
        }
        let urls = obj.get("urls").and_then(serde_json::Value::as_object).ok_or("urls: missing or not an object")?;
        let pick = |new: &str, old: &str| -> Result<String, String> {
            urls.get(new)
                .or_else(|| urls.get(old))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("urls.{new}: missing (nor urls.{old})"))
        };
        let small = pick("small_download_url", "small_https_download_url")?;
        let large = pick("large_download_url", "large_https_download_url")?;
        let upload = pick("upload_url", "https_upload_url")?;
        let host = |field: &str, u: &str| -> Result<String, String> {
            let uri: http::Uri = u.parse().map_err(|e| format!("{field}: {u:?} is not a URL: {e}"))?;
            match uri.scheme_str() {
                Some("http" | "https") => {}
                _ => return Err(format!("{field}: {u:?} is not an http or https URL")),
            }
            uri.host().map(str::to_ascii_lowercase).ok_or_else(|| format!("{field}: {u:?} has no host"))
        };
        let h = host("urls.small_download_url", &small)?;
        if host("urls.large_download_url", &large)? != h || host("urls.upload_url", &upload)? != h {
            return Err("urls: the three URLs must name the same host".into());
        }
        let test_endpoint = match obj.get("test_endpoint") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("test_endpoint: not a string".into()),
        };
        Ok(ConfigUrls { small, large, upload, test_endpoint })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_round_trips() {
        let doc = config_document("https", "www.rpm.test:8443");
        let urls = ConfigUrls::parse(doc.as_bytes()).unwrap();
        assert_eq!(urls.small, "https://www.rpm.test:8443/rpm/small");
        assert_eq!(urls.large, "https://www.rpm.test:8443/rpm/large");
        assert_eq!(urls.upload, "https://www.rpm.test:8443/rpm/upload");
        assert_eq!(urls.test_endpoint, None);
    }

    #[test]
    fn older_keys_are_read_and_bad_documents_named() {
        let old = br#"{"version":1,"urls":{"small_https_download_url":"https://a/s","large_https_download_url":"https://a/l","https_upload_url":"https://a/u"},"test_endpoint":"b"}"#;
        let urls = ConfigUrls::parse(old).unwrap();
        assert_eq!(urls.upload, "https://a/u");
        assert_eq!(urls.test_endpoint.as_deref(), Some("b"));
        let cases: [(&[u8], &str); 6] = [
            (b"[]", "not a JSON object"),
            (b"{", "not JSON"),
            (br#"{"version":2,"urls":{}}"#, "version: 2"),
            (br#"{"version":1}"#, "urls: missing"),
            (br#"{"version":1,"urls":{"small_download_url":"https://a/s","large_download_url":"https://a/l"}}"#, "urls.upload_url: missing"),
            (br#"{"version":1,"urls":{"small_download_url":"https://a/s","large_download_url":"https://b/l","upload_url":"https://a/u"}}"#, "same host"),
        ];
        for (doc, want) in cases {
            let e = ConfigUrls::parse(doc).unwrap_err();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
        assert!(ConfigUrls::parse(&vec![b' '; 70_000]).unwrap_err().contains("at most"));
    }
}
