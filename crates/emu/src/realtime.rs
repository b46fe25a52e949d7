//! Real-time scheduling for the packet loop.
//!
//! The one place in this crate that calls libc directly: neither rustix nor std exposes
//! `sched_setscheduler`. The call only reads a local struct.
#![allow(unsafe_code)]

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1..=99), so that other work on the
/// machine (compilers, endpoints) cannot delay packets by preempting the loop. The kernel's RT
/// throttling (`sched_rt_runtime_us`) still leaves the other tasks their share.
pub fn make_current_thread_realtime(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialized sched_param that
    // lives across the call; the function does not retain the pointer.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Puts the calling thread back under normal scheduling (threads inherit the policy of the
/// thread that spawns them; disk writers must not run at real-time priority).
pub fn make_current_thread_normal() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above; failure leaves the thread as it was, which is harmless.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
}
