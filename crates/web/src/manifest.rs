//! Page manifests (docs/manifest.md): JSON, parsing with field paths, validation.
//!
//! A manifest describes one page: the origins it is served from and its objects with the
//! dependency tree a browser follows (each object names the object that discovers it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The manifest format version this build reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Largest object this build serves (1 GiB); larger bodies belong to `/bytes`.
pub const MAX_OBJECT_SIZE: u64 = 1 << 30;

/// Largest discovery delay (10 minutes).
pub const MAX_DELAY_MS: u64 = 600_000;

/// Paths that the server answers itself; a manifest object cannot use them.
pub const RESERVED_PATHS: [&str; 3] = ["/bytes", "/upload", "/empty"];

/// Response headers a manifest cannot set: the server writes them or they are hop-by-hop.
const FORBIDDEN_HEADERS: [&str; 10] = [
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
    "content-encoding",
];

/// A refused manifest: the file, the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ManifestError {
    /// The manifest file as given (or a label for text that came from elsewhere).
    pub file: String,
    /// Field path, e.g. `objects[3].parent`.
    pub field: String,
    /// Why.
    pub message: String,
}

/// An origin: a hostname served from one IPv4 address (ports 80 and 443).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// DNS name, lowercase (`www.example.test`).
    pub hostname: String,
    /// Address the origin's server listens on.
    pub address: Ipv4Addr,
}

/// One object of the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    /// Path and optional query, starting with `/` (`/img/a.png`, `/api?x=1`).
    pub path: String,
    /// Hostname of the origin that serves it.
    pub origin: String,
    /// Body size in bytes (> 0).
    pub size: u64,
    /// `content-type` of the response.
    pub content_type: String,
    /// Extra response headers (name -> value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The object that discovers this one: `/path` on the same origin or `//hostname/path`.
    /// Absent for the root (the main HTML document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Time between the parent finishing and this object being requested (parse/compute time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// A recorded body (`protolab corpus record`): a file, relative to the manifest's directory,
    /// of exactly `size` bytes, served instead of a generated body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// Whether `body` is a relative path inside the manifest's directory (no `..`, not absolute).
pub fn valid_body_path(body: &str) -> bool {
    !body.is_empty()
        && body.len() <= 1024
        && !body.starts_with('/')
        && !body.contains('\\')
        && body.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn default_schema() -> u32 {
    SCHEMA_VERSION
}
fn default_seed() -> u64 {
    1
}

/// A whole manifest file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format version.
    #[serde(default = "default_schema")]
    pub schema_version: u32,
    /// Page name (free text, for results).
    pub name: String,
    /// Seed of the generated bodies.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Origins.
    pub origins: Vec<Origin>,
    /// Objects; exactly one has no parent (the root).
    pub objects: Vec<Object>,
}

/// An object's identity: (hostname, path).
pub type ObjectKey = (String, String);

/// A refused field: (field path, why).
pub type Refusal = (String, String);

/// Whether `name` is an acceptable hostname: lowercase LDH labels, at least one dot not
/// required (`localhost` is fine), at most 253 characters, not an IP literal.
pub fn valid_hostname(name: &str) -> bool {
    if name.is_empty() || name.len() > 253 || name.parse::<std::net::IpAddr>().is_ok() {
        return false;
    }
    name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    })
}

/// Whether `path` is an acceptable request target: origin-form, printable ASCII, no fragment.
fn valid_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 2048
        && path.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
        && http::uri::PathAndQuery::try_from(path).is_ok()
}

/// The path part of a request target (without the query).
pub fn path_only(target: &str) -> &str {
    target.split_once('?').map_or(target, |(p, _)| p)
}

/// The field a serde error is about. serde names a missing field only in its message, and the
/// path stops at the object that lacks it: the field is appended.
fn error_field(path: &str, message: &str) -> String {
    let missing = message.strip_prefix("missing field `").and_then(|rest| rest.split_once('`')).map(|(name, _)| name);
    match (path, missing) {
        (".", Some(name)) => name.to_string(),
        (".", None) => "(document)".to_string(),
        (_, Some(name)) => format!("{path}.{name}"),
        (_, None) => path.to_string(),
    }
}

impl Object {
    /// The object's key.
    pub fn key(&self) -> ObjectKey {
        (self.origin.clone(), self.path.clone())
    }

    /// The parent's key, resolving a same-origin `/path`. `None` for the root; `Err` if the
    /// reference is not of a recognised form.
    pub fn parent_key(&self) -> Option<Result<ObjectKey, String>> {
        let parent = self.parent.as_ref()?;
        Some(parse_reference(parent, &self.origin))
    }
}

fn parse_reference(reference: &str, own_origin: &str) -> Result<ObjectKey, String> {
    if let Some(rest) = reference.strip_prefix("//") {
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => return Err(format!("{reference:?} must be \"/path\" or \"//hostname/path\"")),
        };
        if !valid_hostname(host) {
            return Err(format!("{host:?} in {reference:?} is not a hostname"));
        }
        Ok((host.to_string(), path.to_string()))
    } else if reference.starts_with('/') {
        Ok((own_origin.to_string(), reference.to_string()))
    } else {
        Err(format!("{reference:?} must be \"/path\" or \"//hostname/path\""))
    }
}

impl Manifest {
    /// Reads and validates a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ManifestError { file: file.clone(), field: "(file)".into(), message: format!("cannot read: {e}") })?;
        Self::parse(&text, &file)
    }

    /// Parses and validates manifest JSON; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, ManifestError> {
        let err = |field: String, message: String| ManifestError { file: file.to_string(), field, message };
        let de = &mut serde_json::Deserializer::from_str(text);
        let manifest: Manifest = serde_path_to_error::deserialize(de).map_err(|e| {
            let message = e.inner().to_string();
            let field = if e.inner().is_syntax() || e.inner().is_eof() {
                "(document)".to_string() // not JSON: the line and column say where
            } else {
                error_field(&e.path().to_string(), &message)
            };
            err(field, message)
        })?;
        manifest.validate().map_err(|(field, message)| err(field, message))?;
        Ok(manifest)
    }

    /// The root object (the main HTML document). Valid manifests have exactly one.
    pub fn root(&self) -> Option<&Object> {
        self.objects.iter().find(|o| o.parent.is_none())
    }

    /// The origin named `hostname`.
    pub fn origin(&self, hostname: &str) -> Option<&Origin> {
        self.origins.iter().find(|o| o.hostname == hostname)
    }

    /// Total bytes of all objects.
    pub fn total_size(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }

    /// Checks what serde does not; errors are (field path, message).
    pub fn validate(&self) -> Result<(), Refusal> {
        if self.schema_version != SCHEMA_VERSION {
            return Err((
                "schema_version".into(),
                format!("version {} is not supported (this build reads {SCHEMA_VERSION})", self.schema_version),
            ));
        }
        let hostnames = self.validate_origins()?;
        let index = self.validate_objects(&hostnames)?;
        let parents = self.resolve_parents(&hostnames, &index)?;
        self.check_no_cycle(&parents)
    }

    /// At least one origin; hostnames valid and unique, addresses usable. The hostnames.
    fn validate_origins(&self) -> Result<HashSet<&str>, Refusal> {
        if self.origins.is_empty() {
            return Err(("origins".into(), "a page needs at least one origin".into()));
        }
        let mut hostnames = HashSet::new();
        for (i, o) in self.origins.iter().enumerate() {
            if !valid_hostname(&o.hostname) {
                return Err((
                    format!("origins[{i}].hostname"),
                    format!("{:?} is not a hostname (lowercase letters, digits, '-' and '.')", o.hostname),
                ));
            }
            if !hostnames.insert(o.hostname.as_str()) {
                return Err((format!("origins[{i}].hostname"), format!("origin {:?} is defined twice", o.hostname)));
            }
            let a = o.address;
            if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
                return Err((format!("origins[{i}].address"), format!("{a} cannot be an origin address")));
            }
        }
        Ok(hostnames)
    }

    /// Every object's own fields, (origin, path) unique, exactly one root. The objects by key.
    fn validate_objects(&self, hostnames: &HashSet<&str>) -> Result<HashMap<ObjectKey, usize>, Refusal> {
        if self.objects.is_empty() {
            return Err(("objects".into(), "a page needs at least one object (the root)".into()));
        }
        let mut index: HashMap<ObjectKey, usize> = HashMap::new();
        let mut root = None;
        for (i, o) in self.objects.iter().enumerate() {
            let at = |f: &str| format!("objects[{i}].{f}");
            o.validate_fields(hostnames).map_err(|(field, message)| (at(&field), message))?;
            if let Some(previous) = index.insert(o.key(), i) {
                return Err((at("path"), format!("{:?} on {:?} is already objects[{previous}]", o.path, o.origin)));
            }
            if o.parent.is_none() {
                if let Some(first) = root {
                    return Err((
                        at("parent"),
                        format!("missing: only the root has no parent, and objects[{first}] is already the root"),
                    ));
                }
                if o.delay_ms != 0 {
                    return Err((at("delay_ms"), "the root has no parent, so it has no discovery delay".into()));
                }
                root = Some(i);
            }
        }
        if root.is_none() {
            return Err(("objects".into(), "no root: exactly one object (the main HTML document) has no parent".into()));
        }
        Ok(index)
    }

    /// Each object's parent as an index into `objects` (None for the root).
    fn resolve_parents(&self, hostnames: &HashSet<&str>, index: &HashMap<ObjectKey, usize>) -> Result<Vec<Option<usize>>, Refusal> {
        let mut parents = vec![None; self.objects.len()];
        for (i, o) in self.objects.iter().enumerate() {
            let Some(parent) = o.parent_key() else { continue };
            let field = format!("objects[{i}].parent");
            let (host, path) = parent.map_err(|m| (field.clone(), m))?;
            if !hostnames.contains(host.as_str()) {
                return Err((field, format!("no origin {host:?} in origins")));
            }
            match index.get(&(host.clone(), path.clone())) {
                Some(&p) if p == i => return Err((field, "an object cannot discover itself".into())),
                Some(&p) => parents[i] = Some(p),
                None if host == o.origin => return Err((field, format!("no object {path:?}"))),
                None => return Err((field, format!("no object {path:?} on origin {host:?}"))),
            }
        }
        Ok(parents)
    }

    /// Every object must lead to the root by following parents; one that does not sits in a
    /// cycle (or hangs from one). At most n steps per object: bounded.
    fn check_no_cycle(&self, parents: &[Option<usize>]) -> Result<(), Refusal> {
        let n = parents.len();
        let mut reaches_root = vec![false; n];
        for start in 0..n {
            let mut chain = vec![start];
            let mut at = start;
            let mut ok = false;
            for _ in 0..=n {
                if reaches_root[at] {
                    ok = true;
                    break;
                }
                match parents[at] {
                    None => {
                        ok = true;
                        break;
                    }
                    Some(p) => {
                        if chain.contains(&p) {
                            break;
                        }
                        chain.push(p);
                        at = p;
                    }
                }
            }
            if !ok {
                let names: Vec<String> = chain.iter().map(|&k| format!("{:?}", self.objects[k].path)).collect();
                return Err((format!("objects[{start}].parent"), format!("cycle: {} -> ...", names.join(" -> "))));
            }
            for k in chain {
                reaches_root[k] = true;
            }
        }
        Ok(())
    }
}

impl Object {
    /// The object's own fields, alone; the field path is relative to the object (`size`,
    /// `headers.x-a`).
    fn validate_fields(&self, hostnames: &HashSet<&str>) -> Result<(), Refusal> {
        let refuse = |field: &str, message: String| Err((field.to_string(), message));
        if !valid_path(&self.path) {
            return refuse("path", format!("{:?} must start with '/' and be printable ASCII without '#'", self.path));
        }
        if RESERVED_PATHS.contains(&path_only(&self.path)) {
            return refuse("path", format!("{:?} is reserved for the server's synthetic endpoints", self.path));
        }
        if !hostnames.contains(self.origin.as_str()) {
            return refuse("origin", format!("no origin {:?} in origins", self.origin));
        }
        if self.size == 0 || self.size > MAX_OBJECT_SIZE {
            return refuse("size", format!("{} must be between 1 and {MAX_OBJECT_SIZE} bytes", self.size));
        }
        if self.content_type.is_empty() || http::HeaderValue::from_str(&self.content_type).is_err() {
            return refuse("content_type", format!("{:?} is not a header value", self.content_type));
        }
        for (name, value) in &self.headers {
            check_header(name, value).map_err(|message| (format!("headers.{name}"), message))?;
        }
        if let Some(body) = &self.body {
            if !valid_body_path(body) {
                return refuse("body", format!("{body:?} must be a relative path inside the manifest's directory"));
            }
        }
        if self.delay_ms > MAX_DELAY_MS {
            return refuse("delay_ms", format!("{} is more than {MAX_DELAY_MS} ms", self.delay_ms));
        }
        Ok(())
    }
}

/// An extra response header a manifest sets: a valid name the server does not write, a valid value.
fn check_header(name: &str, value: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err("not a header name".into());
    }
    if FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with(':') {
        return Err("set by the server; a manifest cannot set it".into());
    }
    if http::HeaderValue::from_str(value).is_err() {
        return Err(format!("{value:?} is not a header value"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> serde_json::Value {
        serde_json::json!({
            "schema_version": 1,
            "name": "t",
            "origins": [
                {"hostname": "www.a.test", "address": "10.0.1.1"},
                {"hostname": "static.a.test", "address": "10.0.1.2"}
            ],
            "objects": [
                {"path": "/", "origin": "www.a.test", "size": 1000, "content_type": "text/html"},
                {"path": "/s.css", "origin": "www.a.test", "size": 10, "content_type": "text/css", "parent": "/"},
                {"path": "/f.woff2", "origin": "static.a.test", "size": 10, "content_type": "font/woff2",
                 "parent": "//www.a.test/s.css", "delay_ms": 5},
                {"path": "/i.png", "origin": "static.a.test", "size": 10, "content_type": "image/png", "parent": "//www.a.test/"}
            ]
        })
    }

    fn check(v: &serde_json::Value) -> Result<Manifest, ManifestError> {
        Manifest::parse(&v.to_string(), "page.json")
    }

    fn error(v: &serde_json::Value) -> String {
        check(v).expect_err("should be refused").to_string()
    }

    #[test]
    fn accepts_a_valid_page() {
        let m = check(&page()).unwrap();
        assert_eq!(m.root().unwrap().path, "/");
        assert_eq!(m.total_size(), 1030);
        assert_eq!(m.seed, 1);
        assert_eq!(m.objects[2].parent_key().unwrap().unwrap(), ("www.a.test".to_string(), "/s.css".to_string()));
    }

    #[test]
    fn names_file_and_field() {
        let mut v = page();
        v["objects"][3]["parent"] = "/x.css".into();
        assert_eq!(error(&v), "page.json: objects[3].parent: no object \"/x.css\"");
        let mut v = page();
        v["objects"][1]["size"] = "big".into();
        assert!(error(&v).starts_with("page.json: objects[1].size: invalid type"), "{}", error(&v));
        let mut v = page();
        v["objects"][1]["colour"] = "red".into();
        assert!(error(&v).starts_with("page.json: objects[1].colour: unknown field `colour`"), "{}", error(&v));
        let mut v = page();
        v["origins"][0]["address"] = "10.0.1".into();
        assert!(error(&v).starts_with("page.json: origins[0].address: invalid IPv4"), "{}", error(&v));
        let e = Manifest::parse("{", "p.json").unwrap_err().to_string();
        assert!(e.starts_with("p.json: ") && e.contains("EOF while parsing"), "{e}");
    }

    #[test]
    fn refuses_structural_errors() {
        let mut v = page();
        v["objects"][1]["size"] = 0.into();
        assert!(error(&v).starts_with("page.json: objects[1].size: 0 must be"));
        let mut v = page();
        v["objects"][3]["path"] = "/s.css".into();
        v["objects"][3]["origin"] = "www.a.test".into();
        assert!(error(&v).contains("objects[3].path: \"/s.css\" on \"www.a.test\" is already objects[1]"), "{}", error(&v));
        let mut v = page();
        v["objects"][2]["origin"] = "cdn.a.test".into();
        assert_eq!(error(&v), "page.json: objects[2].origin: no origin \"cdn.a.test\" in origins");
        let mut v = page();
        v["objects"][1]["parent"] = serde_json::Value::Null;
        assert!(error(&v).contains("objects[1].parent: missing"), "{}", error(&v));
        let mut v = page();
        v["objects"][0]["parent"] = "/i.png".into();
        assert!(error(&v).contains("objects: no root"), "{}", error(&v));
        let mut v = page();
        v["objects"][2]["parent"] = "//nowhere.test/s.css".into();
        assert!(error(&v).contains("objects[2].parent: no origin \"nowhere.test\""));
        let mut v = page();
        v["objects"][2]["parent"] = "s.css".into();
        assert!(error(&v).contains("objects[2].parent: \"s.css\" must be"));
        let mut v = page();
        v["objects"][1]["path"] = "/bytes".into();
        assert!(error(&v).contains("objects[1].path: \"/bytes\" is reserved"));
        let mut v = page();
        v["objects"][1]["headers"] = serde_json::json!({"Content-Length": "5"});
        assert!(error(&v).contains("objects[1].headers.Content-Length: set by the server"));
        let mut v = page();
        v["objects"][1]["headers"] = serde_json::json!({"x-a": "line\nbreak"});
        assert!(error(&v).contains("objects[1].headers.x-a: "));
        let mut v = page();
        v["origins"][1]["hostname"] = "Static_A".into();
        assert!(error(&v).contains("origins[1].hostname: \"Static_A\" is not a hostname"));
        let mut v = page();
        v["schema_version"] = 2.into();
        assert!(error(&v).contains("schema_version: version 2 is not supported"));
        let mut v = page();
        v["objects"][1]["path"] = "no-slash".into();
        assert!(error(&v).contains("objects[1].path: "));
    }

    #[test]
    fn refuses_cycles_and_self_parents() {
        let mut v = page();
        // s.css <- f.woff2 and s.css discovered by f.woff2: a cycle away from the root.
        v["objects"][1]["parent"] = "//static.a.test/f.woff2".into();
        let e = error(&v);
        assert!(e.contains("objects[1].parent: cycle: \"/s.css\" -> \"/f.woff2\""), "{e}");
        let mut v = page();
        v["objects"][3]["parent"] = "/i.png".into();
        assert!(error(&v).contains("objects[3].parent: an object cannot discover itself"));
    }

    #[test]
    fn hostnames() {
        assert!(valid_hostname("www.example.test"));
        assert!(valid_hostname("localhost"));
        assert!(!valid_hostname("10.0.0.1"));
        assert!(!valid_hostname("a..b"));
        assert!(!valid_hostname("-a.b"));
        assert!(!valid_hostname("A.b"));
        assert!(!valid_hostname(""));
    }
}
