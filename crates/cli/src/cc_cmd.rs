//! `protolab-net cc`: the registry of QUIC congestion controllers (docs/congestion.md).

use anyhow::bail;
use clap::Subcommand;
use serde_json::{json, Value};

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

fn entry_json(entry: &cc::registry::Entry) -> Value {
    json!({
        "name": entry.name,
        "doc": entry.doc,
        "profile": entry.profile,
        "params": entry.params.iter().map(|p| json!({
            "key": p.key,
            "default": p.default,
            "accepts": p.kind.expected(),
            "doc": p.doc,
        })).collect::<Vec<_>>(),
    })
}

fn spec_json(spec: &cc::ControllerSpec) -> Value {
    let params: serde_json::Map<String, Value> = spec.params.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect();
    json!({
        "given": spec.given,
        "name": spec.name,
        "base": spec.base.name,
        "canonical": spec.canonical(),
        "params": params,
    })
}

pub fn command(command: CcCommand) -> anyhow::Result<()> {
    match command {
        CcCommand::List { json } => {
            if json {
                let entries: Vec<Value> = cc::REGISTRY.iter().map(entry_json).collect();
                println!("{}", json!({ "schema": "protolab.cc-registry", "schema_version": 1, "controllers": entries }));
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
                println!("{}", Value::Array(checked.iter().map(spec_json).collect()));
            } else {
                for spec in &checked {
                    println!("{} = {}", spec.given, spec.canonical());
                }
            }
        }
    }
    Ok(())
}
