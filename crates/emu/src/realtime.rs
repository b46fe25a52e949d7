//! Real-time scheduling for the packet loop, and the allocator tunables of the offload path.
//!
//! The one place in this crate that calls libc directly: neither rustix nor std exposes
//! `sched_setscheduler` or `mallopt`. The calls only read a local struct or pass integers.
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

/// Keeps memory the allocator frees for reuse instead of returning it to the kernel. With
/// segmentation offloads a read brings up to 64 KB of segments at once and a write frees them
/// together, and glibc's default (trim the heap top beyond 128 KB free) then returns and
/// re-faults those pages on every super-packet: a quarter of the loop's time in page faults
/// (docs/emulator.md, "Segmentation offloads").
pub fn keep_freed_heap() {
    // SAFETY: mallopt only changes allocator tunables; any value is accepted or refused (0).
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
    }
}
