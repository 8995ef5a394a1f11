//! The switch servers in the simulated shell (paper 000 §III-A: each switch server a
//! FIFO server with its threads): a message of commands is applied to the switch's core
//! when a thread takes it, and its answers leave when the thread finishes; the answers
//! given are held as the live server holds them for repeated requests (see
//! [`SwitchServer`]).

use super::*;

impl Plane<'_> {
    /// Switch server `s` takes its queued messages while it has an idle thread (and a
    /// processor): each command is applied to its core, or answered again from the
    /// answers kept, and the answers leave when the thread finishes.
    /// Inlined, so that the common case after a message (nothing queued) costs a test
    /// rather than a call.
    #[inline]
    pub(super) fn serve_switch(&mut self, s: usize) {
        let server = &self.switches[s].server;
        if server.waking || server.queue.is_empty() {
            return;
        }
        self.serve_switch_queue(s);
    }

    fn serve_switch_queue(&mut self, s: usize) {
        let cfg = self.cfg;
        let c = &cfg.costs;
        let now = self.now;
        let oneway = self.oneway();
        while let Some(t) = self.switches[s].server.idle_thread() {
            if self.switches[s].server.queue.is_empty() || !self.take_cpu() {
                return;
            }
            if !self.answers_kept && self.mgrs.iter().any(|g| g.core.stats().retries > 0) {
                self.keep_answers();
            }
            let kept = self.answers_kept;
            let stall = self.stall();
            let mut replies = self.spare_answers.pop().unwrap_or_default();
            let sw = &mut self.switches[s];
            let Some((m, msg)) = sw.server.queue.pop_front() else {
                return;
            };
            let reading = sw.readings.pop_front().unwrap_or(Reading::Cold);
            let k = msg.len() as u64;
            replies.reserve(msg.len());
            for (req, cmd) in &msg {
                let key = request_key(m, *req);
                // Until answers are kept, no request reaches a switch twice (see
                // `answers_kept`): nothing to look up.
                let given = if kept { sw.answered.get(&key) } else { None };
                let reply = match given {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = sw.core.apply(cmd);
                        if kept {
                            sw.answered.insert(key, (now, r.clone()));
                            sw.answered_order.push_back((now, key));
                        }
                        r
                    }
                };
                // Until answers are kept, the answer on its way is the record.
                let i = sw.given.put(Answer {
                    at: now,
                    key,
                    reply,
                    recorded: !kept,
                    sent: true,
                });
                replies.push((*req, i));
            }
            // Answers are kept as long as the manager may re-send (its retries).
            sw.forget_answers(now);
            // Receiving the message and sending the answers; a server that was busy
            // when the message came reads it with others, no wakeup of its own.
            let per_message = c.message_cost(reading);
            let work = times(per_message + times(c.per_command, k) + oneway, 2)
                + times(c.switch_per_command, k)
                + stall;
            sw.server.threads[t] = Some(());
            sw.replies[t] = Some((m, replies));
            sw.server.busy += work;
            self.events.schedule(now + work, Ev::SwitchDone(s, t));
        }
    }

    /// Switch `s`'s thread `t` finished: its answers go on the wire to their manager.
    pub(super) fn switch_done(&mut self, s: usize, t: usize) {
        let sw = &mut self.switches[s];
        sw.server.threads[t] = None;
        self.release_cpu();
        if let Some((m, replies)) = self.switches[s].replies[t].take() {
            match self.wire(self.cfg.costs.latency) {
                Some(at) => {
                    let ev = if self.cfg.costs.links {
                        Ev::AtLink(m, s, replies)
                    } else {
                        Ev::AtManager(m, Work::Replies(s, replies))
                    };
                    self.events.schedule(at, ev);
                }
                None => self.switches[s].lost(&replies),
            }
        }
        self.serve_switch(s);
        self.serve_others();
    }

    /// The manager re-sent a request for the first time: from now on a switch may be
    /// asked again for any answer it gave, so each is kept [`ANSWER_KEEP`](super::servers::ANSWER_KEEP), as the live
    /// server keeps it. The answers still held (those the manager has not yet had) are
    /// put in the order they were given, and those the live server would have forgotten
    /// by now are forgotten ([`SwitchServer::keep_answers`]).
    pub(super) fn keep_answers(&mut self) {
        self.answers_kept = true;
        for sw in &mut self.switches {
            sw.keep_answers();
        }
    }
}
