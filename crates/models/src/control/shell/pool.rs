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
        self.pool_tick();
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
        self.pool_tick();
        if let Some(n) = &mut self.cpu_free {
            *n += 1;
            self.quiet_since = self.now;
        }
    }

    /// Adds the pool's processor time worked since the last change of its free
    /// processors: called before each change (`processor_utilisation`).
    #[inline]
    fn pool_tick(&mut self) {
        if self.cpu_free.is_some() {
            self.pool_busy = self.pool_worked();
            self.pool_since = self.now;
        }
    }

    /// The pool's processor time worked up to now.
    pub(super) fn pool_worked(&self) -> Duration {
        match self.cpu_free {
            Some(free) => {
                let busy = self.cfg.costs.cpus as usize - free;
                self.pool_busy + times(self.now - self.pool_since, busy as u64)
            }
            None => Duration::ZERO,
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
        self.hear_answers();
    }

    /// The callers in the manager's process (`colocated`, a shared pool) take their
    /// answers up once a processor is left free by the servers' work: a caller's task is
    /// woken by its answer and runs on one of the runtime's workers, after the work that
    /// holds them (the manager goes on with its queue before it lets its worker go, as
    /// the live manager's task drains its channels in one turn). The taking is the call
    /// generator's work, charged apart (`client_work`); here it is the wait alone.
    fn hear_answers(&mut self) {
        if self.answers.is_empty() || self.cpu_free == Some(0) {
            return;
        }
        let heard = self.now;
        let mut answers = std::mem::take(&mut self.answers);
        for (m, u, call) in answers.drain(..) {
            self.heard(m, u, call, heard);
        }
        self.answers = answers;
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
        self.pool_tick();
        if let Some(n) = &mut self.cpu_free {
            *n += 1;
        }
        self.serve_others();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::tests::config;

    /// A caller takes its answer up only on a free processor of the pool: on one
    /// processor, loaded to about 60% by 100 us messages, the answers wait exactly while
    /// the processor works, and are heard the instant it frees.
    #[test]
    fn an_answer_waits_for_a_free_processor() {
        let c = config(
            r#"
manager = { kind = "xbind", threshold = 1, flush = "10 ms", cache_fill = 64, cache_low = 1 }
arrival = { kind = "poisson", rate = "250 /s" }
holding = { kind = "deterministic", mean = "10 ms" }
pcr = "10 /s"
pairs = ["a:b"]
profile = { base = "fast", latency = "0 s", per_message = "100 us", per_command = "0 s", switch_per_command = "0 s", manager_step = "0 s", route_work = "0 s", qos_work = "0 s", colocated = true, links = true, cpus = 1 }
"#,
        );
        let rep = Replication {
            seed: 3,
            replication: 0,
            length: RunLength::Duration(Duration::from_secs(4)),
            warmup: Warmup::Time(Duration::ZERO),
            batches: 1,
        };
        let mut plane = Plane::new(&c, &rep).expect("a plane");
        let end = Instant::ZERO + Duration::from_secs(4);
        plane.events.schedule(Instant::ZERO, Ev::Arrival);
        plane.start_period();
        let (mut waited, mut heard) = (0, 0);
        while let Some((t, ev)) = plane.next_event(end) {
            plane.now = t;
            let before = plane.stats.calls.established;
            plane.handle(ev);
            if !plane.answers.is_empty() {
                assert_eq!(
                    plane.cpu_free,
                    Some(0),
                    "an answer waits on a free processor"
                );
                waited += 1;
            }
            if plane.stats.calls.established > before {
                assert_eq!(
                    plane.cpu_free,
                    Some(1),
                    "an answer heard on a busy processor"
                );
                heard += 1;
            }
        }
        assert!(heard > 300, "only {heard} events heard answers");
        assert!(waited > 50, "only {waited} events left answers waiting");
    }
}
