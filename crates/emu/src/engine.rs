//! The real-time packet loop: reads packets from every host's TUN, moves them through the
//! model ([`DataPlane`]) with nanosecond wake-ups (`epoll_pwait2`, timer slack 1 ns), writes
//! them to the destination TUN, and applies the control plane's checked commands between
//! packets. Nothing here parses a request, reads a trace or opens a file.

use std::num::NonZeroU64;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use crossbeam_channel::Receiver;
use netmodel::Nanos;
use rustix::event::{epoll, Timespec};

use crate::clock::Clock;
use crate::control::Envelope;
use crate::dataplane::DataPlane;
use crate::frame::{Frame, GsoShape, PROTO_TCP, PROTO_UDP};
use crate::host_io::{Arrivals, Buffers, HostIo, Read};

const TOKEN_WAKE: u64 = u64::MAX - 1;
const TOKEN_SIGNAL: u64 = u64::MAX - 2;
const READ_BATCH: usize = 64;
/// How overdue a delivery may become while the loop reads a batch before it leaves between
/// two reads (docs/emulator.md, "Deliveries between reads").
const DUE_DURING_READS_NS: Nanos = 50_000;

/// Whether the next delivery (`next_due`, None: none waiting) is overdue enough at `now` to
/// leave before the loop reads on.
fn overdue_during_reads(next_due: Option<Nanos>, now: Nanos) -> bool {
    next_due.is_some_and(|due| due.saturating_add(DUE_DURING_READS_NS) <= now)
}

/// Limits busy-polling to a share of each window. At high packet rates the loop would spin
/// before every packet and never sleep: under SCHED_FIFO the kernel then throttles it (a 50 ms
/// freeze every second) and the endpoints lose the core. Beyond the budget the loop sleeps and
/// handles packets in small batches, which costs microseconds of precision, not throughput.
#[derive(Debug, Default)]
struct SpinBudget {
    window_start: Nanos,
    used: Nanos,
}

const SPIN_WINDOW_NS: Nanos = 100_000_000;
const SPIN_SHARE_PERCENT: Nanos = 30;

impl SpinBudget {
    /// How long the loop may spin before the next due packet.
    fn allowance(&mut self, now: Nanos, spin_ns: Nanos) -> Nanos {
        if now.saturating_sub(self.window_start) >= SPIN_WINDOW_NS {
            self.window_start = now;
            self.used = 0;
        }
        if self.used < SPIN_WINDOW_NS * SPIN_SHARE_PERCENT / 100 {
            spin_ns
        } else {
            0
        }
    }

    fn spent(&mut self, ns: Nanos) {
        self.used += ns;
    }
}

/// Decides when the loop may run under real-time scheduling. A SCHED_FIFO thread that needs
/// the whole core (about 1 Gbit/s of 1500-byte packets here) is throttled by the kernel: a 50 ms
/// freeze every second, far worse than sharing the core. So the loop drops to normal
/// scheduling while it is busy more than 80% of a 100 ms window and returns to real time once
/// it is below 50% again (real time matters when the loop is mostly waiting: then it is what
/// keeps other load from delaying its wake-ups).
#[derive(Debug, Default)]
struct LoopLoad {
    enabled: bool,
    window_start: Nanos,
    idle: Nanos,
    realtime: bool,
}

const LOAD_WINDOW_NS: Nanos = 100_000_000;

impl LoopLoad {
    fn idle(&mut self, ns: Nanos) {
        self.idle += ns;
    }

    /// At the end of a window: Some(wanted real-time state) if it should change.
    fn decide(&mut self, now: Nanos) -> Option<bool> {
        let elapsed = now.saturating_sub(self.window_start);
        if !self.enabled || elapsed < LOAD_WINDOW_NS {
            return None;
        }
        let busy_percent = 100 - (self.idle.min(elapsed) * 100 / elapsed);
        self.window_start = now;
        self.idle = 0;
        let wanted = if busy_percent > 80 { false } else if busy_percent < 50 { true } else { self.realtime };
        (wanted != self.realtime).then(|| {
            self.realtime = wanted;
            wanted
        })
    }
}

/// One read's packets from `host`, into the model at `now`.
struct HostArrivals<'a> {
    plane: &'a mut DataPlane,
    host: usize,
    now: Nanos,
}

impl Arrivals for HostArrivals<'_> {
    fn whole_segments(&self, ip: &[u8], shape: &GsoShape) -> usize {
        self.plane.whole_segments(self.host, ip, shape)
    }

    fn arrive(&mut self, frame: Frame) {
        self.plane.ingest(self.now, self.host, frame);
    }
}

/// The packet loop: the devices and timing around the [`DataPlane`].
pub struct Engine {
    plane: DataPlane,
    tuns: Vec<HostIo>,
    /// The read buffer and the packet buffers' pool, shared by every host.
    buffers: Buffers,
    epoll: OwnedFd,
    wake: Arc<OwnedFd>,
    signal: OwnedFd,
    requests: Receiver<Envelope>,
    clock: Clock,
    spin_ns: Nanos,
    spin_budget: SpinBudget,
    load: LoopLoad,
    rt_priority: i32,
    rt_active: bool,
    /// The priority in force, for the control plane's `info` (0: normal scheduling).
    rt_in_force: Arc<AtomicI32>,
}

impl Engine {
    /// Prepares the loop over the hosts' TUN devices (index = host id).
    pub fn new(
        plane: DataPlane,
        tuns: Vec<HostIo>,
        wake: Arc<OwnedFd>,
        signal: OwnedFd,
        requests: Receiver<Envelope>,
        clock: Clock,
    ) -> std::io::Result<Engine> {
        let mut plane = plane;
        for (host, tun) in tuns.iter().enumerate() {
            plane.set_takes_whole(host, tun.takes_whole(PROTO_TCP), tun.takes_whole(PROTO_UDP));
        }
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for (i, tun) in tuns.iter().enumerate() {
            epoll::add(&epoll, tun.device().as_fd(), epoll::EventData::new_u64(i as u64), epoll::EventFlags::IN)?;
        }
        epoll::add(&epoll, wake.as_fd(), epoll::EventData::new_u64(TOKEN_WAKE), epoll::EventFlags::IN)?;
        epoll::add(&epoll, signal.as_fd(), epoll::EventData::new_u64(TOKEN_SIGNAL), epoll::EventFlags::IN)?;
        Ok(Engine {
            plane,
            tuns,
            buffers: Buffers::new(),
            epoll,
            wake,
            signal,
            requests,
            clock,
            spin_ns: 0,
            spin_budget: SpinBudget::default(),
            load: LoopLoad::default(),
            rt_priority: 0,
            rt_active: false,
            rt_in_force: Arc::new(AtomicI32::new(0)),
        })
    }

    /// The model the loop moves packets through.
    pub fn network(&self) -> &netmodel::Network<Frame> {
        self.plane.network()
    }

    /// The real-time priority in force, as the loop keeps it up to date.
    pub fn rt_in_force(&self) -> Arc<AtomicI32> {
        self.rt_in_force.clone()
    }

    /// Busy-polls for the last `spin_ns` before each due packet (0: never spin).
    pub fn set_spin(&mut self, spin_ns: Nanos) {
        self.spin_ns = spin_ns;
    }

    fn set_realtime(&mut self, realtime: bool) {
        if realtime == self.rt_active {
            return;
        }
        if realtime {
            self.rt_active = crate::realtime::make_current_thread_realtime(self.rt_priority).is_ok();
        } else {
            crate::realtime::make_current_thread_normal();
            self.rt_active = false;
        }
        self.publish_rt();
        self.plane.count_rt_switch();
    }

    fn publish_rt(&self) {
        self.rt_in_force.store(if self.rt_active { self.rt_priority } else { 0 }, Ordering::Relaxed);
    }

    /// Runs the loop under SCHED_FIFO at this priority (0: normal scheduling).
    pub fn set_rt_priority(&mut self, priority: i32) {
        self.rt_priority = priority;
    }

    /// Runs until a signal or a `shutdown` request.
    pub fn run(&mut self) -> std::io::Result<()> {
        if self.rt_priority > 0 {
            match crate::realtime::make_current_thread_realtime(self.rt_priority) {
                Ok(()) => {
                    self.rt_active = true;
                    self.load.enabled = true;
                    self.load.realtime = true;
                    self.publish_rt();
                }
                Err(e) => eprintln!("warning: real-time scheduling refused ({e}); packet timing may suffer under load"),
            }
        }
        // The default 50 us timer slack would blur every wake-up; ask for the precise timer.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        let mut ready = Vec::with_capacity(64);
        while !self.plane.stopping() {
            let due = self.plane.next_wakeup();
            let before = self.clock.now();
            // Sleep until `spin_ns` before the due time, then poll without blocking: a sleeping
            // thread wakes tens of microseconds late on a VM, a polling one within a microsecond.
            let spin = self.spin_budget.allowance(before, self.spin_ns);
            let mut spinning = false;
            let timeout = due.map(|d| {
                let until_due = d.saturating_sub(before);
                let sleep = until_due.saturating_sub(spin);
                spinning = sleep == 0 && until_due > 0;
                Timespec { tv_sec: (sleep / 1_000_000_000) as i64, tv_nsec: (sleep % 1_000_000_000) as i64 }
            });
            if spinning {
                // Let the endpoints sharing this core run first.
                std::thread::yield_now();
            }
            ready.clear();
            match epoll::wait(&self.epoll, rustix::buffer::spare_capacity(&mut ready), timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let woke = self.clock.now();
            if spinning {
                self.spin_budget.spent(woke - before);
            } else {
                self.load.idle(woke - before);
            }
            if let Some(realtime) = self.load.decide(woke) {
                self.set_realtime(realtime);
            }
            if let Some(d) = due.filter(|&d| d <= woke) {
                self.plane.record_timer_lateness(woke - d);
            } else if ready.is_empty() {
                continue;
            }
            for event in &ready {
                match event.data.u64() {
                    TOKEN_WAKE => self.serve_requests(),
                    TOKEN_SIGNAL => {
                        let mut byte = [0u8; 16];
                        let _ = rustix::io::read(self.signal.as_fd(), &mut byte);
                        self.plane.stop();
                    }
                    i => self.read_host(i as usize),
                }
            }
            self.forward_due();
        }
        Ok(())
    }

    fn read_host(&mut self, host: usize) {
        if host >= self.tuns.len() {
            return;
        }
        for _ in 0..READ_BATCH {
            // Every segment of a super-packet arrived at the same moment.
            let mut to = HostArrivals { plane: &mut self.plane, host, now: self.clock.now() };
            match self.tuns[host].read(&mut self.buffers, &mut to) {
                Read::Empty => return,
                Read::Segments(n) => self.plane.count_read(n),
                Read::Whole(n) => {
                    self.plane.count_read(n);
                    self.plane.count_whole_read();
                }
                Read::Pieces { segments, pieces } => {
                    self.plane.count_read(segments);
                    self.plane.count_pieces(pieces);
                }
                Read::Malformed => self.plane.count_malformed(),
            }
            // Deliveries that fall due during a long batch leave between its reads, not after
            // it: at 10 Gbit/s a batch of super-packets takes a millisecond to read.
            if overdue_during_reads(self.plane.next_wakeup(), self.clock.now()) {
                self.forward_due();
            }
        }
    }

    fn forward_due(&mut self) {
        let (tuns, pool) = (&mut self.tuns, &mut self.buffers.pool);
        let now = self.clock.now();
        let pass = self.plane.forward_due(now, |host, frame| tuns.get_mut(host).is_some_and(|t| t.send(frame, pool)));
        if pass.latest_ns > contract::control::LATE_PASS_NS {
            // Which CPU the host held up: the validation matches it with that CPU's stalls.
            let cpu = u32::try_from(rustix::thread::sched_getcpu()).ok();
            self.plane.record_late_pass(now, pass, cpu);
        }
        let failed_packets: u64 = tuns.iter_mut().map(|t| t.flush(pool)).sum();
        self.plane.count_tx_errors(failed_packets);
    }

    fn serve_requests(&mut self) {
        let mut counter = [0u8; 8];
        let _ = rustix::io::read(self.wake.as_fd(), &mut counter);
        while let Ok(Envelope { command, reply }) = self.requests.try_recv() {
            // Bring the model up to date first so that changes apply at the right moment.
            self.forward_due();
            let outcome = self.plane.apply(self.clock.now(), command);
            let _ = reply.send(outcome);
        }
    }

    /// Closes every writer (waiting for them) at the end of a run.
    pub fn finish_writers(&mut self) {
        self.plane.finish_writers();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_leaves_between_reads_once_it_is_overdue_by_the_bound() {
        assert!(!overdue_during_reads(None, 1_000_000));
        // Due, but not yet by the bound: the batch reads on, and the pass after it delivers.
        assert!(!overdue_during_reads(Some(1_000_000), 1_000_000));
        assert!(!overdue_during_reads(Some(1_000_000), 1_000_000 + DUE_DURING_READS_NS - 1));
        assert!(overdue_during_reads(Some(1_000_000), 1_000_000 + DUE_DURING_READS_NS));
        // Not yet due, and a due time at the clock's end does not wrap into the past.
        assert!(!overdue_during_reads(Some(2_000_000), 1_000_000));
        assert!(!overdue_during_reads(Some(Nanos::MAX), Nanos::MAX - 1));
    }
}
