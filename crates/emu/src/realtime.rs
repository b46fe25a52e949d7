//! Real-time scheduling for the packet loop, the CPU wake-up latency bound it holds, and the
//! allocator tunables of the offload path.
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

/// The kernel's CPU wake-up latency bound (PM QoS, `/dev/cpu_dma_latency`), held while this
/// lives: the request lasts as long as the file stays open, so it ends with the process however
/// the process ends.
///
/// Why: an idle CPU enters an idle state, and leaving it delays the next wake-up. On a virtual
/// machine the idle state halts the vCPU, and its host may take milliseconds to run it again:
/// measured on this VM kind (cpuidle `haltpoll`, guest polling off), a real-time thread sleeping
/// 1 ms at a time woke 5-12 ms late at its 99.9th percentile while the machine was otherwise
/// idle, and on time while two CPU hogs kept every vCPU busy (docs/emulator.md, "The host's
/// wake-ups"). A bound of 0 keeps idle CPUs in their polling state (as `cyclictest` does), so
/// the loop's timers fire on time, at the cost of idle CPUs that spin instead of halting.
#[derive(Debug)]
pub struct CpuLatencyHold {
    _device: std::fs::File,
}

/// Asks the kernel to keep CPU wake-up latency at or below `microseconds` until the hold drops.
pub fn hold_cpu_latency(microseconds: u32) -> std::io::Result<CpuLatencyHold> {
    use std::io::Write;
    let value = i32::try_from(microseconds).unwrap_or(i32::MAX);
    let mut device = std::fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency")?;
    device.write_all(&value.to_ne_bytes())?;
    Ok(CpuLatencyHold { _device: device })
}
