//! What the tests of the `protolab-net` binary share: starting it, and waiting for the typed
//! event a server prints when it is ready (`contract::events::Listening`) instead of polling its
//! ports.
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a server may take to start: generous, only a hung or failed start exceeds it.
pub const READY_WITHIN: Duration = Duration::from_secs(30);

pub use contract::events::Listening;

/// A `protolab-net` process of a test, killed when dropped. Its stdout is read line by line
/// and its stderr kept by two threads, so it never blocks on a full pipe.
pub struct Process {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

/// Starts `protolab-net ARGS` (the binary of this package, as cargo built it for the tests).
pub fn start(args: &[&str]) -> Process {
    spawn(Command::new(env!("CARGO_BIN_EXE_protolab-net")).args(args))
}

/// Starts `WRAPPER... protolab-net ARGS`: a program that execs the binary (`prlimit ...`), so
/// the process is still protolab-net's.
pub fn start_under(wrapper: &[&str], args: &[&str]) -> Process {
    let (program, wrapper_args) = wrapper.split_first().expect("a wrapper program");
    spawn(Command::new(program).args(wrapper_args).arg(env!("CARGO_BIN_EXE_protolab-net")).args(args))
}

fn spawn(command: &mut Command) -> Process {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start protolab-net");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Process { child, lines, stderr: Some(stderr) }
}

impl Process {
    /// The process id (a wrapper's that exec'd the binary is the binary's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Reads stdout until the `listening` event (docs/server.md) and returns it. Fails, with
    /// what the process wrote on stderr, when its stdout ends first (it exited) or after
    /// `within`, or when the event does not read as the contract's.
    pub fn await_listening(&mut self, within: Duration) -> Result<Listening, String> {
        let deadline = Instant::now() + within;
        let mut printed = Vec::new();
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) {
                        if event["event"] == "listening" {
                            return serde_json::from_value(event).map_err(|e| format!("the listening event breaks the contract: {e}: {line}"));
                        }
                    }
                    printed.push(line);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("no listening event within {within:?}; stdout: {printed:?}"));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let (status, stderr) = self.finish();
                    return Err(format!("exited ({status}) before its listening event; stderr: {stderr}; stdout: {printed:?}"));
                }
            }
        }
    }

    /// Waits for a process whose stdout has ended: its exit status and everything it wrote on
    /// stderr.
    fn finish(&mut self) -> (String, String) {
        let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        let status = self.child.wait().map(|s: ExitStatus| s.to_string()).unwrap_or_else(|e| e.to_string());
        (status, stderr)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The socket addresses of one of the event's lists (`addr:port` strings).
pub fn addresses(list: &[String]) -> Vec<SocketAddr> {
    list.iter().map(|a| a.parse().unwrap_or_else(|e| panic!("not a socket address: {a}: {e}"))).collect()
}

/// A fresh directory for one test.
pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("protolab-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
