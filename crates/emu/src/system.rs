//! The host system: network namespaces, TUN devices, addresses, routes, sysctls, processes.
//!
//! Everything here is named by the lab (`pl-<lab>-<host>`), and only those names and the
//! processes inside those namespaces are ever removed.

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
use tun_rs::{DeviceBuilder, SyncDevice};

/// Where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/var/run/netns";
/// The TUN interface inside every host.
pub const TUN_NAME: &str = "pl0";

/// A failure of the host system, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// A command failed.
    #[error("`{command}` failed: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its stderr or the spawn error.
        message: String,
    },
    /// An OS call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SystemError {
    let what = what.into();
    move |source| SystemError::Io { what, source }
}

/// Runs `ip ARGS`, returning stdout.
pub fn ip(args: &[&str]) -> Result<String, SystemError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| SystemError::Command { command: command.clone(), message: format!("cannot run ip (is iproute2 installed?): {e}") })?;
    if !out.status.success() {
        return Err(SystemError::Command { command, message: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Names of all network namespaces (from `/var/run/netns`).
pub fn namespaces() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|dir| dir.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Namespaces belonging to lab `lab` (`pl-<lab>-*`; lab names contain no `-`).
pub fn lab_namespaces(lab: &str) -> Vec<String> {
    let prefix = format!("pl-{lab}-");
    namespaces().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

/// Creates a namespace.
pub fn create_namespace(name: &str) -> Result<(), SystemError> {
    ip(&["netns", "add", name]).map(|_| ())
}

/// Process ids inside a namespace (never our own).
pub fn namespace_pids(name: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    ip(&["netns", "pids", name])
        .map(|out| out.split_whitespace().filter_map(|p| p.parse().ok()).filter(|&p| p != me).collect())
        .unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    // A zombie still has a /proc entry; treat it as gone once its state is Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILL, to exactly these pids.
pub fn terminate(pids: &[i32], grace: Duration) {
    use rustix::process::{kill_process, Pid, Signal};
    let pids: Vec<Pid> = pids.iter().filter_map(|&p| Pid::from_raw(p)).collect();
    for &p in &pids {
        let _ = kill_process(p, Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|p| alive(p.as_raw_nonzero().get())) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if alive(p.as_raw_nonzero().get()) {
            let _ = kill_process(p, Signal::KILL);
        }
    }
}

/// Kills every process inside the namespace, then deletes it.
pub fn delete_namespace(name: &str) -> Result<(), SystemError> {
    let pids = namespace_pids(name);
    if !pids.is_empty() {
        terminate(&pids, Duration::from_millis(1500));
    }
    match ip(&["netns", "delete", name]) {
        // Gone already (another cleanup, e.g. the watchdog, got there first): that is the goal.
        Err(_) if !Path::new(NETNS_DIR).join(name).exists() => Ok(()),
        other => other.map(|_| ()),
    }
}

/// What to set up inside a host namespace.
pub struct HostSetup<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Addresses, primary first.
    pub addresses: &'a [Ipv4Addr],
    /// Sysctls (dotted name, value), applied in order.
    pub sysctls: Vec<(String, String)>,
    /// Segmentation offloads on the TUN device (IFF_VNET_HDR, TSO/USO/checksum).
    pub offload: bool,
}

/// Creates the TUN device inside the namespace (on a dedicated thread that enters it, since
/// `setns` changes the calling thread), applies the sysctls from there, then configures
/// addresses and routes with `ip -n`.
pub fn setup_host(setup: &HostSetup<'_>) -> Result<SyncDevice, SystemError> {
    let ns_path = PathBuf::from(NETNS_DIR).join(setup.namespace);
    let sysctls = setup.sysctls.clone();
    let offload = setup.offload;
    let device = std::thread::scope(|scope| {
        scope
            .spawn(move || -> Result<SyncDevice, SystemError> {
                let ns = File::open(&ns_path).map_err(io_err(format!("open {}", ns_path.display())))?;
                move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))
                    .map_err(|e| SystemError::Io { what: format!("setns into {}", ns_path.display()), source: e.into() })?;
                // /proc/sys/net resolves against the opening thread's namespace: this thread's.
                for (key, value) in &sysctls {
                    let file = format!("/proc/sys/{}", key.replace('.', "/"));
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&file)
                        .and_then(|mut f| f.write_all(value.as_bytes()))
                        .map_err(io_err(format!("sysctl {key}={value}")))?;
                }
                // After the sysctls, so that IPv6 is already off when the device comes up.
                let device = DeviceBuilder::new()
                    .name(TUN_NAME)
                    .mtu(1500)
                    // CSUM and TSO4/TSO6 or an error; USO4/USO6 too where the kernel has them
                    // (6.2 and later), else UDP stays unsegmented (tun-rs falls back).
                    .offload(offload)
                    .build_sync()
                    .map_err(io_err(format!("create TUN {TUN_NAME} in {}", ns_path.display())))?;
                Ok(device)
            })
            .join()
            .unwrap_or_else(|_| Err(SystemError::Io { what: "namespace thread".into(), source: std::io::Error::other("panicked") }))
    })?;
    let ns = setup.namespace;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    ip(&["-n", ns, "link", "set", TUN_NAME, "mtu", "1500", "txqueuelen", "10000", "up"])?;
    for a in setup.addresses {
        ip(&["-n", ns, "addr", "add", &format!("{a}/32"), "dev", TUN_NAME])?;
    }
    let primary = setup.addresses.first().map(Ipv4Addr::to_string).unwrap_or_default();
    ip(&["-n", ns, "route", "add", "default", "dev", TUN_NAME, "src", &primary])?;
    device.set_nonblocking(true).map_err(io_err("set TUN non-blocking"))?;
    Ok(device)
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Makes sure every congestion control in `wanted` may be chosen inside a namespace: the kernel
/// only lets a non-initial namespace default to controls listed in the initial namespace's
/// `tcp_allowed_congestion_control`. Adds the missing ones (a machine-wide setting, widened and
/// never narrowed); returns the ones it added.
pub fn allow_congestion_controls(wanted: &[String]) -> Result<Vec<String>, SystemError> {
    let current = std::fs::read_to_string(ALLOWED_CC).map_err(io_err(format!("read {ALLOWED_CC}")))?;
    let mut allowed: Vec<String> = current.split_whitespace().map(str::to_string).collect();
    let missing: Vec<String> = wanted.iter().filter(|w| !allowed.contains(w)).cloned().collect();
    if missing.is_empty() {
        return Ok(missing);
    }
    allowed.extend(missing.iter().cloned());
    allowed.dedup();
    std::fs::write(ALLOWED_CC, allowed.join(" ")).map_err(io_err(format!("allow {} in {ALLOWED_CC}", missing.join(" "))))?;
    Ok(missing)
}

/// The command name of a process, if it exists.
pub fn process_name(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim().to_string())
}

/// Whether a process exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    alive(pid)
}

/// When a live (not zombie) process started, in clock ticks after boot (`/proc/PID/stat` field
/// 22): with the pid it names one process, even after the pid is reused.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    // Fields after the state: ppid (4th) .. starttime (22nd), so 18 more to skip.
    fields.nth(18)?.parse().ok()
}
