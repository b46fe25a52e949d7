//! The control socket: a UNIX stream socket speaking JSON lines (docs/control.md). Each
//! connection gets a thread, which answers its requests through the shared [`ControlPlane`]
//! (one request at a time); the plane reaches the packet loop through a [`LoopChannel`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use contract::control::Reply;
use crossbeam_channel::{bounded, Sender};
use serde_json::Value;

use crate::control_plane::{Answer, ControlPlane, PacketLoop};
use crate::dataplane::{Command, Outcome};

const MAX_REQUEST_BYTES: usize = 1 << 20;
/// How long a control request waits for the packet loop.
const LOOP_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A command on its way to the packet loop, with where its outcome goes.
pub struct Envelope {
    /// The checked command.
    pub command: Command,
    /// Where the loop sends the outcome.
    pub reply: Sender<Outcome>,
}

/// The way from the control threads to the packet loop: a channel, and an eventfd that wakes
/// the loop.
pub struct LoopChannel {
    requests: Sender<Envelope>,
    wake: Arc<OwnedFd>,
}

impl LoopChannel {
    /// A channel into the loop that polls `wake` and receives from `requests`' other end.
    pub fn new(requests: Sender<Envelope>, wake: Arc<OwnedFd>) -> Self {
        LoopChannel { requests, wake }
    }
}

impl PacketLoop for LoopChannel {
    fn call(&mut self, command: Command) -> Result<Outcome, String> {
        let (reply, outcome) = bounded(1);
        self.requests.send(Envelope { command, reply }).map_err(|_| "the emulator is shutting down".to_string())?;
        let _ = rustix::io::write(self.wake.as_fd(), &1u64.to_ne_bytes());
        outcome.recv_timeout(LOOP_ANSWER_TIMEOUT).map_err(|_| "the emulator did not answer".to_string())
    }
}

/// The control plane as the connection threads share it.
pub type SharedControlPlane = Arc<Mutex<ControlPlane<LoopChannel>>>;

/// Binds the socket and serves it on background threads.
pub fn serve(path: &Path, plane: SharedControlPlane) -> std::io::Result<()> {
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            let plane = plane.clone();
            let _ = std::thread::Builder::new().name("control-conn".into()).spawn(move || connection(stream, &plane));
        }
    })?;
    Ok(())
}

fn connection(stream: UnixStream, plane: &SharedControlPlane) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_REQUEST_BYTES as u64).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() >= MAX_REQUEST_BYTES && line.last() != Some(&b'\n') {
            let _ = writeln!(out, "{}", text_of(&Reply::refused("request longer than 1 MiB")));
            return;
        }
        let answer = match std::str::from_utf8(&line) {
            Err(_) => Answer::Now(Reply::refused("a request must be UTF-8 JSON")),
            Ok(text) if text.trim().is_empty() => continue,
            // A handler cannot leave the plane half changed (it checks before it changes), so
            // a poisoned lock still holds a consistent plane.
            Ok(text) => plane.lock().unwrap_or_else(PoisonError::into_inner).handle_line(text),
        };
        // Outside the lock: a writer finishing its file holds up no other connection.
        let reply = answer.finish();
        if writeln!(out, "{}", text_of(&reply)).and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

fn text_of(reply: &Reply) -> String {
    serde_json::to_string(reply)
        .unwrap_or_else(|e| serde_json::json!({"ok": false, "error": format!("reply not serializable: {e}")}).to_string())
}

/// Sends one request to a lab's control socket and returns the reply.
pub fn request(socket: &Path, request: &Value) -> std::io::Result<Value> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    writeln!(stream, "{request}")?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
