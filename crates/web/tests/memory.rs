//! The server's memory across repeated rounds of abuse (rapid-reset floods, slowloris clients,
//! stalled readers, normal requests). Alone in its test binary: VmRSS is the process's, so no
//! other test may run beside it.

use std::sync::Arc;
use std::time::Duration;

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
        // Let the server finish closing (graceful close has a 1 s grace).
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let kib = vm_rss_kib();
        eprintln!("round {round}: VmRSS {kib} KiB");
        rss.push(kib);
    }
    let growth = rss[4] as i64 - rss[1] as i64;
    assert!(growth < 20 * 1024, "VmRSS grew by {growth} KiB between round 2 and round 5: {rss:?}");
    assert_serving(&lab).await;
    Arc::try_unwrap(lab).ok().unwrap().stop().await;
}
