//! TLS material for a lab: a CA and one server certificate per origin, generated with rcgen,
//! written to a directory (docs/tls.md), and the rustls configurations that use them.
//!
//! The CA's private key is never written: material is generated fresh for every lab.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
};
use serde::Serialize;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// File name (inside the TLS directory) of the default certificate, used when a client sends no
/// SNI or an unknown name. `_` cannot appear in an origin hostname, so it never collides.
pub const DEFAULT_NAME: &str = "_default";

/// Version of `tls.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// TLS setup failures.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("certificate generation for {name}: {error}")]
    Generate {
        /// Which certificate.
        name: String,
        /// Why.
        error: rcgen::Error,
    },
    /// Writing the directory failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A name that cannot be a certificate file name.
    #[error("{0:?} is not a hostname")]
    BadName(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// A certificate or key file that is not the PEM expected.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

/// A certificate chain and its key read from files (`--cert-dir`, e.g. from an ACME CA),
/// used for one origin instead of the generated certificate.
pub struct LoadedCert {
    /// The origin's hostname.
    pub name: String,
    /// The chain, the origin's certificate first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
}

impl fmt::Debug for LoadedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedCert").field("name", &self.name).field("chain", &self.chain.len()).finish_non_exhaustive()
    }
}

/// For each hostname with both files in `dir`, `<hostname>.pem` (the chain, PEM, leaf first)
/// and `<hostname>.key.pem` (its key, PEM: PKCS#8, PKCS#1 or SEC1); hostnames without them are
/// left out (they keep the generated certificate). A file that is there but unreadable or holds
/// no certificate or key is an error.
pub fn load_cert_dir(dir: &Path, hostnames: &[String]) -> Result<Vec<LoadedCert>, TlsError> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut loaded = Vec::new();
    for name in hostnames {
        if !crate::manifest::valid_hostname(name) {
            return Err(TlsError::BadName(name.clone()));
        }
        let (cert_path, key_path) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key.pem")));
        if !cert_path.is_file() || !key_path.is_file() {
            continue;
        }
        let read = |path: &Path| std::fs::read(path).map_err(|error| TlsError::Io { path: path.to_path_buf(), error });
        let pem_err = |path: &Path, message: String| TlsError::Pem { path: path.to_path_buf(), message };
        let chain = CertificateDer::pem_slice_iter(&read(&cert_path)?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_err(&cert_path, format!("not a PEM certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(pem_err(&cert_path, "no certificate in it".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(&read(&key_path)?).map_err(|e| pem_err(&key_path, format!("no PEM private key: {e}")))?;
        loaded.push(LoadedCert { name: name.clone(), chain, key });
    }
    Ok(loaded)
}

/// One server certificate with its key.
pub struct ServerCert {
    /// Hostname (or [`DEFAULT_NAME`]).
    pub name: String,
    /// Subject alternative names (DNS names and IP addresses).
    pub sans: Vec<String>,
    /// Certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// Certificate, PEM.
    pub cert_pem: String,
    /// PKCS#8 private key, DER.
    pub key_der: Vec<u8>,
    /// PKCS#8 private key, PEM.
    pub key_pem: String,
    /// base64 of SHA-256 of the certificate's SubjectPublicKeyInfo (Chromium's SPKI hash).
    pub spki_sha256: String,
}

impl fmt::Debug for ServerCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCert").field("name", &self.name).field("sans", &self.sans).finish_non_exhaustive()
    }
}

/// A lab's CA and server certificates.
#[derive(Debug)]
pub struct TlsMaterial {
    /// CA certificate, DER.
    pub ca_der: CertificateDer<'static>,
    /// CA certificate, PEM.
    pub ca_pem: String,
    /// SPKI hash of the CA.
    pub ca_spki_sha256: String,
    /// One per origin hostname, then the default certificate last.
    pub certs: Vec<ServerCert>,
}

/// base64(SHA-256(SPKI DER)), the form of Chromium's `--ignore-certificate-errors-spki-list`.
pub fn spki_sha256(spki_der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, spki_der);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

fn generate_err(name: &str) -> impl FnOnce(rcgen::Error) -> TlsError + '_ {
    move |error| TlsError::Generate { name: name.to_string(), error }
}

impl TlsMaterial {
    /// Generates a CA (ECDSA P-256) and, per `(hostname, addresses)`, a server certificate whose
    /// SANs are the hostname and the addresses; plus a default certificate for `default_sans`
    /// (e.g. `localhost` and listen addresses that carry no origin).
    pub fn generate(lab: &str, origins: &[(String, Vec<IpAddr>)], default_sans: &[String]) -> Result<TlsMaterial, TlsError> {
        let ca_name = format!("protolab {lab} CA");
        let ca_key = KeyPair::generate().map_err(generate_err(&ca_name))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(generate_err(&ca_name))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.distinguished_name.push(DnType::CommonName, ca_name.clone());
        ca_params.distinguished_name.push(DnType::OrganizationName, "protolab");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(generate_err(&ca_name))?;
        let ca_spki_sha256 = spki_sha256(&ca_key.subject_public_key_info());
        let issuer = Issuer::new(ca_params, ca_key);

        if let Some((bad, _)) = origins.iter().find(|(h, _)| !crate::manifest::valid_hostname(h)) {
            return Err(TlsError::BadName(bad.clone()));
        }
        let mut certs = Vec::new();
        let mut requests: Vec<(String, Vec<String>)> = origins
            .iter()
            .map(|(host, addrs)| {
                let mut sans = vec![host.clone()];
                sans.extend(addrs.iter().map(IpAddr::to_string));
                (host.clone(), sans)
            })
            .collect();
        let mut defaults = default_sans.to_vec();
        if defaults.is_empty() {
            defaults.push("localhost".into());
        }
        requests.push((DEFAULT_NAME.to_string(), defaults));
        for (name, sans) in requests {
            let key = KeyPair::generate().map_err(generate_err(&name))?;
            let mut params = CertificateParams::new(sans.clone()).map_err(generate_err(&name))?;
            let cn = if name == DEFAULT_NAME { "protolab default".to_string() } else { name.clone() };
            params.distinguished_name.push(DnType::CommonName, cn);
            params.use_authority_key_identifier_extension = true;
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let cert = params.signed_by(&key, &issuer).map_err(generate_err(&name))?;
            certs.push(ServerCert {
                spki_sha256: spki_sha256(&key.subject_public_key_info()),
                cert_pem: cert.pem(),
                cert_der: cert.der().clone(),
                key_der: key.serialize_der(),
                key_pem: key.serialize_pem(),
                name,
                sans,
            });
        }
        Ok(TlsMaterial { ca_der: ca_cert.der().clone(), ca_pem: ca_cert.pem(), ca_spki_sha256, certs })
    }

    /// The comma-separated SPKI hashes of every server certificate (`spki.txt`).
    pub fn spki_list(&self) -> String {
        self.certs.iter().map(|c| c.spki_sha256.as_str()).collect::<Vec<_>>().join(",")
    }

    /// Writes the directory layout of docs/tls.md into `dir` (created if missing): `ca.pem`,
    /// `ca.der`, `certs/<name>.pem`, `certs/<name>.key.pem` (mode 0600), `spki.txt`,
    /// `ca-spki.txt`, `tls.json`.
    pub fn write(&self, dir: &Path) -> Result<(), TlsError> {
        let certs_dir = dir.join("certs");
        std::fs::create_dir_all(&certs_dir).map_err(|error| TlsError::Io { path: certs_dir.clone(), error })?;
        write_file(&dir.join("ca.pem"), self.ca_pem.as_bytes(), false)?;
        write_file(&dir.join("ca.der"), &self.ca_der, false)?;
        let mut index = Vec::new();
        for c in &self.certs {
            let cert = format!("certs/{}.pem", c.name);
            let key = format!("certs/{}.key.pem", c.name);
            write_file(&dir.join(&cert), c.cert_pem.as_bytes(), false)?;
            write_file(&dir.join(&key), c.key_pem.as_bytes(), true)?;
            index.push(IndexEntry { name: c.name.clone(), sans: c.sans.clone(), cert, key, spki_sha256: c.spki_sha256.clone() });
        }
        write_file(&dir.join("spki.txt"), format!("{}\n", self.spki_list()).as_bytes(), false)?;
        write_file(&dir.join("ca-spki.txt"), format!("{}\n", self.ca_spki_sha256).as_bytes(), false)?;
        let doc = Index { schema_version: SCHEMA_VERSION, ca: "ca.pem", ca_spki_sha256: &self.ca_spki_sha256, certs: index };
        // Serializing plain strings and numbers cannot fail.
        let json = serde_json::to_string_pretty(&doc).unwrap_or_default();
        write_file(&dir.join("tls.json"), format!("{json}\n").as_bytes(), false)
    }

    /// A rustls server configuration choosing the certificate by SNI (falling back to
    /// `default_for_no_sni`, else the default certificate), offering `alpn` (e.g. `h2`, `http/1.1`).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<rustls::ServerConfig, TlsError> {
        self.server_config_with(alpn, &[])
    }

    /// As [`TlsMaterial::server_config`], with the origins of `loaded` presenting those
    /// certificates (their chain as given) instead of the generated ones.
    pub fn server_config_with(&self, alpn: &[&[u8]], loaded: &[LoadedCert]) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut by_name = HashMap::new();
        let mut default = None;
        for c in &self.certs {
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key_der.clone()));
            let signing = provider.key_provider.load_private_key(key)?;
            let ck = Arc::new(CertifiedKey::new(vec![c.cert_der.clone(), self.ca_der.clone()], signing));
            if c.name == DEFAULT_NAME {
                default = Some(ck);
            } else {
                by_name.insert(c.name.clone(), ck);
            }
        }
        for l in loaded {
            let signing = provider.key_provider.load_private_key(l.key.clone_key())?;
            by_name.insert(l.name.clone(), Arc::new(CertifiedKey::new(l.chain.clone(), signing)));
        }
        let resolver = SniResolver { by_name, default };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// A rustls client configuration trusting only this CA (tests, the page-load engine).
    pub fn client_config(&self, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
        client_config_for_ca(&self.ca_der, alpn)
    }
}

/// A rustls client configuration trusting only the CA `ca_der`, offering `alpn`. Clients of a
/// protocol take theirs from `crate::client::tls_config`, which picks the ALPN.
pub fn client_config_for_ca(ca_der: &CertificateDer<'static>, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der.clone())?;
    client_config_with_roots(roots, alpn)
}

/// A rustls client configuration trusting the Mozilla roots (`webpki-roots`), for servers in
/// the wild, offering `alpn`.
pub fn client_config_for_web_pki(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
    client_config_with_roots(rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }, alpn)
}

/// The one client configuration builder: ring, rustls' default TLS versions, no client
/// certificate.
fn client_config_with_roots(roots: rustls::RootCertStore, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

#[derive(Serialize)]
struct IndexEntry {
    name: String,
    sans: Vec<String>,
    cert: String,
    key: String,
    spki_sha256: String,
}

#[derive(Serialize)]
struct Index<'a> {
    schema_version: u32,
    ca: &'a str,
    ca_spki_sha256: &'a str,
    certs: Vec<IndexEntry>,
}

fn write_file(path: &Path, data: &[u8], private: bool) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |error| TlsError::Io { path: path.to_path_buf(), error };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(if private { 0o600 } else { 0o644 });
    let mut f = options.open(path).map_err(err)?;
    f.write_all(data).map_err(err)?;
    Ok(())
}

/// Picks the certificate by SNI; unknown or missing names get the default certificate.
#[derive(Debug)]
struct SniResolver {
    by_name: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        hello
            .server_name()
            .and_then(|n| self.by_name.get(&n.to_ascii_lowercase()))
            .or(self.default.as_ref())
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_certificates_from_files_for_the_origins_that_have_them() {
        // Another lab's material stands in for an ACME CA's: its chain for www.a.test.
        let other = TlsMaterial::generate("other", &[("www.a.test".to_string(), vec![])], &[]).unwrap();
        let dir = std::env::temp_dir().join(format!("protolab-cert-dir-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chain = format!("{}{}", other.certs[0].cert_pem, other.ca_pem);
        std::fs::write(dir.join("www.a.test.pem"), &chain).unwrap();
        std::fs::write(dir.join("www.a.test.key.pem"), &other.certs[0].key_pem).unwrap();
        std::fs::write(dir.join("www.b.test.pem"), &chain).unwrap(); // no key: keeps the generated one
        let names = vec!["www.a.test".to_string(), "www.b.test".to_string()];
        let loaded = load_cert_dir(&dir, &names).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].name, "www.a.test");
        assert_eq!(loaded[0].chain, vec![other.certs[0].cert_der.clone(), other.ca_der.clone()]);
        let ours = TlsMaterial::generate("ours", &[("www.a.test".to_string(), vec![])], &[]).unwrap();
        ours.server_config_with(&[b"h2"], &loaded).unwrap();
        // A file that is there but is no PEM certificate is an error naming it.
        std::fs::write(dir.join("www.b.test.key.pem"), "not a key").unwrap();
        std::fs::write(dir.join("www.b.test.pem"), "not a certificate").unwrap();
        let err = load_cert_dir(&dir, &names).unwrap_err().to_string();
        assert!(err.contains("www.b.test.pem"), "{err}");
        assert!(matches!(load_cert_dir(&dir, &["../x".to_string()]), Err(TlsError::BadName(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn generates_and_writes() {
        let origins = vec![("www.a.test".to_string(), vec!["10.0.1.1".parse().unwrap()])];
        let m = TlsMaterial::generate("t", &origins, &["127.0.0.1".into()]).unwrap();
        assert_eq!(m.certs.len(), 2);
        assert_eq!(m.certs[0].sans, vec!["www.a.test", "10.0.1.1"]);
        assert_eq!(m.certs[1].name, DEFAULT_NAME);
        // base64 of 32 bytes.
        assert_eq!(m.certs[0].spki_sha256.len(), 44);
        assert_ne!(m.certs[0].spki_sha256, m.certs[1].spki_sha256);
        let dir = std::env::temp_dir().join(format!("protolab-tls-test-{}", std::process::id()));
        m.write(&dir).unwrap();
        let spki = std::fs::read_to_string(dir.join("spki.txt")).unwrap();
        assert_eq!(spki.trim().split(',').count(), 2);
        let ca = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("certs/www.a.test.key.pem")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("tls.json")).unwrap()).unwrap();
        assert_eq!(index["certs"][0]["cert"], "certs/www.a.test.pem");
        std::fs::remove_dir_all(&dir).unwrap();
        m.server_config(&[b"h2", b"http/1.1"]).unwrap();
        m.client_config(&[b"h2"]).unwrap();
    }

    #[test]
    fn spki_hash_is_sha256_base64() {
        // SHA-256("") = e3b0c442...; base64 of it:
        assert_eq!(spki_sha256(b""), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }
}
