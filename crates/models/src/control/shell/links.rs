//! The manager's links in the simulated shell (paper 000 §II-C: the manager's messages
//! to each switch server and their answers; issue 23's cost model): each link marshals a
//! message out or unmarshals an answer in, one job at a time, at `per_message` plus
//! `per_command` for each command, on the shared processors.

use super::*;

impl Plane<'_> {
    /// The manager's link to switch `s` takes its next job: marshalling a message out or
    /// unmarshalling an answer in, `per_message` plus `per_command` for each command.
    pub(super) fn serve_link(&mut self, m: usize, s: usize) {
        let link = &self.mgrs[m].links[s];
        if link.waking || link.job.is_some() || link.queue.is_empty() || !self.take_cpu() {
            return;
        }
        let Some((job, reading)) = self.mgrs[m].links[s].queue.pop_front() else {
            return;
        };
        let c = &self.cfg.costs;
        let k = match &job {
            LinkJob::Out(cmds) => cmds.len(),
            LinkJob::In(answers) => answers.len(),
        };
        // The link's own thread: not the manager's utilisation.
        let per_message = c.message_cost(reading);
        let work = per_message + times(c.per_command, k as u64) + self.oneway();
        let work = work + self.stall();
        self.mgrs[m].links[s].job = Some(job);
        let to = self.client(m);
        self.events.schedule(self.now + work, Ev::LinkDone(to, s));
    }

    /// A job for the link to switch `s`, noting whether it found the link idle.
    pub(super) fn push_link(&mut self, m: usize, s: usize, job: LinkJob) {
        let awake = self.pool_awake();
        let link = &mut self.mgrs[m].links[s];
        let idle = link.job.is_none() && link.queue.is_empty();
        let wake = idle && !link.waking;
        link.queue.push_back((job, Reading::of(idle, awake)));
        if wake && self.wake(Sleeper::Link(m, s)) {
            self.mgrs[m].links[s].waking = true;
        } else {
            self.serve_link(m, s);
        }
    }

    pub(super) fn link_done(&mut self, m: usize, s: usize) {
        self.release_cpu();
        match self.mgrs[m].links[s].job.take() {
            Some(LinkJob::Out(commands)) => {
                if let Some(at) = self.wire(self.cfg.costs.latency) {
                    let to = self.client(m);
                    self.events.schedule(at, Ev::AtSwitch(s, to, commands));
                }
            }
            Some(LinkJob::In(answers)) => {
                self.give_manager(m, Work::Replies(s, answers));
            }
            None => {}
        }
        self.serve_link(m, s);
        self.serve_others();
    }
}
