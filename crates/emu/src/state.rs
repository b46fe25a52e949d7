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
    /// CPU-limit cgroups removed (`pl-<lab>-cpu`).
    pub cgroups: Vec<String>,
    /// Temporary directories removed (Chromium profiles `pl-<lab>-chromium-*`).
    pub temp_dirs: Vec<String>,
}

/// Removes lab `lab`'s temporary directories in `dir`: the Chromium profiles the runner makes
/// for each browser load (`pl-<lab>-chromium-*`, src/protolab/run/executors.py), left when the
/// runner was killed during a load.
pub fn remove_temp_dirs(dir: &Path, lab: &str) -> Vec<String> {
    let prefix = format!("pl-{lab}-chromium-");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_ours = name.to_str().is_some_and(|n| n.starts_with(&prefix));
        // Only directories (never a symlink followed out of `dir`).
        if is_ours && entry.file_type().is_ok_and(|t| t.is_dir()) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(entry.path().display().to_string());
        }
    }
    removed.sort();
    removed
}

/// Where the runner makes a lab's CPU-limit cgroup `pl-<lab>-cpu` (src/protolab/lab/cgroup.py):
/// cgroup v2, v2 beside v1 on a hybrid system, v1's cpu controller.
pub const CGROUP_PARENTS: [&str; 3] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu"];

/// Removes lab `lab`'s CPU-limit cgroup under each of `parents`. Its members ran in the lab's
/// namespaces and are gone by now, but the kernel may take a moment to empty the cgroup, so
/// removal is retried for about two seconds.
pub fn remove_cgroups(parents: &[&Path], lab: &str) -> Result<Vec<String>, SystemError> {
    let mut removed = Vec::new();
    for parent in parents {
        let path = parent.join(format!("pl-{lab}-cpu"));
        if !path.is_dir() {
            continue;
        }
        let mut tries = 0;
        loop {
            match std::fs::remove_dir(&path) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(_) if tries < 40 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(source) => return Err(SystemError::Io { what: format!("remove cgroup {}", path.display()), source }),
            }
        }
        removed.push(path.display().to_string());
    }
    Ok(removed)
}

/// Removes everything of lab `lab`: its emulator (only if it is a `protolab-net` other than us),
/// the processes inside its namespaces, the namespaces, its CPU-limit cgroup, the state directory.
/// Idempotent.
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
    let parents: Vec<&Path> = CGROUP_PARENTS.iter().map(Path::new).collect();
    report.cgroups = remove_cgroups(&parents, lab)?;
    report.temp_dirs = remove_temp_dirs(&std::env::temp_dir(), lab);
    match std::fs::remove_dir_all(&state.dir) {
        Ok(()) => report.state_removed = true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(SystemError::Io { what: format!("remove {}", state.dir.display()), source }),
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_cgroup_of_the_lab_is_removed_and_no_other() {
        let root = std::env::temp_dir().join(format!("pl-cgroup-test-{}", std::process::id()));
        let (v2, v1) = (root.join("v2"), root.join("cpu"));
        for dir in [v2.join("pl-lab1-cpu"), v1.join("pl-lab1-cpu"), v2.join("pl-lab2-cpu")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let removed = remove_cgroups(&[&v2, &root.join("absent"), &v1], "lab1").unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!v2.join("pl-lab1-cpu").exists() && !v1.join("pl-lab1-cpu").exists());
        assert!(v2.join("pl-lab2-cpu").is_dir(), "another lab's cgroup stays");
        assert!(remove_cgroups(&[&v2, &v1], "lab1").unwrap().is_empty(), "idempotent");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_lab_s_chromium_profiles_are_removed_and_no_other() {
        let root = std::env::temp_dir().join(format!("pl-tempdir-test-{}", std::process::id()));
        for dir in ["pl-lab1-chromium-abc/Default", "pl-lab1-chromium-def", "pl-lab2-chromium-x", "other"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("pl-lab1-chromium-file"), b"not a directory").unwrap();
        let removed = remove_temp_dirs(&root, "lab1");
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(root.join("pl-lab2-chromium-x").is_dir() && root.join("other").is_dir());
        assert!(root.join("pl-lab1-chromium-file").is_file());
        assert!(remove_temp_dirs(&root, "lab1").is_empty(), "idempotent");
        std::fs::remove_dir_all(root).unwrap();
    }
}
