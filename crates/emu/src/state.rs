//! Lab state directories, existence checks and cleanup.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::system::{self, SystemError};

/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/run/protolab";
/// Name of the emulator binary, to recognise our own process before killing it.
pub const EMULATOR_COMM: &str = "protolab-net";

/// Files of one lab.
#[derive(Debug, Clone)]
pub struct LabState {
    /// `DIR/<lab>`.
    pub dir: PathBuf,
}

impl LabState {
    /// The state of lab `lab` under `state_dir`.
    pub fn new(state_dir: &Path, lab: &str) -> Self {
        LabState { dir: state_dir.join(lab) }
    }
    /// Control socket path.
    pub fn control(&self) -> PathBuf {
        self.dir.join("control.sock")
    }
    /// Pid file path.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("emu.pid")
    }
    /// Normalized topology path.
    pub fn topology(&self) -> PathBuf {
        self.dir.join("topology.json")
    }
    /// The recorded emulator pid, if any.
    pub fn emulator_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.pid_file()).ok()?.trim().parse().ok()
    }
}

/// Why a lab cannot be created.
pub fn existing_lab_reason(state_dir: &Path, lab: &str) -> Option<String> {
    if let Some(ns) = system::lab_namespaces(lab).first() {
        return Some(format!("namespace {ns}"));
    }
    let state = LabState::new(state_dir, lab);
    if state.dir.exists() {
        return Some(format!("state directory {}", state.dir.display()));
    }
    None
}

/// Labs with state directories or namespaces on this machine.
pub fn list_labs(state_dir: &Path) -> Vec<String> {
    let mut labs: Vec<String> = std::fs::read_dir(state_dir)
        .map(|d| d.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    for ns in system::namespaces() {
        if let Some(rest) = ns.strip_prefix("pl-") {
            if let Some((lab, _)) = rest.split_once('-') {
                labs.push(lab.to_string());
            }
        }
    }
    labs.sort();
    labs.dedup();
    labs
}

/// What a cleanup removed.
#[derive(Debug, Default, serde::Serialize)]
pub struct CleanupReport {
    /// Lab.
    pub lab: String,
    /// Emulator pid killed.
    pub emulator_killed: Option<i32>,
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes killed inside them.
    pub processes: Vec<i32>,
    /// Whether a state directory was removed.
    pub state_removed: bool,
}

/// Removes everything of lab `lab`: its emulator (only if it is a `protolab-net` other than us),
/// the processes inside its namespaces, the namespaces, the state directory. Idempotent.
pub fn cleanup_lab(state_dir: &Path, lab: &str) -> Result<CleanupReport, SystemError> {
    let state = LabState::new(state_dir, lab);
    let mut report = CleanupReport { lab: lab.to_string(), ..Default::default() };
    if let Some(pid) = state.emulator_pid() {
        let ours = system::process_name(pid).is_some_and(|c| c == EMULATOR_COMM);
        if ours && pid != std::process::id() as i32 && system::process_alive(pid) {
            system::terminate(&[pid], Duration::from_secs(3));
            report.emulator_killed = Some(pid);
        }
    }
    for ns in system::lab_namespaces(lab) {
        report.processes.extend(system::namespace_pids(&ns));
        system::delete_namespace(&ns)?;
        report.namespaces.push(ns);
    }
    match std::fs::remove_dir_all(&state.dir) {
        Ok(()) => report.state_removed = true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(SystemError::Io { what: format!("remove {}", state.dir.display()), source }),
    }
    Ok(report)
}
