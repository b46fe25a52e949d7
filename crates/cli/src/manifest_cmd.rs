//! `protolab-net manifest`: page manifests (docs/manifest.md). `check` is the one place the
//! rules are applied for Python too: it calls `manifest check --json` rather than keep a copy.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use contract::manifests::{CheckedManifest, ManifestCheck, ManifestCheckSchema, CHECK_SCHEMA_VERSION};

#[derive(Subcommand)]
pub enum ManifestCommand {
    /// Check manifests as `serve` would: every rule of docs/manifest.md and the recorded bodies.
    Check {
        /// Manifest files; `-` reads one manifest from stdin.
        #[arg(required = true)]
        files: Vec<String>,
        /// What the manifest read from stdin is called in messages; its recorded bodies are
        /// looked for as if it were this file.
        #[arg(long, default_value = "-")]
        stdin_name: String,
        /// One JSON document (every file, ok or the refused field) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The check of one file: the manifest, or the refused field (file, field, message).
fn check_one(file: &str, stdin_name: &str) -> Result<web::Manifest, (String, String, String)> {
    let refused = |label: &str, field: &str, message: String| (label.to_string(), field.to_string(), message);
    let (label, manifest) = if file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| refused(stdin_name, "(file)", format!("cannot read stdin: {e}")))?;
        (stdin_name, web::Manifest::parse(&text, stdin_name))
    } else {
        (file, web::Manifest::load(Path::new(file)))
    };
    let manifest = manifest.map_err(|e| (e.file, e.field, e.message))?;
    web::site::check_recorded_bodies(label, &manifest).map_err(|e| (e.file, e.field, e.message))?;
    Ok(manifest)
}

fn checked(file: &str, result: &Result<web::Manifest, (String, String, String)>) -> CheckedManifest {
    let entry = CheckedManifest { file: file.to_string(), ok: result.is_ok(), name: None, origins: None, objects: None, bytes: None, field: None, message: None };
    match result {
        Ok(m) => CheckedManifest { name: Some(m.name.clone()), origins: Some(m.origins.len()), objects: Some(m.objects.len()), bytes: Some(m.total_size()), ..entry },
        Err((_, field, message)) => CheckedManifest { field: Some(field.clone()), message: Some(message.clone()), ..entry },
    }
}

pub fn command(command: ManifestCommand) -> anyhow::Result<ExitCode> {
    let ManifestCommand::Check { files, stdin_name, json } = command;
    if files.iter().filter(|f| *f == "-").count() > 1 {
        anyhow::bail!("stdin (-) holds one manifest; it is given more than once");
    }
    let results: Vec<_> = files.iter().map(|file| check_one(file, &stdin_name)).collect();
    if json {
        let manifests = files.iter().zip(&results).map(|(file, result)| checked(file, result)).collect();
        let answer = ManifestCheck { schema: ManifestCheckSchema::ManifestCheck, schema_version: CHECK_SCHEMA_VERSION, manifests };
        println!("{}", serde_json::to_string(&answer)?);
    } else {
        for (file, result) in files.iter().zip(&results) {
            let name = if file == "-" { &stdin_name } else { file };
            match result {
                Ok(m) => println!("{name}: ok ({} objects, {} bytes, {} origins)", m.objects.len(), m.total_size(), m.origins.len()),
                Err((file, field, message)) => eprintln!("error: {file}: {field}: {message}"),
            }
        }
    }
    Ok(if results.iter().all(Result::is_ok) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
