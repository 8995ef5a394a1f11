//! Models as block diagrams: components that exchange typed messages through ports.
//!
//! This is the BONeS block and the OMNeT++ simple module. A model picks one message type
//! `M` (usually an enum of everything its blocks say to each other); each component
//! implements [`Component<M>`], is added to a [`Simulation<M>`], and is wired to others by
//! [`OutPort`]s, which are plain (component, input port) pairs resolved when the model is
//! built: no string look-ups happen while the model runs. A component reacts to a message
//! on one of its input ports by updating its state and sending messages (now, after a
//! delay, or at a time) and setting or cancelling timers through its [`Ctx`].
//!
//! # Messages that stay fast
//!
//! Keep a model's message type to two machine words with a plain layout (say, a struct
//! of two `u64`, with an enum view for matching): such a value moves in registers. A tagged
//! enum of the same size is passed through a stack copy that the CPU often cannot forward
//! from the event set's stores, and the handler waits on it (see
//! `atmlab_models::queue::QueueMsg`; docs/performance.md has the measurements).
//!
//! # Guarantees
//!
//! - **Ordering.** Messages are delivered in increasing time; messages due at the same time
//!   are delivered in the order they were sent (FIFO), whatever component sent them.
//! - **Causality.** Nothing can be scheduled before the current time: `send_at` into the
//!   past is refused with [`SimError::Causality`]. Time never goes backwards.
//! - **Reproducibility.** A run is a function of the model, its parameters and its RNG
//!   streams only: components are initialised in the order they were added, the event
//!   order depends on (time, send order) only, and the engine reads no clock, no hash
//!   order and no thread state. Replications run in parallel never share state.
//! - **Lifecycle.** `init` is called once per component, in id order, before the first
//!   event; `reset_stats` at the end of the warm-up; then components are read back with
//!   [`Simulation::component`].
//!
//! # Components known at build time
//!
//! [`Simulation::new`] holds its components as trait objects (`Box<dyn Component<M>>`), so
//! any mix of blocks can be wired together. A model whose blocks are all of one type (or an
//! enum of its block types) can say so: [`Simulation::typed`] makes a `Simulation<M, C>`
//! that holds `C` by value and calls its `handle` directly. The compiler then inlines the
//! handler into the run loop: no `dyn` call (with its register saves and restores) and no
//! [`Ctx`] built in memory for each message, whose fields the handler would reload after
//! every call it cannot see into (docs/performance.md has the measurements). Both kinds
//! give the same runs: the event order, the guarantees below and the API are the same.
//!
//! # What makes a run stall
//!
//! A run ends early ([`RunOutcome::Stalled`]) when no message is pending before the stop
//! time: a source that stopped, a component that forgot to re-arm its timer, or two
//! components each waiting for the other. A component that keeps sending zero-delay
//! messages to itself never lets time advance (a livelock); `run_until` still returns
//! when its event budget, if any, runs out.

use std::any::Any;
use std::hint::cold_path;
use std::num::NonZeroU64;

use atmlab_core::time::{Duration, Instant};

use crate::SimError;
use crate::event_set::{EventId, EventSet, LaneId};

/// A component's identity within its simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentId(u32);

/// An input port number of a component (its meaning is the component's to document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InPort(pub u16);

/// Where an output leads: a component and one of its input ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutPort {
    /// The receiving component.
    pub to: ComponentId,
    /// Its input port.
    pub port: InPort,
}

impl ComponentId {
    /// The output port leading to input `port` of this component.
    pub const fn port(self, port: u16) -> OutPort {
        OutPort {
            to: self,
            port: InPort(port),
        }
    }
    /// The index of this component (its order of addition).
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A block of a model.
pub trait Component<M>: Any {
    /// Called once before the first event, in the order components were added.
    fn init(&mut self, _ctx: &mut Ctx<'_, M>) {}
    /// A message arrived on input `port`.
    fn handle(&mut self, ctx: &mut Ctx<'_, M>, port: InPort, msg: M);
    /// The warm-up ended at `now`: forget statistics gathered so far, keep state.
    fn reset_stats(&mut self, _now: Instant) {}
}

/// A message in flight.
///
/// The receiver and its port share one `u64` (`to | port << 32`), written and read back as
/// one word: as a `u32` and a `u16` they were stored separately and loaded as one 8-byte
/// word when the event was popped, a store-to-load forwarding stall.
///
/// The word also has its top bit set, which makes it never zero: `Option<Envelope<M>>` (the
/// event set's slots and lane heads) then needs no tag word of its own, one store fewer
/// when an event is scheduled and one load and store fewer when it is delivered.
struct Envelope<M> {
    addr: NonZeroU64,
    msg: M,
}

/// The bit that keeps an envelope's address non-zero (above the port's 16 bits).
const ADDR_SET: u64 = 1 << 63;

impl<M> Envelope<M> {
    /// `msg` addressed through the output port `to`.
    #[inline]
    fn to(to: OutPort, msg: M) -> Self {
        let addr = u64::from(to.to.0) | (u64::from(to.port.0) << 32) | ADDR_SET;
        Envelope {
            // Never the fallback: `addr` has its top bit set.
            addr: NonZeroU64::new(addr).unwrap_or(NonZeroU64::MAX),
            msg,
        }
    }

    /// The receiving component.
    #[inline]
    fn receiver(&self) -> ComponentId {
        ComponentId(self.addr.get() as u32)
    }

    /// The receiver's input port.
    #[inline]
    fn port(&self) -> InPort {
        InPort((self.addr.get() >> 32) as u16)
    }
}

/// What a component may do while it handles a message.
pub struct Ctx<'a, M> {
    now: Instant,
    me: ComponentId,
    events: &'a mut EventSet<Envelope<M>>,
    stop: &'a mut bool,
}

impl<M> Ctx<'_, M> {
    /// The current time.
    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// This component's id.
    #[inline]
    pub fn me(&self) -> ComponentId {
        self.me
    }

    /// Delivers `msg` to `to` at the current time, after everything already due now.
    #[inline]
    pub fn send(&mut self, to: OutPort, msg: M) -> EventId {
        self.events.schedule(self.now, Envelope::to(to, msg))
    }

    /// Delivers `msg` to `to` after `delay`.
    #[inline]
    pub fn send_in(&mut self, delay: Duration, to: OutPort, msg: M) -> EventId {
        self.events
            .schedule(self.now + delay, Envelope::to(to, msg))
    }

    /// Delivers `msg` to `to` at `at`, which may not be in the past.
    pub fn send_at(&mut self, at: Instant, to: OutPort, msg: M) -> Result<EventId, SimError> {
        if at < self.now {
            return Err(SimError::Causality { now: self.now, at });
        }
        Ok(self.events.schedule(at, Envelope::to(to, msg)))
    }

    /// Delivers `msg` to `to` at `at` through a FIFO lane (see [`crate::event_set`]): the
    /// fast path for streams of messages that are sent in time order.
    #[inline(always)]
    pub fn send_in_lane(
        &mut self,
        lane: LaneId,
        at: Instant,
        to: OutPort,
        msg: M,
    ) -> Result<EventId, SimError> {
        if at < self.now {
            return Err(SimError::Causality { now: self.now, at });
        }
        self.events
            .schedule_in_lane(lane, at, Envelope::to(to, msg))
    }

    /// Sets a timer: `msg` comes back to this component's input `port` after `delay`.
    #[inline]
    pub fn timer(&mut self, delay: Duration, port: InPort, msg: M) -> EventId {
        let me = self.me;
        self.events
            .schedule(self.now + delay, Envelope::to(me.port(port.0), msg))
    }

    /// Cancels a message or timer not yet delivered; false if it already was.
    #[inline]
    pub fn cancel(&mut self, id: EventId) -> bool {
        self.events.cancel(id)
    }

    /// Ends the run after the current message.
    pub fn stop(&mut self) {
        *self.stop = true;
    }
}

/// A boxed component is a component: this is how [`Simulation::new`]'s default storage
/// runs blocks of different types side by side.
impl<M: 'static> Component<M> for Box<dyn Component<M>> {
    #[inline]
    fn init(&mut self, ctx: &mut Ctx<'_, M>) {
        (**self).init(ctx);
    }
    #[inline]
    fn handle(&mut self, ctx: &mut Ctx<'_, M>, port: InPort, msg: M) {
        (**self).handle(ctx, port, msg);
    }
    #[inline]
    fn reset_stats(&mut self, now: Instant) {
        (**self).reset_stats(now);
    }
}

/// How a call to [`Simulation::run_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Time reached the requested end.
    Reached,
    /// No message was pending before the end (see "What makes a run stall").
    Stalled,
    /// A component called [`Ctx::stop`].
    Stopped,
    /// The event budget ran out.
    Budget,
}

/// A model being simulated: its components (of type `C`: trait objects unless the model
/// says otherwise, see "Components known at build time") and its pending messages.
pub struct Simulation<M, C = Box<dyn Component<M>>> {
    now: Instant,
    events: EventSet<Envelope<M>>,
    components: Vec<Option<C>>,
    initialised: bool,
    processed: u64,
}

impl<M, C> core::fmt::Debug for Simulation<M, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Simulation")
            .field("now", &self.now)
            .field("components", &self.components.len())
            .field("pending", &self.events.len())
            .field("processed", &self.processed)
            .finish()
    }
}

impl<M: 'static> Default for Simulation<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: 'static> Simulation<M> {
    /// An empty model at time zero, whose components may be of any types.
    pub fn new() -> Self {
        Self::typed()
    }

    /// Adds a component.
    pub fn add(&mut self, c: impl Component<M>) -> ComponentId {
        self.add_typed(Box::new(c))
    }

    /// Installs a component at a reserved id.
    pub fn install(&mut self, id: ComponentId, c: impl Component<M>) -> Result<(), SimError> {
        self.install_typed(id, Box::new(c))
    }
}

impl<M: 'static, C: Component<M>> Simulation<M, C> {
    /// An empty model at time zero whose components are all of type `C` (one block type,
    /// or an enum of the model's block types), called without a `dyn` call (see
    /// "Components known at build time").
    pub fn typed() -> Self {
        Simulation {
            now: Instant::ZERO,
            events: EventSet::new(),
            components: Vec::new(),
            initialised: false,
            processed: 0,
        }
    }

    /// Adds a component of the simulation's component type.
    pub fn add_typed(&mut self, c: C) -> ComponentId {
        self.components.push(Some(c));
        ComponentId(self.components.len() as u32 - 1)
    }

    /// Reserves an id for a component built later (to wire feedback loops).
    pub fn reserve(&mut self) -> ComponentId {
        self.components.push(None);
        ComponentId(self.components.len() as u32 - 1)
    }

    /// Installs a component of the simulation's component type at a reserved id.
    pub fn install_typed(&mut self, id: ComponentId, c: C) -> Result<(), SimError> {
        match self.components.get_mut(id.index()) {
            Some(slot @ None) => {
                *slot = Some(c);
                Ok(())
            }
            _ => Err(SimError::Model {
                model: "simulation".into(),
                message: format!("component id {} was not reserved or is taken", id.0),
            }),
        }
    }

    /// A new FIFO lane for [`Ctx::send_in_lane`].
    pub fn new_lane(&mut self) -> LaneId {
        self.events.new_lane()
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Messages delivered so far.
    pub fn events_processed(&self) -> u64 {
        self.processed
    }

    /// Messages pending.
    pub fn pending(&self) -> usize {
        self.events.len()
    }

    /// Injects a message from outside the model.
    pub fn schedule(&mut self, at: Instant, to: OutPort, msg: M) -> Result<EventId, SimError> {
        if at < self.now {
            return Err(SimError::Causality { now: self.now, at });
        }
        Ok(self.events.schedule(at, Envelope::to(to, msg)))
    }

    /// A component, to read its state or statistics: `T` is the component type `C`
    /// itself, or with [`Simulation::new`]'s boxed components the type of the one at `id`.
    pub fn component<T: Component<M>>(&self, id: ComponentId) -> Option<&T> {
        let c: &dyn Any = self.components.get(id.index())?.as_ref()?;
        if let Some(t) = c.downcast_ref::<T>() {
            return Some(t);
        }
        let inner: &dyn Any = &**c.downcast_ref::<Box<dyn Component<M>>>()?;
        inner.downcast_ref::<T>()
    }

    /// A component, mutably.
    pub fn component_mut<T: Component<M>>(&mut self, id: ComponentId) -> Option<&mut T> {
        let c: &mut dyn Any = self.components.get_mut(id.index())?.as_mut()?;
        // Two look-ups rather than one `if let` on the first: the borrow checker does not
        // yet see that a failed downcast gives the borrow back.
        if c.is::<T>() {
            return c.downcast_mut::<T>();
        }
        let inner: &mut dyn Any = &mut **c.downcast_mut::<Box<dyn Component<M>>>()?;
        inner.downcast_mut::<T>()
    }

    fn init(&mut self) -> Result<(), SimError> {
        if self.initialised {
            return Ok(());
        }
        self.initialised = true;
        for i in 0..self.components.len() {
            let Some(c) = self.components[i].as_mut() else {
                return Err(SimError::Model {
                    model: "simulation".into(),
                    message: format!("component id {i} was reserved but never installed"),
                });
            };
            let mut ctx = Ctx {
                now: self.now,
                me: ComponentId(i as u32),
                events: &mut self.events,
                // A stop during `init` is not a stop of the run: the model has not started.
                stop: &mut false,
            };
            c.init(&mut ctx);
        }
        Ok(())
    }

    /// Runs until time `end` (messages due at `end` are delivered), or until the run
    /// stalls, a component stops it, or `budget` messages have been delivered.
    pub fn run_until(&mut self, end: Instant, budget: Option<u64>) -> Result<RunOutcome, SimError> {
        self.init()?;
        // The stop flag is a local: in `self` it was loaded and stored for every message
        // (the compiler cannot tell it apart from the component and event-set stores
        // around it). The count and the time stay in `self`: as locals they would take
        // registers the handler needs. A stop ends the call that saw it; the next call
        // resumes the model.
        let mut stopped = false;
        // No budget is a budget never reached (`processed` would have to reach u64::MAX,
        // centuries away): one comparison per message instead of an `Option` test and a
        // comparison.
        let limit = budget.map_or(u64::MAX, |b| self.processed.saturating_add(b));
        loop {
            if stopped {
                cold_path();
                break Ok(RunOutcome::Stopped);
            }
            if self.processed >= limit {
                cold_path();
                break Ok(RunOutcome::Budget);
            }
            let Some((t, env)) = self.events.pop_until(end) else {
                cold_path();
                self.now = end;
                break Ok(if self.events.is_empty() {
                    RunOutcome::Stalled
                } else {
                    RunOutcome::Reached
                });
            };
            self.now = t;
            self.processed += 1;
            let to = env.receiver();
            let Some(Some(c)) = self.components.get_mut(to.index()) else {
                cold_path();
                break Err(SimError::Model {
                    model: "simulation".into(),
                    message: format!(
                        "message sent to component id {}, which does not exist",
                        to.0
                    ),
                });
            };
            let mut ctx = Ctx {
                now: t,
                me: to,
                events: &mut self.events,
                stop: &mut stopped,
            };
            c.handle(&mut ctx, env.port(), env.msg);
        }
    }

    /// Runs the measured period of a replication as `batches` consecutive batches (batch
    /// means): to `end` in equal slices of simulated time, or, with `end` =
    /// [`Instant::MAX`], in runs that a component ends with [`Ctx::stop`] (a count per
    /// batch). After each batch `at_batch_end(sim, t, last)` reads the batch's statistics
    /// at its end time `t` and, unless `last`, starts the next one. Returns the end time
    /// of the last batch. With `batches` = 1 this is one plain run.
    pub fn run_in_batches(
        &mut self,
        end: Instant,
        batches: u64,
        mut at_batch_end: impl FnMut(&mut Self, Instant, bool) -> Result<(), SimError>,
    ) -> Result<Instant, SimError> {
        let batches = batches.max(1);
        let start = self.now;
        let mut t_end = start;
        for b in 1..=batches {
            let slice_end = if end == Instant::MAX {
                Instant::MAX
            } else {
                // Equal slices; the last ends exactly at `end`.
                let span = u128::from(end.saturating_duration_since(start).as_picos());
                start + Duration::from_picos((span * u128::from(b) / u128::from(batches)) as u64)
            };
            let outcome = self.run_until(slice_end, None)?;
            t_end = if outcome == RunOutcome::Stopped {
                self.now
            } else {
                slice_end
            };
            at_batch_end(self, t_end, b == batches)?;
        }
        Ok(t_end)
    }

    /// Ends the warm-up: every component forgets its statistics at the current time.
    pub fn reset_stats(&mut self) {
        let now = self.now;
        for c in self.components.iter_mut().flatten() {
            c.reset_stats(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping-pong pair: each bounces the counter back after 1 us until it reaches 10.
    struct Pinger {
        peer: Option<OutPort>,
        seen: Vec<(Instant, u32)>,
    }
    impl Component<u32> for Pinger {
        fn init(&mut self, ctx: &mut Ctx<'_, u32>) {
            if ctx.me().index() == 0 {
                ctx.send(self.peer.unwrap(), 0);
            }
        }
        fn handle(&mut self, ctx: &mut Ctx<'_, u32>, _port: InPort, n: u32) {
            self.seen.push((ctx.now(), n));
            if n < 10 {
                ctx.send_in(Duration::from_micros(1), self.peer.unwrap(), n + 1);
            }
        }
    }

    /// Wires a ping-pong pair into `sim` (the second one added first, to exercise
    /// `reserve`), each component made by `wrap`; runs it and returns the second's id.
    fn run_pair<C: Component<u32>>(
        sim: &mut Simulation<u32, C>,
        wrap: impl Fn(Pinger) -> C,
    ) -> ComponentId {
        let pinger = |peer: ComponentId| Pinger {
            peer: Some(peer.port(0)),
            seen: vec![],
        };
        let a = sim.reserve();
        let b = sim.add_typed(wrap(pinger(a)));
        sim.install_typed(a, wrap(pinger(b))).unwrap();
        let out = sim
            .run_until(Instant::ZERO + Duration::from_secs(1), None)
            .unwrap();
        assert_eq!(out, RunOutcome::Stalled);
        assert_eq!(sim.events_processed(), 11);
        b
    }

    #[test]
    fn ping_pong_runs_and_stalls() {
        let mut sim = Simulation::new();
        let b = run_pair(&mut sim, |p| Box::new(p) as Box<dyn Component<u32>>);
        let pb = sim.component::<Pinger>(b).unwrap();
        assert_eq!(pb.seen.first(), Some(&(Instant::ZERO, 0)));
        assert_eq!(
            pb.seen.last(),
            Some(&(Instant::ZERO + Duration::from_micros(10), 10))
        );
        // Boxed components are found by their own type, mutably too.
        assert!(sim.component_mut::<Pinger>(b).is_some());
        assert!(sim.component::<Timers>(b).is_none());
        let t = sim.add(Timers { fired: vec![] });
        assert!(sim.component_mut::<Timers>(t).is_some());
    }

    /// The same pair held by value (`Simulation::typed`) runs the same messages.
    #[test]
    fn typed_simulation_runs_like_boxed() {
        let mut boxed = Simulation::new();
        let bb = run_pair(&mut boxed, |p| Box::new(p) as Box<dyn Component<u32>>);
        let mut typed: Simulation<u32, Pinger> = Simulation::typed();
        let bt = run_pair(&mut typed, |p| p);
        let seen = |s: Option<&Pinger>| s.unwrap().seen.clone();
        assert_eq!(seen(typed.component(bt)), seen(boxed.component(bb)));
        assert!(typed.component_mut::<Pinger>(bt).is_some());
        assert!(typed.component::<Timers>(bt).is_none());
    }

    struct Timers {
        fired: Vec<u32>,
    }
    impl Component<u32> for Timers {
        fn init(&mut self, ctx: &mut Ctx<'_, u32>) {
            let a = ctx.timer(Duration::from_nanos(5), InPort(0), 1);
            ctx.timer(Duration::from_nanos(5), InPort(0), 2);
            ctx.timer(Duration::from_nanos(1), InPort(0), 3);
            assert!(ctx.cancel(a));
            assert!(ctx.send_at(Instant::ZERO, ctx.me().port(0), 4).is_ok());
        }
        fn handle(&mut self, ctx: &mut Ctx<'_, u32>, _: InPort, n: u32) {
            self.fired.push(n);
            if ctx.now() > Instant::ZERO {
                // Causality: the past is closed.
                assert!(matches!(
                    ctx.send_at(Instant::ZERO, ctx.me().port(0), 99),
                    Err(SimError::Causality { .. })
                ));
            }
        }
    }

    #[test]
    fn timers_cancel_and_order() {
        let mut sim = Simulation::new();
        let id = sim.add(Timers { fired: vec![] });
        let out = sim.run_until(Instant::from_picos(5_000), None).unwrap();
        assert_eq!(out, RunOutcome::Stalled);
        // 4 is due now; then 3 at 1 ns; 1 was cancelled; 2 at 5 ns.
        assert_eq!(sim.component::<Timers>(id).unwrap().fired, vec![4, 3, 2]);
    }

    #[test]
    fn reserved_but_missing_component_is_an_error() {
        let mut sim: Simulation<u32> = Simulation::new();
        sim.reserve();
        assert!(sim.run_until(Instant::from_picos(1), None).is_err());
    }
}
