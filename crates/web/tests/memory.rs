//! The server's memory across repeated rounds of abuse (rapid-reset floods, slowloris clients,
//! stalled readers, normal requests). Alone in its test binary: the live heap and VmRSS are the
//! process's, so no other test may run beside it.
//!
//! The bound is on the live heap bytes (a counting allocator: exact, whatever the load on the
//! machine); VmRSS is printed only, because the allocator keeps freed memory in per-thread
//! arenas, which grow with concurrency on a busy machine without any leak.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The system allocator, counting the bytes live at any moment.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

mod common;
use common::abuse::*;
use common::Lab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_across_abuse_rounds() {
    let lab = Arc::new(Lab::start(short_limits()).await);
    let mut rss = Vec::new();
    // PL_HARDENING_ROUNDS=N runs more rounds (to watch the trend); the bound compares 2 and 5.
    let rounds = std::env::var("PL_HARDENING_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5usize).max(5);
    for round in 1..=rounds {
        abuse_round(&lab).await;
        // Measure the steady state, not the clean-up: wait until the server has closed every
        // connection of the round (graceful close has a 1 s grace; a busy machine takes longer).
        // The clients' tasks have ended already (abuse_round joins them, probes wait for their
        // connections' end).
        common::wait_until(&format!("round {round}: every connection closed"), Duration::from_secs(30), || lab.open.count() == 0).await;
        let live = LIVE_BYTES.load(Ordering::Relaxed) / 1024;
        eprintln!("round {round}: live heap {live} KiB, VmRSS {} KiB", vm_rss_kib());
        rss.push(live);
    }
    let growth = rss[4] - rss[1];
    assert!(growth < 4 * 1024, "the live heap grew by {growth} KiB between round 2 and round 5: {rss:?}");
    assert_serving(&lab).await;
    Arc::try_unwrap(lab).ok().unwrap().stop().await;
}
