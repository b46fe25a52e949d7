//! The real-time emulator: builds a lab of network namespaces joined by TUN devices, moves
//! their packets through the I/O-free [`netmodel`] in real time, and is steered over a control
//! socket. See docs/emulator.md, docs/topology.md and docs/control.md.
#![deny(unsafe_code)]

pub mod clock;
pub mod control;
pub mod control_plane;
pub mod dataplane;
pub mod engine;
pub mod frame;
pub mod host_io;
pub mod lateness;
pub mod params;
pub(crate) mod realtime;
pub mod state;
pub mod system;
#[cfg(test)]
mod testkit;
pub mod topology;
pub mod vnet;
pub mod writer;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use netmodel::Network;
use rustix::event::{eventfd, EventfdFlags};

use crate::control::LoopChannel;
use crate::control_plane::ControlPlane;
use crate::dataplane::DataPlane;
use crate::clock::Clock;
use crate::engine::Engine;
use crate::frame::Frame;
use crate::host_io::HostIo;
use crate::state::LabState;
use crate::system::{HostSetup, SystemError};
use crate::topology::{Topology, TopologyError};

/// Why the emulator could not run.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The topology was refused.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A lab of that name exists.
    #[error("lab {lab:?} already exists: {reason}; run `protolab-net emu cleanup --lab {lab}` if it is left over")]
    LabExists {
        /// Lab.
        lab: String,
        /// What exists.
        reason: String,
    },
    /// The host system refused something.
    #[error(transparent)]
    System(#[from] SystemError),
    /// Interrupted by a signal during set-up.
    #[error("interrupted during set-up")]
    Interrupted,
    /// Not root.
    #[error("the emulator needs root (network namespaces and TUN devices)")]
    NotRoot,
    /// `--owner-pid` names no running process.
    #[error("--owner-pid {0}: no such running process")]
    NoOwner(i32),
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> SystemError + '_ {
    move |source| SystemError::Io { what: what.to_string(), source }
}

/// Validates a topology file and builds its model, creating nothing.
pub fn check(path: &Path) -> Result<(Topology, Network<Frame>), EmuError> {
    let topology = Topology::load(path)?;
    let err = |field: String, message: String| TopologyError { file: path.display().to_string(), field, message };
    let spec = topology.to_spec().map_err(|(f, m)| err(f, m))?;
    let network = Network::new(spec).map_err(|e| err("(topology)".into(), e.to_string()))?;
    Ok((topology, network))
}

/// Removes the lab when dropped unless disarmed: every error path after the first namespace
/// leaves nothing behind.
struct LabGuard<'a> {
    state_dir: &'a Path,
    lab: String,
}

impl Drop for LabGuard<'_> {
    fn drop(&mut self) {
        if let Err(e) = state::cleanup_lab(self.state_dir, &self.lab) {
            eprintln!("warning: cleanup of lab {}: {e}", self.lab);
        }
    }
}

/// Signals (SIGINT, SIGTERM, SIGHUP) arrive as bytes on a socket the loop polls.
fn signal_socket() -> Result<OwnedFd, SystemError> {
    let (read, write) = UnixStream::pair().map_err(io("signal socket"))?;
    read.set_nonblocking(true).map_err(io("signal socket"))?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let w = write.try_clone().map_err(io("signal socket"))?;
        signal_hook::low_level::pipe::register(signal, w).map_err(io("register signal"))?;
    }
    Ok(read.into())
}

fn interrupted(signal: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    matches!(rustix::io::read(signal, &mut byte), Ok(n) if n > 0)
}

/// The default of `emu run --whole-spread-us`: none, every segment leaves a rated link at its
/// own time. A spread is opt-in: it changes what the receiving host sees (docs/emulator.md,
/// "Rated links"), and TCP's behaviour with it.
pub const DEFAULT_WHOLE_SPREAD_US: u64 = 0;

/// Options of `emu run`.
pub struct RunOptions {
    /// Topology file.
    pub topology: PathBuf,
    /// State directory.
    pub state_dir: PathBuf,
    /// Start a watchdog process that cleans up if this process dies without doing so.
    pub watchdog: bool,
    /// Busy-poll this long before each due packet for precise timing (0 disables).
    pub spin_us: u64,
    /// SCHED_FIFO priority of the packet loop (0: normal scheduling).
    pub rt_priority: i32,
    /// Hold the CPUs' wake-up latency at or below this many microseconds while the lab runs
    /// (`/dev/cpu_dma_latency`, docs/emulator.md); None: leave it to the machine.
    pub cpu_latency_us: Option<u32>,
    /// Segmentation offloads on the TUN devices (docs/emulator.md, "Segmentation offloads"):
    /// every host's unless its topology entry says otherwise (`offload`).
    pub offload: bool,
    /// How far apart, µs, the wire segments of a super-packet may leave a rated link that
    /// carries it whole (`Network::set_whole_spread`; 0: rated links split super-packets).
    pub whole_spread_us: u64,
    /// Stop as on SIGTERM when this process ends (the runner that started the lab), so that a
    /// SIGKILLed runner leaves no lab behind.
    pub owner_pid: Option<i32>,
}

/// How often the owner's life is checked.
const OWNER_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Sends this process SIGTERM once process `pid` (as it is now, by its start time) has ended.
fn watch_owner(pid: i32) -> Result<(), EmuError> {
    let started = system::process_start_time(pid).ok_or(EmuError::NoOwner(pid))?;
    std::thread::Builder::new()
        .name("owner-watch".into())
        .spawn(move || {
            while system::process_start_time(pid) == Some(started) {
                std::thread::sleep(OWNER_POLL);
            }
            let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TERM);
        })
        .map_err(io("start the owner watch"))?;
    Ok(())
}

/// Lets the lab's hosts use the congestion controls the topology names (a namespace may only
/// pick one the initial namespace allows), saying which it had to add.
fn allow_congestion_controls(topology: &Topology) -> Result<(), EmuError> {
    let mut wanted: Vec<String> = topology.hosts.iter().filter_map(|h| h.tcp_congestion.clone()).collect();
    wanted.push(topology.tcp_congestion.clone());
    let widened = system::allow_congestion_controls(&wanted)?;
    if !widened.is_empty() {
        eprintln!("note: added {} to net.ipv4.tcp_allowed_congestion_control so lab hosts may use them", widened.join(" "));
    }
    Ok(())
}

/// Builds the lab, prints the ready line, forwards packets until stopped, then removes the lab.
pub fn run(options: &RunOptions) -> Result<(), EmuError> {
    let (mut topology, mut network) = check(&options.topology)?;
    network.set_whole_spread(options.whole_spread_us.saturating_mul(1000));
    // Every host's offloads as in force, so the state's topology.json and `info` say what each
    // device got.
    for host in &mut topology.hosts {
        host.offload = Some(host.offload_or(options.offload));
    }
    if !rustix::process::geteuid().is_root() {
        return Err(EmuError::NotRoot);
    }
    let lab = topology.lab.clone();
    if let Some(reason) = state::existing_lab_reason(&options.state_dir, &lab) {
        return Err(EmuError::LabExists { lab, reason });
    }
    let signal = signal_socket()?;
    if let Some(pid) = options.owner_pid {
        watch_owner(pid)?;
    }
    let state = LabState::new(&options.state_dir, &lab);
    std::fs::create_dir_all(&state.dir).map_err(io("create the state directory"))?;
    let _guard = LabGuard { state_dir: &options.state_dir, lab: lab.clone() };
    std::fs::write(state.pid_file(), format!("{}\n", std::process::id())).map_err(io("write emu.pid"))?;
    let normalized = serde_json::to_string_pretty(&topology).unwrap_or_default();
    std::fs::write(state.topology(), normalized).map_err(io("write topology.json"))?;
    // Declared after the guard, so it is dropped (stopped and reaped) before the guard cleans up.
    let _watchdog = if options.watchdog { Some(Watchdog(spawn_watchdog(&options.state_dir, &lab)?)) } else { None };

    allow_congestion_controls(&topology)?;

    let mut tuns = Vec::new();
    let mut namespaces = std::collections::BTreeMap::new();
    for host in &topology.hosts {
        let ns = topology.namespace(&host.name);
        system::create_namespace(&ns)?;
        let cc = host.tcp_congestion.clone().unwrap_or_else(|| topology.tcp_congestion.clone());
        let mut sysctls = vec![
            ("net.ipv6.conf.all.disable_ipv6".to_string(), "1".to_string()),
            ("net.ipv6.conf.default.disable_ipv6".to_string(), "1".to_string()),
            ("net.ipv4.tcp_congestion_control".to_string(), cc),
            ("net.mptcp.enabled".to_string(), "1".to_string()),
            ("net.ipv4.ping_group_range".to_string(), "0 2147483647".to_string()),
        ];
        sysctls.extend(host.sysctls.iter().map(|(k, v)| (k.clone(), v.to_string())));
        let offload = host.offload_or(options.offload);
        let setup = HostSetup { namespace: &ns, addresses: &host.addresses, sysctls, offload };
        tuns.push(HostIo::new(system::setup_host(&setup)?, offload));
        namespaces.insert(host.name.clone(), ns);
        if interrupted(&signal) {
            return Err(EmuError::Interrupted);
        }
    }

    if tuns.iter().any(HostIo::offload) {
        crate::realtime::keep_freed_heap();
    }
    let wake = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| io("eventfd")(e.into()))?);
    let (tx, rx) = crossbeam_channel::unbounded();
    let clock = Clock::start();
    let spin_ns = options.spin_us * 1000;
    let plane = DataPlane::new(network, clock.start_unix_ns);
    let mut engine = Engine::new(plane, tuns, wake.clone(), signal, rx, clock).map_err(io("epoll"))?;
    engine.set_spin(spin_ns);
    engine.set_rt_priority(options.rt_priority);
    // The control plane keeps the lab's authoritative link parameters and routing; it starts
    // from the model the loop now owns.
    // Held until `run` returns; the kernel drops the request with the process in any case.
    let latency_hold = options.cpu_latency_us.and_then(|us| match realtime::hold_cpu_latency(us) {
        Ok(hold) => Some((us, hold)),
        Err(e) => {
            eprintln!("warning: could not hold the CPU wake-up latency at {us} us ({e}); packet timing may suffer on an idle machine");
            None
        }
    });
    let mut control = ControlPlane::new(topology, engine.network(), clock, spin_ns, engine.rt_in_force(), LoopChannel::new(tx, wake));
    control.set_cpu_latency_us(latency_hold.as_ref().map(|(us, _)| *us));
    control::serve(&state.control(), Arc::new(Mutex::new(control))).map_err(io("bind the control socket"))?;
    let ready = contract::events::Ready {
        ready: true,
        lab: lab.clone(),
        pid: std::process::id(),
        control: state.control().display().to_string(),
        namespaces,
        start_unix_ns: clock.start_unix_ns,
    };
    let mut stdout = std::io::stdout().lock();
    // Strings and integers only: serializing cannot fail.
    let line = serde_json::to_string(&ready).unwrap_or_default();
    let _ = writeln!(stdout, "{line}").and_then(|_| stdout.flush());
    drop(stdout);
    let result = engine.run();
    engine.finish_writers();
    drop(engine);
    result.map_err(io("packet loop"))?;
    Ok(())
}

/// The watchdog child; dropping it closes its stdin (it then sees this process alive and exits)
/// and reaps it, so no zombie is left.
struct Watchdog(std::process::Child);

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// A child process that waits for this process to end (its stdin closes) and then removes the
/// lab if this process could not (SIGKILL).
fn spawn_watchdog(state_dir: &Path, lab: &str) -> Result<std::process::Child, SystemError> {
    let exe = std::env::current_exe().map_err(io("find own executable"))?;
    std::process::Command::new(exe)
        .args(["emu", "watchdog", "--lab", lab, "--state-dir"])
        .arg(state_dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(io("start the watchdog"))
}

/// The watchdog's body: block until stdin closes, then clean up what the emulator left.
pub fn watchdog(state_dir: &Path, lab: &str) -> Result<Option<state::CleanupReport>, SystemError> {
    // A new session: a terminal's Ctrl-C must reach the emulator, not its watchdog.
    let _ = rustix::process::setsid();
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    let state = LabState::new(state_dir, lab);
    let emulator_alive = state.emulator_pid().is_some_and(|p| system::process_alive(p) && p != std::process::id() as i32);
    if emulator_alive || !(state.dir.exists() || !system::lab_namespaces(lab).is_empty()) {
        return Ok(None);
    }
    state::cleanup_lab(state_dir, lab).map(Some)
}
