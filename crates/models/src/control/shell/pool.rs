//! The shared processors of the simulated shell (issue 23's cost model, `cpus`): one
//! machine's cores serving every server of the control plane (the manager, its links,
//! the switch servers) and the call generator that drives them, as atmlab's live lab
//! runs them all in one process on one runtime. Paper 000's testbed gave each server a
//! workstation of its own (`cpus` = 0): then none of this applies.

use super::*;

impl Plane<'_> {
    /// Every processor of a shared pool is working: a message that arrives now is read
    /// by a worker already awake, as one runtime's workers serve every server (tokio's
    /// in the live lab), so it costs no wakeup even if its own server was idle.
    pub(super) fn pool_awake(&self) -> bool {
        self.cpu_free == Some(0)
    }

    /// A processor of the shared pool for the server about to work (always, when each
    /// server has its own).
    pub(super) fn take_cpu(&mut self) -> bool {
        match &mut self.cpu_free {
            None => true,
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    /// A server's processor is free: the pool has been quiet since (`idle_wake`).
    pub(super) fn release_cpu(&mut self) {
        if let Some(n) = &mut self.cpu_free {
            *n += 1;
            self.quiet_since = self.now;
        }
    }

    /// What a wakeup adds now for the time the pool has been quiet (`idle_wake`): no
    /// processor working for a server since one was last released. The call generator's
    /// work does not count: the lone setups `idle_wake` is measured from are timed
    /// from when the generator has woken, as the twin check's calls are. Zero when a
    /// processor works for a server (it is warm: the servers woken after the first in
    /// an exchange find it so), or the profile has no points.
    pub(super) fn idle_wake(&self) -> Duration {
        let costs = &self.cfg.costs;
        match self.cpu_free {
            Some(free)
                if !costs.idle_wake.is_empty() && free + self.generating >= costs.cpus as usize =>
            {
                costs.idle_wake_at(self.now - self.quiet_since)
            }
            _ => Duration::ZERO,
        }
    }

    /// With a shared pool, a processor just freed may start any server's waiting work:
    /// the call generator first, then the manager, then the links and the switches in
    /// order (deterministic). Inlined, as a test: with no shared pool (the papers'
    /// testbeds) there is nothing to do.
    #[inline]
    pub(super) fn serve_others(&mut self) {
        if self.cpu_free.is_none_or(|n| n == 0) {
            return;
        }
        self.serve_all();
    }

    pub(super) fn serve_all(&mut self) {
        self.serve_generator();
        for m in 0..self.mgrs.len() {
            self.serve_manager(m);
            for s in 0..self.mgrs[m].links.len() {
                self.serve_link(m, s);
            }
        }
        for s in 0..self.switches.len() {
            self.serve_switch(s);
        }
    }

    /// A call arrived: its work at the call generator (`client_work`: drawing it, waking
    /// to it, starting its task, taking its answers, its hang-up and release) waits for
    /// a processor of the pool. It is charged to the processors only, beside the call:
    /// the request reaches its manager as it would with a generator of its own, so that
    /// what the generator adds is the processors it takes from the servers. Nothing when
    /// the generator is free or has processors of its own (no shared pool).
    #[inline]
    pub(super) fn generate(&mut self) {
        if self.cfg.costs.client_work == Duration::ZERO || self.cpu_free.is_none() {
            return;
        }
        self.generator += 1;
        self.serve_generator();
    }

    /// The generator's waiting work starts on every free processor, one call's each.
    fn serve_generator(&mut self) {
        while self.generator > 0 && self.take_cpu() {
            self.generator -= 1;
            self.generating += 1;
            let at = self.now + self.cfg.costs.client_work;
            self.events.schedule(at, Ev::GeneratorDone);
        }
    }

    /// A call's work at the generator is done: its processor serves what waits.
    /// (Its processor's release does not end the pool's quiet: the generator's work
    /// does not count, see [`Plane::idle_wake`].)
    pub(super) fn generator_done(&mut self) {
        self.generating -= 1;
        if let Some(n) = &mut self.cpu_free {
            *n += 1;
        }
        self.serve_others();
    }
}
