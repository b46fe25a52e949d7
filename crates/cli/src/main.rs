//! `protolab-net`: the command line over the protolab crates.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "protolab-net", version, about = "protolab's network emulator and endpoints")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The userspace network emulator.
    #[command(subcommand)]
    Emu(EmuCommand),
}

#[derive(Subcommand)]
enum EmuCommand {
    /// Build a lab from a topology file and forward packets until stopped.
    Run {
        /// Topology file (TOML or JSON; docs/topology.md).
        #[arg(long)]
        topology: PathBuf,
        /// Where lab state (control socket, pid) lives.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Do not start the watchdog that cleans up after a SIGKILL.
        #[arg(long)]
        no_watchdog: bool,
        /// Busy-poll this many microseconds before each due packet (precise timing on VMs; 0 = never).
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
    },
    /// Validate a topology file; print it normalized as JSON.
    Check {
        /// Topology file.
        #[arg(long)]
        topology: PathBuf,
    },
    /// Remove what a crashed or killed lab left behind (all labs without --lab).
    Cleanup {
        /// Lab name.
        #[arg(long)]
        lab: Option<String>,
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// List labs present on this machine.
    List {
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Send one control request (a JSON object) to a running lab and print the reply.
    Ctl {
        /// Lab name.
        #[arg(long)]
        lab: String,
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// The request, e.g. '{"cmd":"counters"}'.
        request: String,
    },
    /// Internal: wait for the emulator to end and clean up after it.
    #[command(hide = true)]
    Watchdog {
        #[arg(long)]
        lab: String,
        #[arg(long)]
        state_dir: PathBuf,
    },
}

fn emu_command(command: EmuCommand) -> anyhow::Result<()> {
    match command {
        EmuCommand::Run { topology, state_dir, no_watchdog, spin_us } => {
            emu::run(&emu::RunOptions { topology, state_dir, watchdog: !no_watchdog, spin_us })?;
        }
        EmuCommand::Check { topology } => {
            let (topology, _) = emu::check(&topology)?;
            println!("{}", serde_json::to_string_pretty(&topology)?);
        }
        EmuCommand::Cleanup { lab, state_dir } => {
            let labs = match lab {
                Some(l) => vec![l],
                None => emu::state::list_labs(&state_dir),
            };
            for lab in labs {
                if lab.contains('/') || lab.contains('-') || lab.is_empty() {
                    bail!("--lab: {lab:?} is not a lab name");
                }
                let report = emu::state::cleanup_lab(&state_dir, &lab)?;
                println!("{}", serde_json::to_string(&report)?);
            }
        }
        EmuCommand::List { state_dir } => {
            for lab in emu::state::list_labs(&state_dir) {
                println!("{lab}");
            }
        }
        EmuCommand::Ctl { lab, state_dir, request } => {
            let value: serde_json::Value = serde_json::from_str(&request).context("the request is not valid JSON")?;
            let socket = emu::state::LabState::new(&state_dir, &lab).control();
            let reply = emu::control::request(&socket, &value).with_context(|| format!("cannot reach lab {lab:?} at {}", socket.display()))?;
            println!("{reply}");
            if reply.get("ok") != Some(&serde_json::Value::Bool(true)) {
                bail!("the request failed");
            }
        }
        EmuCommand::Watchdog { lab, state_dir } => {
            emu::watchdog(&state_dir, &lab)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Emu(c) => emu_command(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
