//! The control socket: a UNIX stream socket speaking JSON lines (docs/control.md). Each
//! connection gets a thread; requests are handed to the packet loop, which replies.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use serde_json::Value;

use crate::engine::{ControlMessage, Reply};

const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Binds the socket and serves it on background threads.
pub fn serve(path: &Path, requests: Sender<ControlMessage>, wake: Arc<OwnedFd>) -> std::io::Result<()> {
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            let (requests, wake) = (requests.clone(), wake.clone());
            let _ = std::thread::Builder::new().name("control-conn".into()).spawn(move || connection(stream, requests, wake));
        }
    })?;
    Ok(())
}

fn connection(stream: UnixStream, requests: Sender<ControlMessage>, wake: Arc<OwnedFd>) {
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
            let _ = writeln!(out, "{}", Reply::error("request longer than 1 MiB").value);
            return;
        }
        let reply = match std::str::from_utf8(&line) {
            Err(_) => Reply::error("a request must be UTF-8 JSON").value,
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => match serde_json::from_str::<Value>(text) {
                Ok(request) if request.is_object() => dispatch(request, &requests, &wake),
                Ok(_) => Reply::error("a request must be a JSON object").value,
                Err(e) => Reply::error(format!("invalid JSON: {e}")).value,
            },
        };
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

fn dispatch(request: Value, requests: &Sender<ControlMessage>, wake: &OwnedFd) -> Value {
    let (tx, rx) = bounded(1);
    if requests.send(ControlMessage { request, reply: tx }).is_err() {
        return Reply::error("the emulator is shutting down").value;
    }
    let _ = rustix::io::write(wake.as_fd(), &1u64.to_ne_bytes());
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Reply { mut value, pending }) => {
            if let Some((field, pending)) = pending {
                let summary = pending.wait();
                if let Some(obj) = value.as_object_mut() {
                    obj.insert(field, serde_json::to_value(summary).unwrap_or(Value::Null));
                }
            }
            value
        }
        Err(_) => Reply::error("the emulator did not answer").value,
    }
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
