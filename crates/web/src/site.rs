//! What a server serves: the objects of one or more manifests, by (hostname, path).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use http::{HeaderName, HeaderValue};

use crate::body::{object_offset, Block};
use crate::manifest::Manifest;

/// Manifests that cannot be served together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct SiteError {
    /// The later manifest file.
    pub file: String,
    /// Field in it.
    pub field: String,
    /// Why.
    pub message: String,
}

/// One servable object.
#[derive(Debug, Clone)]
pub struct ServedObject {
    /// Body size.
    pub size: u64,
    /// `content-type`.
    pub content_type: HeaderValue,
    /// Extra headers from the manifest.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Seed of the body's block.
    pub seed: u64,
    /// Start of the body in the block.
    pub offset: usize,
    /// Where it came from (`file: objects[i]`), for conflicts.
    source: String,
    /// Manifest header map as written (for comparing duplicates).
    raw_headers: BTreeMap<String, String>,
}

/// The merged objects of every manifest a server serves.
#[derive(Debug, Default)]
pub struct Site {
    objects: HashMap<(String, String), ServedObject>,
    /// Hostname -> address.
    origins: BTreeMap<String, IpAddr>,
    blocks: HashMap<u64, Block>,
}

impl Site {
    /// Merges validated manifests `(file, manifest)`. The same hostname must have the same
    /// address everywhere; the same (hostname, path) may appear in several manifests only with
    /// identical size, content type, headers and seed.
    pub fn new(manifests: &[(String, Manifest)]) -> Result<Site, SiteError> {
        let mut site = Site::default();
        for (file, m) in manifests {
            let err = |field: String, message: String| SiteError { file: file.clone(), field, message };
            for (i, o) in m.origins.iter().enumerate() {
                let address = IpAddr::V4(o.address);
                match site.origins.get(&o.hostname) {
                    Some(a) if *a != address => {
                        return Err(err(
                            format!("origins[{i}].address"),
                            format!("origin {:?} has address {a} in an earlier manifest", o.hostname),
                        ))
                    }
                    _ => {
                        site.origins.insert(o.hostname.clone(), address);
                    }
                }
            }
            site.blocks.entry(m.seed).or_insert_with(|| Block::new(m.seed));
            for (i, o) in m.objects.iter().enumerate() {
                let mut headers = Vec::new();
                for (name, value) in &o.headers {
                    // Validated by Manifest::validate; a manifest built in code may skip that.
                    let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) else {
                        return Err(err(format!("objects[{i}].headers.{name}"), "not a valid header".into()));
                    };
                    headers.push((n, v));
                }
                let Ok(content_type) = HeaderValue::from_str(&o.content_type) else {
                    return Err(err(format!("objects[{i}].content_type"), "not a header value".into()));
                };
                let served = ServedObject {
                    size: o.size,
                    content_type,
                    headers,
                    seed: m.seed,
                    offset: object_offset(&o.origin, &o.path),
                    source: format!("{file}: objects[{i}]"),
                    raw_headers: o.headers.clone(),
                };
                if let Some(previous) = site.objects.get(&o.key()) {
                    let same = previous.size == served.size
                        && previous.content_type == served.content_type
                        && previous.raw_headers == served.raw_headers
                        && previous.seed == served.seed;
                    if !same {
                        return Err(err(
                            format!("objects[{i}]"),
                            format!("{:?} on {:?} differs from {}", o.path, o.origin, previous.source),
                        ));
                    }
                    continue;
                }
                site.objects.insert(o.key(), served);
            }
        }
        Ok(site)
    }

    /// The object at `path` (with query) on `hostname`.
    pub fn object(&self, hostname: &str, path: &str) -> Option<&ServedObject> {
        self.objects.get(&(hostname.to_string(), path.to_string()))
    }

    /// The block for `seed` (present for every seed of a served object).
    pub fn block(&self, seed: u64) -> Option<&Block> {
        self.blocks.get(&seed)
    }

    /// Whether `hostname` is an origin.
    pub fn has_origin(&self, hostname: &str) -> bool {
        self.origins.contains_key(hostname)
    }

    /// Origins and their addresses.
    pub fn origins(&self) -> &BTreeMap<String, IpAddr> {
        &self.origins
    }

    /// The only origin at `address`, if exactly one is there.
    pub fn sole_origin_at(&self, address: IpAddr) -> Option<&str> {
        let mut at = self.origins.iter().filter(|(_, a)| **a == address);
        match (at.next(), at.next()) {
            (Some((h, _)), None) => Some(h.as_str()),
            _ => None,
        }
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(address: &str, size: u64) -> Manifest {
        let text = serde_json::json!({
            "name": "p",
            "origins": [{"hostname": "www.a.test", "address": address}],
            "objects": [{"path": "/", "origin": "www.a.test", "size": size, "content_type": "text/html"}]
        });
        Manifest::parse(&text.to_string(), "x.json").unwrap()
    }

    #[test]
    fn merges_and_refuses_conflicts() {
        let site = Site::new(&[("a.json".into(), manifest("10.0.0.1", 5)), ("b.json".into(), manifest("10.0.0.1", 5))]).unwrap();
        assert_eq!(site.len(), 1);
        assert_eq!(site.sole_origin_at("10.0.0.1".parse().unwrap()), Some("www.a.test"));
        assert!(site.object("www.a.test", "/").is_some());
        let e = Site::new(&[("a.json".into(), manifest("10.0.0.1", 5)), ("b.json".into(), manifest("10.0.0.2", 5))]).unwrap_err();
        assert_eq!(e.to_string(), "b.json: origins[0].address: origin \"www.a.test\" has address 10.0.0.1 in an earlier manifest");
        let e = Site::new(&[("a.json".into(), manifest("10.0.0.1", 5)), ("b.json".into(), manifest("10.0.0.1", 6))]).unwrap_err();
        assert_eq!(e.to_string(), "b.json: objects[0]: \"/\" on \"www.a.test\" differs from a.json: objects[0]");
    }
}
