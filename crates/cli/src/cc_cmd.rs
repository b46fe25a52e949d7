//! `protolab-net cc`: the registry of QUIC congestion controllers (docs/congestion.md).

use anyhow::bail;
use clap::Subcommand;
use contract::controllers::{CcEntry, CcParam, CcRegistry, CcRegistrySchema, CcSpec, REGISTRY_SCHEMA_VERSION};

#[derive(Subcommand)]
pub enum CcCommand {
    /// List the controllers and their parameters.
    List {
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check NAME[:key=value,...] specs; print each with every parameter's effective value.
    Check {
        /// The specs (e.g. cubic:c=0.8,beta=0.5 gquic39 fixed:rate=5mbit).
        #[arg(required = true)]
        specs: Vec<String>,
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn entry_document(entry: &cc::registry::Entry) -> CcEntry {
    CcEntry {
        name: entry.name.to_string(),
        doc: entry.doc.to_string(),
        profile: entry.profile.map(str::to_string),
        params: entry
            .params
            .iter()
            .map(|p| CcParam { key: p.key.to_string(), default: p.default.map(str::to_string), accepts: p.kind.expected(), doc: p.doc.to_string() })
            .collect(),
    }
}

fn spec_document(spec: &cc::ControllerSpec) -> CcSpec {
    CcSpec {
        given: spec.given.clone(),
        name: spec.name.to_string(),
        base: spec.base.name.to_string(),
        canonical: spec.canonical(),
        params: spec.params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

pub fn command(command: CcCommand) -> anyhow::Result<()> {
    match command {
        CcCommand::List { json } => {
            if json {
                let registry = CcRegistry {
                    schema: CcRegistrySchema::CcRegistry,
                    schema_version: REGISTRY_SCHEMA_VERSION,
                    controllers: cc::REGISTRY.iter().map(entry_document).collect(),
                };
                println!("{}", serde_json::to_string(&registry)?);
                return Ok(());
            }
            for entry in cc::REGISTRY {
                match entry.profile {
                    Some(profile) => println!("{:<14} {} (= {profile})", entry.name, entry.doc),
                    None => println!("{:<14} {}", entry.name, entry.doc),
                }
                for p in entry.params {
                    let default = p.default.map_or_else(|| "required".to_string(), |d| format!("default {d}"));
                    println!("    {:<17} {} ({default}; {})", p.key, p.doc, p.kind.expected());
                }
            }
        }
        CcCommand::Check { specs, json } => {
            let mut checked = Vec::new();
            for text in &specs {
                match cc::ControllerSpec::parse(text) {
                    Ok(spec) => checked.push(spec),
                    Err(e) => bail!("{e}"),
                }
            }
            if json {
                let documents: Vec<CcSpec> = checked.iter().map(spec_document).collect();
                println!("{}", serde_json::to_string(&documents)?);
            } else {
                for spec in &checked {
                    println!("{} = {}", spec.given, spec.canonical());
                }
            }
        }
    }
    Ok(())
}
