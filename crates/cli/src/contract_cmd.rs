//! `protolab-net schema` and `protolab-net modes`: what the contract crate defines, for the
//! programs that read protolab's documents (README.md, "Documents and their schemas").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct SchemaArgs {
    /// Directory of the schema files (one `<document>.json` each).
    #[arg(long, default_value = "schemas")]
    out: PathBuf,
    /// Write nothing: compare the files with the documents and exit 1 naming the stale ones.
    #[arg(long)]
    check: bool,
}

/// Writes (or, with `--check`, compares) one JSON Schema per document of the contract.
pub fn schema(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let documents = contract::documents();
    let stale: Vec<&contract::Document> = documents
        .iter()
        .filter(|d| std::fs::read_to_string(schema_path(&args.out, d.name)).ok().as_deref() != Some(d.render().as_str()))
        .collect();
    let leftover = leftover_files(&args.out, &documents);
    if args.check {
        for d in &stale {
            eprintln!("stale: {}", schema_path(&args.out, d.name).display());
        }
        for name in &leftover {
            eprintln!("no document: {}", args.out.join(name).display());
        }
        if stale.is_empty() && leftover.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("protolab-net schema: {} is stale; run `protolab-net schema --out {}`", args.out.display(), args.out.display());
        return Ok(ExitCode::from(1));
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    for d in &stale {
        let path = schema_path(&args.out, d.name);
        std::fs::write(&path, d.render()).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    for name in &leftover {
        eprintln!("warning: {} is no document's schema (renamed or removed?); delete it", args.out.join(name).display());
    }
    Ok(ExitCode::SUCCESS)
}

fn schema_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// `.json` files in `dir` that no document writes.
fn leftover_files(dir: &Path, documents: &[contract::Document]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json") && !documents.iter().any(|d| name.strip_suffix(".json") == Some(d.name)))
        .collect();
    names.sort();
    names
}

#[derive(Args)]
pub struct ModesArgs {
    /// One JSON document (the `mode-registry` schema) instead of text.
    #[arg(long)]
    json: bool,
}

/// Lists the page-load modes and schedulers.
pub fn modes(args: ModesArgs) -> anyhow::Result<()> {
    let registry = contract::modes::registry();
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&registry)?)?;
        return Ok(());
    }
    for m in &registry.modes {
        let name = if m.takes_count { format!("{}:N", m.name) } else { m.name.clone() };
        writeln!(out, "{name:<14} {} over {}: {}", m.protocol, m.transport, m.description)?;
    }
    writeln!(out, "N: 1 to {}", registry.max_parallel)?;
    writeln!(out, "schedulers (several connections per origin):")?;
    for s in &registry.schedulers {
        writeln!(out, "    {:<18} {}", s.name.name(), s.description)?;
    }
    Ok(())
}
