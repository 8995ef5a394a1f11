//! One SMDS server (paper 002 §2.2, Figs. 1 and 2) as a sans-IO state machine.
//!
//! [`Control`] is the control half: the link-state routing ([`crate::linkstate`]), the
//! Congestion Management Protocol ([`crate::cmp`]) and the forwarding state ([`Fib`])
//! they produce. [`Server`] joins a `Control` and one [`Forwarder`] (the data half) into
//! the whole server a single-threaded shell drives. The parallel server
//! ([`crate::parallel`]) runs one `Control` and many `Forwarder`s sharing its `Fib`.
//!
//! Method kinds, in the order a shell calls them:
//! 1. inputs: [`Server::handle_datagram`] (octets that arrived on an interface),
//!    [`Server::handle_timeout`] (when [`Server::poll_timeout`] fell due),
//!    [`Server::handle_occupancy`] (the input backlog, for the CMP),
//!    [`Server::discard_overload`] (a datagram the shell had no room for);
//! 2. outputs: drain [`Server::poll_transmit`] (a `Payload::Input` refers to the datagram
//!    just handled, so drain before the next input);
//! 3. re-arm the timer at [`Server::poll_timeout`].
//!
//! Time comes in as an argument; the core reads no clock and does no I/O.

use std::collections::VecDeque;
use std::sync::Arc;

use atmlab_core::time::Instant;

use crate::SmdsError;
use crate::cmp::{Cmp, CmpConfig};
use crate::fib::{Counters, Fib, Forwarder, InterfaceConfig, LocalConfig, Payload, Transmit};
use crate::ids::{IfaceId, IfaceKind, ServerId};
use crate::linkstate::{LinkState, LinkStateConfig};
use crate::msg::{IssiFrame, kind};

/// Everything a server is configured with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Identity, interfaces, groups.
    pub local: LocalConfig,
    /// Routing timers.
    pub link_state: LinkStateConfig,
    /// Congestion management.
    pub cmp: CmpConfig,
    /// The server at the other end of each ISSI, where configured: its control frames
    /// are taken only with that `from`. An ISSI not listed takes the server whose Hello
    /// first arrives on it as its neighbour, for the life of the server (issue 24).
    pub neighbours: Vec<(IfaceId, ServerId)>,
}

impl ServerConfig {
    /// A configuration with the default routing and CMP settings.
    pub fn new(local: LocalConfig) -> Self {
        ServerConfig {
            local,
            link_state: LinkStateConfig::default(),
            cmp: CmpConfig::default(),
            neighbours: Vec::new(),
        }
    }
}

/// The control half of a server (see the module doc).
#[derive(Debug, Clone)]
pub struct Control {
    local: LocalConfig,
    ls: LinkState,
    cmp: Cmp,
    fib: Arc<Fib>,
    version: u64,
    out: VecDeque<Transmit>,
    malformed: u64,
    spf_runs: u64,
    /// Per interface: the ISSI's neighbour, configured or pinned by its first Hello.
    neighbour: Vec<Option<ServerId>>,
    /// Per interface: control frames refused because their `from` was not the neighbour.
    refused_from: Vec<u64>,
}

impl Control {
    /// A server's control half, starting at `now`.
    pub fn new(cfg: ServerConfig, now: Instant) -> Result<Control, SmdsError> {
        cfg.local.validate()?;
        let n = cfg.local.interfaces.len();
        let mut neighbour = vec![None; n];
        for &(i, id) in &cfg.neighbours {
            let bad = |why: &str| {
                Err(SmdsError::Config(format!(
                    "neighbour {} on interface {}: {why}",
                    id.0,
                    i.0 + 1
                )))
            };
            match cfg.local.interfaces.get(i.index()) {
                Some(InterfaceConfig::Issi { .. }) => {}
                _ => return bad("the interface is not an ISSI"),
            }
            if id == cfg.local.id || id.0 == 0 {
                return bad("not a valid neighbour id (0, or this server's own)");
            }
            neighbour[i.index()] = Some(id);
        }
        let ports: Vec<(IfaceId, u32)> = cfg
            .local
            .interfaces
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                InterfaceConfig::Issi { cost } => Some((IfaceId(i as u16), *cost)),
                _ => None,
            })
            .collect();
        let ls = LinkState::new(
            cfg.local.id,
            &ports,
            cfg.local.advertised(),
            cfg.local.prefixes(),
            cfg.link_state,
            now,
        );
        let cmp = Cmp::new(
            cfg.local.id,
            ports.iter().map(|p| p.0).collect(),
            cfg.local.interfaces.len(),
            cfg.cmp,
        );
        let mut c = Control {
            fib: Arc::new(Fib::default()),
            local: cfg.local,
            ls,
            cmp,
            version: 0,
            out: VecDeque::new(),
            malformed: 0,
            spf_runs: 0,
            neighbour,
            refused_from: vec![0; n],
        };
        c.after(now);
        Ok(c)
    }

    /// This server.
    pub fn id(&self) -> ServerId {
        self.local.id
    }

    /// The local configuration.
    pub fn local(&self) -> &LocalConfig {
        &self.local
    }

    /// The current forwarding state.
    pub fn fib(&self) -> &Arc<Fib> {
        &self.fib
    }

    /// Bumped each time the forwarding state is rebuilt.
    pub fn fib_version(&self) -> u64 {
        self.version
    }

    /// The routing core.
    pub fn link_state(&self) -> &LinkState {
        &self.ls
    }

    /// The CMP core.
    pub fn cmp(&self) -> &Cmp {
        &self.cmp
    }

    /// Control frames that did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// How many times routes were recomputed.
    pub fn spf_runs(&self) -> u64 {
        self.spf_runs
    }

    /// Per interface: control frames refused because their `from` was not the ISSI's
    /// neighbour.
    pub fn refused_from(&self) -> &[u64] {
        &self.refused_from
    }

    /// Each ISSI's neighbour, once known (configured, or pinned by its first Hello).
    pub fn neighbour(&self, iface: IfaceId) -> Option<ServerId> {
        self.neighbour.get(iface.index()).copied().flatten()
    }

    /// A control frame (not Data) that arrived on ISSI `iface`. A frame that does not
    /// decode is counted and dropped; so is one whose `from` is not the interface's
    /// neighbour (a forged Throttle would otherwise cut a neighbour's traffic, a forged
    /// Hello or LSU take over the link).
    pub fn handle_control(&mut self, now: Instant, iface: IfaceId, data: &[u8]) {
        match IssiFrame::parse(data) {
            Ok(f) if !self.sent_by_neighbour(iface, &f) => {
                if let Some(r) = self.refused_from.get_mut(iface.index()) {
                    *r += 1;
                }
            }
            Ok(IssiFrame::Cmp { kind, .. }) => self.cmp.handle_message(now, iface, kind),
            Ok(f) => self.ls.handle_frame(now, iface, f),
            Err(_) => self.malformed += 1,
        }
        self.after(now);
    }

    /// Whether frame `f` on `iface` comes from the interface's neighbour; the first Hello
    /// on an ISSI without a configured neighbour names it.
    fn sent_by_neighbour(&mut self, iface: IfaceId, f: &IssiFrame) -> bool {
        let from = match f {
            IssiFrame::Hello { from, .. }
            | IssiFrame::Lsu { from, .. }
            | IssiFrame::LsAck { from, .. }
            | IssiFrame::Cmp { from, .. } => *from,
        };
        let is_issi = matches!(
            self.local.interfaces.get(iface.index()),
            Some(InterfaceConfig::Issi { .. })
        );
        if !is_issi || from == self.local.id || from.0 == 0 {
            return false;
        }
        match &mut self.neighbour[iface.index()] {
            Some(n) => *n == from,
            slot @ None => {
                if matches!(f, IssiFrame::Hello { .. }) {
                    *slot = Some(from);
                    true
                } else {
                    // Nothing but a Hello opens a link.
                    false
                }
            }
        }
    }

    /// Timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.ls.handle_timeout(now);
        self.cmp.handle_timeout(now);
        self.after(now);
    }

    /// The input backlog, for the CMP.
    pub fn handle_occupancy(&mut self, now: Instant, occupancy: usize, capacity: usize) {
        self.cmp.handle_occupancy(now, occupancy, capacity);
        self.after(now);
    }

    /// When to call [`Control::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Instant {
        let t = self.ls.poll_timeout();
        self.cmp.poll_timeout().map_or(t, |c| c.min(t))
    }

    /// The next control frame to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Collects frames, and rebuilds the forwarding state if routes or cuts changed.
    fn after(&mut self, _now: Instant) {
        while let Some((iface, f)) = self.ls.poll_frame() {
            self.out.push_back(Transmit {
                iface,
                payload: Payload::Owned(f.emit()),
            });
        }
        while let Some((iface, f)) = self.cmp.poll_frame() {
            self.out.push_back(Transmit {
                iface,
                payload: Payload::Owned(f.emit()),
            });
        }
        let routes_changed = self.ls.take_changed();
        let cuts_changed = self.cmp.take_cuts_changed();
        if routes_changed || cuts_changed {
            if routes_changed {
                self.spf_runs += 1;
            }
            let routes = self.ls.routes();
            self.fib = Arc::new(Fib::build(&self.local, &routes, &self.cmp.cuts()));
            self.version += 1;
        }
    }
}

/// A whole server: control and one forwarder (see the module doc).
#[derive(Debug, Clone)]
pub struct Server {
    control: Control,
    fwd: Forwarder,
    version: u64,
}

impl Server {
    /// A server starting at `now`.
    pub fn new(cfg: ServerConfig, now: Instant) -> Result<Server, SmdsError> {
        let control = Control::new(cfg, now)?;
        let fwd = Forwarder::new(Arc::clone(control.fib()));
        let version = control.fib_version();
        Ok(Server {
            control,
            fwd,
            version,
        })
    }

    /// This server.
    pub fn id(&self) -> ServerId {
        self.control.id()
    }

    /// The control half.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// The forwarding counters.
    pub fn counters(&self) -> &Counters {
        self.fwd.counters()
    }

    /// The kind of interface `iface`.
    pub fn kind(&self, iface: IfaceId) -> Option<IfaceKind> {
        self.control
            .local()
            .interfaces
            .get(iface.index())
            .map(InterfaceConfig::kind)
    }

    fn sync(&mut self) {
        if self.control.fib_version() != self.version {
            self.version = self.control.fib_version();
            self.fwd.set_fib(Arc::clone(self.control.fib()));
        }
    }

    /// Octets that arrived on `iface`.
    pub fn handle_datagram(&mut self, now: Instant, iface: IfaceId, data: &[u8]) {
        let control = self.kind(iface) == Some(IfaceKind::Issi)
            && data.first().is_some_and(|&t| t != kind::DATA);
        if control {
            self.control.handle_control(now, iface, data);
            self.sync();
        } else {
            self.fwd.handle_datagram(iface, data);
        }
    }

    /// Timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.control.handle_timeout(now);
        self.sync();
    }

    /// The input backlog, for the CMP.
    pub fn handle_occupancy(&mut self, now: Instant, occupancy: usize, capacity: usize) {
        self.control.handle_occupancy(now, occupancy, capacity);
        self.sync();
    }

    /// A datagram the shell discarded because the server was overwhelmed.
    pub fn discard_overload(&mut self) {
        self.fwd.discard_overload();
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.control
            .poll_transmit()
            .or_else(|| self.fwd.poll_transmit())
    }

    /// When to call [`Server::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Instant {
        self.control.poll_timeout()
    }
}
