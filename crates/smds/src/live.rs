//! The live shell: SMDS servers on real UDP sockets (tokio), and the subscriber's side.
//!
//! Each interface is one UDP socket; on an SNI or ICI a datagram is one L3_PDU, on an
//! ISSI one frame of [`crate::msg`].
//!
//! Each UDP interface is bound to one peer and takes datagrams from that address only
//! (issue 24): an ISSI or ICI its configured neighbour's socket; an SNI its subscriber,
//! configured (`peer` in the server file), attached explicitly
//! ([`LiveServer::attach_subscriber`]), or, on an SNI still unbound, the sender of the
//! first *attach* (an empty datagram, what [`Subscriber::attach`] sends first). A bound
//! SNI stays bound: an attach or a PDU from another address does not move it. On top of
//! the address, an ISSI's control frames must name its neighbour in their `from` field
//! (see [`crate::server::Control::handle_control`]). Whatever is refused is counted per
//! interface ([`Status::refused_source`], [`Status::refused_from`]) and summed up in one
//! WARN line per [`REFUSAL_LOG_INTERVAL`], never one per datagram.
//!
//! An interface may instead be a [`FrameLink`]: the same messages, one per `Vec`, handed
//! to and taken from an adapter that carries them. That is how an interface runs over
//! ATM (paper 002's servers sat on an ATM network, §4.2): `atmlab-lab`'s `smds_atm`
//! attaches a host to a switch port of the live cell data plane and carries each message
//! as AAL3/4 cells on a VC. This crate does not depend on the cell data plane
//! (`atmlab-fabric`), so it sees only the messages.
//!
//! The shell is thin and parallel: per interface, a **reader** task receives datagrams,
//! hands control frames to the **control** task and user data to that interface's
//! bounded input queue (a full queue discards the PDU and counts it under `overload`:
//! the SMDS policy of paper 002 §5.2); a **forwarder** task per interface runs a
//! [`Forwarder`] over the shared [`Fib`] and sends. The control task owns the
//! [`Control`] core (routing, CMP), arms its timer, samples the input queues every
//! 10 ms for the CMP, and publishes each new `Fib` to the forwarders through a watch
//! channel. On a multi-threaded runtime the forwarders of different interfaces run on
//! different cores behind one server id and one routing table: the parallel server of
//! [`crate::parallel`].

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use atmlab_core::clock::LiveClock;

use atmlab_wire::E164Address;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::SmdsError;
use crate::config::Endpoint;
use crate::fib::{Counters, Fib, Forwarder, Payload};
use crate::ids::{IfaceId, IfaceKind, ServerId};
use crate::msg::kind;
use crate::server::{Control, ServerConfig};

/// The largest datagram read.
const MAX_DATAGRAM: usize = 65_536;

/// How often a server sums up what its interfaces refused in one log line.
pub const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// What a running server reports.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// The server.
    pub id: ServerId,
    /// Forwarding counters, all interfaces together.
    pub counters: Counters,
    /// Control frames that did not decode.
    pub control_malformed: u64,
    /// Deliveries to an SNI no subscriber had attached to.
    pub unattached: u64,
    /// Neighbours: (ISSI, neighbour, adjacency formed).
    pub neighbours: Vec<(IfaceId, ServerId, bool)>,
    /// LSAs in the database.
    pub lsas: usize,
    /// Individual addresses with a route (local and remote).
    pub reachable: usize,
    /// The route to each other server reachable: (server, the interface to it).
    pub next_hops: Vec<(ServerId, IfaceId)>,
    /// Whether the CMP says we are congested.
    pub congested: bool,
    /// Route recomputations.
    pub spf_runs: u64,
    /// The time of the control steps that recomputed routes (shortest paths and the
    /// forwarding table rebuilt from them), in seconds, summed.
    pub spf_seconds: f64,
    /// How many of those steps fell in each bucket of [`SPF_BOUNDS`] (the last: above
    /// its last bound).
    pub spf_buckets: [u64; SPF_BOUNDS.len() + 1],
    /// Congestion episodes the CMP has seen (paper 002 §3.4).
    pub cmp_episodes: u64,
    /// The cut the CMP asks its neighbours for now (0: none).
    pub cmp_cut: u16,
    /// CMP messages sent to neighbours and received from them.
    pub cmp_messages: (u64, u64),
    /// Per interface: datagrams refused because they came from an address that is not
    /// the interface's peer (its neighbour, or its subscriber).
    pub refused_source: Vec<u64>,
    /// Per interface: ISSI control frames refused because their `from` was not the
    /// interface's neighbour.
    pub refused_from: Vec<u64>,
}

impl Status {
    /// The status as JSON (for `--status` files and `--json`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut c = serde_json::Map::new();
        for (k, v) in self.counters.fields() {
            c.insert(k.into(), v.into());
        }
        serde_json::json!({
            "id": self.id.0,
            "counters": c,
            "control_malformed": self.control_malformed,
            "unattached": self.unattached,
            "neighbours": self.neighbours.iter().map(|(i, n, f)| serde_json::json!({
                "iface": i.0, "server": n.0, "full": f })).collect::<Vec<_>>(),
            "lsas": self.lsas,
            "reachable": self.reachable,
            "routes": self.next_hops.iter().map(|(s, i)| serde_json::json!({
                "server": s.0, "iface": i.0 })).collect::<Vec<_>>(),
            "congested": self.congested,
            "spf_runs": self.spf_runs,
            "spf_seconds": self.spf_seconds,
            "cmp_episodes": self.cmp_episodes,
            "cmp_cut": self.cmp_cut,
            "cmp_sent": self.cmp_messages.0,
            "cmp_received": self.cmp_messages.1,
            "refused_source": self.refused_source,
            "refused_from": self.refused_from,
        })
    }
}

/// Upper bounds, in seconds, of the buckets of [`Status::spf_buckets`]: 10 us to 100 ms.
pub const SPF_BOUNDS: [f64; 9] = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1];

#[derive(Debug, Default)]
struct Shared {
    per_iface: Vec<Mutex<Counters>>,
    overload: Vec<AtomicU64>,
    control: Mutex<Status>,
    unattached: AtomicU64,
    /// Per interface: datagrams refused for their source address, and the last such
    /// source (for the summary line).
    refused: Vec<AtomicU64>,
    last_refused: Vec<Mutex<Option<SocketAddr>>>,
}

/// One interface's transport, as [`LiveServer::start_links`] takes it.
#[derive(Debug)]
pub enum Link {
    /// A UDP socket, and its peer: fixed, or (`None`, on an SNI) learned from the
    /// subscriber.
    Udp(UdpSocket, Option<SocketAddr>),
    /// Messages exchanged with an adapter that carries them (over ATM: see the module
    /// doc).
    Frames(FrameLink),
}

/// An interface whose messages go through an adapter: each `Vec` one message (an L3_PDU
/// on an SNI or ICI, a frame of [`crate::msg`] on an ISSI), in both directions.
#[derive(Debug)]
pub struct FrameLink {
    /// The messages the server sends; it waits when the adapter is behind.
    pub out: mpsc::Sender<Vec<u8>>,
    /// The messages the server receives (an empty one is ignored).
    pub incoming: mpsc::Receiver<Vec<u8>>,
    /// The adapter's own address (over ATM, the host's address on the cell data plane),
    /// reported as the interface's address.
    pub local: SocketAddr,
}

/// The sending half of an interface.
#[derive(Debug)]
enum Tx {
    Udp(UdpSocket),
    Frames(mpsc::Sender<Vec<u8>>),
}

/// Sends one message on an interface; false when it has nowhere to go (an SNI no
/// subscriber has attached to).
async fn transmit(tx: &Tx, peer: &Mutex<Option<SocketAddr>>, bytes: &[u8]) -> bool {
    match tx {
        Tx::Udp(sock) => {
            let peer = *lock(peer);
            let Some(peer) = peer else {
                return false;
            };
            let _ = sock.send_to(bytes, peer).await;
            true
        }
        Tx::Frames(out) => {
            // A closed adapter loses the message, as a socket's send error does.
            let _ = out.send(bytes.to_vec()).await;
            true
        }
    }
}

/// A server running on the current tokio runtime; stops when dropped.
#[derive(Debug)]
pub struct LiveServer {
    id: ServerId,
    kinds: Vec<IfaceKind>,
    addrs: Vec<SocketAddr>,
    peers: Arc<Vec<Mutex<Option<SocketAddr>>>>,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl LiveServer {
    /// Binds the endpoints and starts the server. An endpoint over ATM is refused
    /// here: the cell data plane is not this crate's (`atmlab_lab::smds_atm::bind`
    /// starts such a server).
    pub async fn bind(
        cfg: ServerConfig,
        endpoints: &[Endpoint],
        queue: usize,
    ) -> Result<LiveServer, SmdsError> {
        let mut socks = Vec::new();
        for (i, e) in endpoints.iter().enumerate() {
            if e.atm.is_some() {
                return Err(SmdsError::Config(format!(
                    "interface {} runs over ATM, which needs the cell data plane: start the \
                     server with `atmlab smds serve` (atmlab_lab::smds_atm)",
                    i + 1
                )));
            }
            let s = UdpSocket::bind(e.bind).await.map_err(|err| {
                SmdsError::io(format!("interface {}: binding {}", i + 1, e.bind), err)
            })?;
            socks.push((s, e.peer));
        }
        LiveServer::start(cfg, socks, queue)
    }

    /// Starts the server on sockets already bound (one per interface, with its peer).
    pub fn start(
        cfg: ServerConfig,
        sockets: Vec<(UdpSocket, Option<SocketAddr>)>,
        queue: usize,
    ) -> Result<LiveServer, SmdsError> {
        let links = sockets.into_iter().map(|(s, p)| Link::Udp(s, p)).collect();
        LiveServer::start_links(cfg, links, queue)
    }

    /// Starts the server on its interfaces' transports (one per interface, in order).
    pub fn start_links(
        cfg: ServerConfig,
        links: Vec<Link>,
        queue: usize,
    ) -> Result<LiveServer, SmdsError> {
        if links.len() != cfg.local.interfaces.len() {
            return Err(SmdsError::Config(format!(
                "{} transports for {} interfaces",
                links.len(),
                cfg.local.interfaces.len()
            )));
        }
        let clock = LiveClock::start();
        let kinds: Vec<IfaceKind> = cfg.local.interfaces.iter().map(|i| i.kind()).collect();
        let id = cfg.local.id;
        let control = Control::new(cfg, clock.now())?;
        let n = links.len();
        let addrs = links
            .iter()
            .map(|l| match l {
                Link::Udp(s, _) => s.local_addr(),
                Link::Frames(f) => Ok(f.local),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SmdsError::io("reading a socket's address", e))?;
        let peers: Arc<Vec<Mutex<Option<SocketAddr>>>> = Arc::new(
            links
                .iter()
                .map(|l| match l {
                    Link::Udp(_, p) => Mutex::new(*p),
                    Link::Frames(_) => Mutex::new(None),
                })
                .collect(),
        );
        let mut incoming = Vec::with_capacity(n);
        let mut txs = Vec::with_capacity(n);
        for l in links {
            match l {
                Link::Udp(s, _) => {
                    incoming.push(None);
                    txs.push(Tx::Udp(s));
                }
                Link::Frames(f) => {
                    incoming.push(Some(f.incoming));
                    txs.push(Tx::Frames(f.out));
                }
            }
        }
        let socks: Arc<Vec<Tx>> = Arc::new(txs);
        let shared = Arc::new(Shared {
            per_iface: (0..n).map(|_| Mutex::new(Counters::default())).collect(),
            overload: (0..n).map(|_| AtomicU64::new(0)).collect(),
            control: Mutex::new(Status {
                id,
                refused_from: vec![0; n],
                ..Status::default()
            }),
            unattached: Default::default(),
            refused: (0..n).map(|_| AtomicU64::new(0)).collect(),
            last_refused: (0..n).map(|_| Mutex::new(None)).collect(),
        });
        let (fib_tx, fib_rx) = watch::channel(Arc::clone(control.fib()));
        let (ctrl_tx, ctrl_rx) = mpsc::channel::<(IfaceId, Vec<u8>)>(1024);
        let mut queues = Vec::new();
        let mut tasks = Vec::new();
        for ((i, &kind_), frames) in kinds.iter().enumerate().zip(incoming) {
            let (tx, rx) = mpsc::channel::<Vec<u8>>(queue.max(1));
            queues.push(tx.clone());
            tasks.push(tokio::spawn(reader(
                IfaceId(i as u16),
                kind_,
                frames,
                Arc::clone(&socks),
                Arc::clone(&peers),
                tx,
                ctrl_tx.clone(),
                Arc::clone(&shared),
            )));
            tasks.push(tokio::spawn(forwarder(
                IfaceId(i as u16),
                rx,
                fib_rx.clone(),
                Arc::clone(&socks),
                Arc::clone(&peers),
                Arc::clone(&shared),
            )));
        }
        tasks.push(tokio::spawn(control_task(
            control,
            clock,
            ctrl_rx,
            queues,
            fib_tx,
            Arc::clone(&socks),
            Arc::clone(&peers),
            Arc::clone(&shared),
        )));
        Ok(LiveServer {
            id,
            kinds,
            addrs,
            peers,
            shared,
            tasks,
        })
    }

    /// The server.
    pub fn id(&self) -> ServerId {
        self.id
    }

    /// The bound address of each interface.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Where interface `iface` sends: its fixed peer, or the subscriber it last heard from
    /// (`None` while no subscriber has attached).
    pub fn peer(&self, iface: IfaceId) -> Option<SocketAddr> {
        self.peers.get(iface.index()).and_then(|p| *lock(p))
    }

    /// Binds SNI `iface` to the subscriber at `subscriber`: the explicit attach (the
    /// control path of whoever runs the server), which may move an SNI already bound.
    /// False if `iface` is not an SNI.
    pub fn attach_subscriber(&self, iface: IfaceId, subscriber: SocketAddr) -> bool {
        if self.kinds.get(iface.index()) != Some(&IfaceKind::Sni) {
            return false;
        }
        *lock(&self.peers[iface.index()]) = Some(subscriber);
        tracing::info!(server = self.id.0, iface = iface.0, %subscriber, "subscriber attached");
        true
    }

    /// A snapshot of the counters and routing state.
    pub fn status(&self) -> Status {
        self.status_reader().status()
    }

    /// A cheap handle that reads [`LiveServer::status`] from elsewhere (the metrics),
    /// while the server runs.
    pub fn status_reader(&self) -> StatusReader {
        StatusReader {
            shared: self.shared.clone(),
        }
    }
}

/// Reads a running server's [`Status`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct StatusReader {
    shared: Arc<Shared>,
}

impl StatusReader {
    /// A snapshot of the counters and routing state.
    pub fn status(&self) -> Status {
        let mut s = lock(&self.shared.control).clone();
        for c in &self.shared.per_iface {
            s.counters.add(&lock(c));
        }
        for o in &self.shared.overload {
            let n = o.load(Relaxed);
            s.counters.received += n;
            s.counters.overload += n;
        }
        s.unattached = self.shared.unattached.load(Relaxed);
        s.refused_source = self
            .shared
            .refused
            .iter()
            .map(|r| r.load(Relaxed))
            .collect();
        s
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicked task cannot leave counters inconsistent enough to matter.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[allow(clippy::too_many_arguments)] // reason: the task's whole world, passed once at spawn
async fn reader(
    iface: IfaceId,
    kind_: IfaceKind,
    mut frames: Option<mpsc::Receiver<Vec<u8>>>,
    socks: Arc<Vec<Tx>>,
    peers: Arc<Vec<Mutex<Option<SocketAddr>>>>,
    queue: mpsc::Sender<Vec<u8>>,
    control: mpsc::Sender<(IfaceId, Vec<u8>)>,
    shared: Arc<Shared>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let data = match (&mut frames, &socks[iface.index()]) {
            (Some(rx), _) => match rx.recv().await {
                None => return,
                Some(d) if d.is_empty() => continue,
                Some(d) => d,
            },
            (None, Tx::Udp(sock)) => {
                let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                    // ICMP errors (a peer not yet up) surface here on some systems.
                    tokio::task::yield_now().await;
                    continue;
                };
                let admitted = {
                    let mut p = lock(&peers[iface.index()]);
                    match *p {
                        Some(peer) => peer == from,
                        // An SNI's first attach binds it to its subscriber.
                        None if kind_ == IfaceKind::Sni && n == 0 => {
                            *p = Some(from);
                            tracing::info!(iface = iface.0, subscriber = %from, "subscriber attached");
                            true
                        }
                        None => false,
                    }
                };
                if !admitted {
                    shared.refused[iface.index()].fetch_add(1, Relaxed);
                    *lock(&shared.last_refused[iface.index()]) = Some(from);
                    continue;
                }
                if kind_ == IfaceKind::Sni && n == 0 {
                    continue;
                }
                buf[..n].to_vec()
            }
            // A frame transport always comes with its receiver.
            (None, Tx::Frames(_)) => return,
        };
        if kind_ == IfaceKind::Issi && data.first() != Some(&kind::DATA) {
            let _ = control.send((iface, data)).await;
            continue;
        }
        if queue.try_send(data).is_err() {
            shared.overload[iface.index()].fetch_add(1, Relaxed);
        }
    }
}

async fn forwarder(
    iface: IfaceId,
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut fib: watch::Receiver<Arc<Fib>>,
    socks: Arc<Vec<Tx>>,
    peers: Arc<Vec<Mutex<Option<SocketAddr>>>>,
    shared: Arc<Shared>,
) {
    let mut fwd = Forwarder::new(Arc::clone(&fib.borrow_and_update()));
    let mut out = Vec::with_capacity(MAX_DATAGRAM);
    let mut last = std::time::Instant::now();
    while let Some(d) = rx.recv().await {
        if fib.has_changed().unwrap_or(false) {
            fwd.set_fib(Arc::clone(&fib.borrow_and_update()));
        }
        fwd.handle_datagram(iface, &d);
        while let Some(t) = fwd.poll_transmit() {
            t.write_into(&d, &mut out);
            let i = t.iface.index();
            if !transmit(&socks[i], &peers[i], &out).await {
                shared.unattached.fetch_add(1, Relaxed);
            }
        }
        if rx.is_empty() || last.elapsed() >= std::time::Duration::from_millis(50) {
            // This forwarder alone writes this slot.
            *lock(&shared.per_iface[iface.index()]) = *fwd.counters();
            last = std::time::Instant::now();
        }
    }
}

#[allow(clippy::too_many_arguments)] // reason: the task's whole world, passed once at spawn
async fn control_task(
    mut control: Control,
    clock: LiveClock,
    mut rx: mpsc::Receiver<(IfaceId, Vec<u8>)>,
    queues: Vec<mpsc::Sender<Vec<u8>>>,
    fib_tx: watch::Sender<Arc<Fib>>,
    socks: Arc<Vec<Tx>>,
    peers: Arc<Vec<Mutex<Option<SocketAddr>>>>,
    shared: Arc<Shared>,
) {
    let mut version = control.fib_version();
    let sample = std::time::Duration::from_millis(10);
    let mut next_sample = tokio::time::Instant::now() + sample;
    let mut next_report = tokio::time::Instant::now() + REFUSAL_LOG_INTERVAL;
    let n = shared.refused.len();
    let (mut last_source, mut last_from) = (vec![0u64; n], vec![0u64; n]);
    let (mut spf_seconds, mut spf_buckets) = (0.0, [0u64; SPF_BOUNDS.len() + 1]);
    loop {
        let wake =
            tokio::time::Instant::from_std(clock.to_std(control.poll_timeout())).min(next_sample);
        // A step that recomputed routes is timed whole (the core has no clock of its
        // own): the frame or timer that changed the database, shortest paths, the FIB.
        let (runs, began) = (control.spf_runs(), std::time::Instant::now());
        tokio::select! {
            m = rx.recv() => match m {
                Some((iface, data)) => control.handle_control(clock.now(), iface, &data),
                None => return,
            },
            _ = tokio::time::sleep_until(wake) => {
                let now = clock.now();
                if control.poll_timeout() <= now {
                    control.handle_timeout(now);
                }
                if tokio::time::Instant::now() >= next_sample {
                    next_sample = tokio::time::Instant::now() + sample;
                    // The fullest input queue speaks for the server.
                    let (occ, cap) = queues
                        .iter()
                        .map(|q| (q.max_capacity() - q.capacity(), q.max_capacity()))
                        .max_by(|a, b| {
                            (a.0 as f64 / a.1 as f64).total_cmp(&(b.0 as f64 / b.1 as f64))
                        })
                        .unwrap_or((0, 1));
                    control.handle_occupancy(now, occ, cap);
                }
                if tokio::time::Instant::now() >= next_report {
                    next_report = tokio::time::Instant::now() + REFUSAL_LOG_INTERVAL;
                    report_refusals(&control, &shared, &mut last_source, &mut last_from);
                }
            }
        }
        if control.spf_runs() != runs {
            let took = began.elapsed().as_secs_f64();
            spf_seconds += took;
            spf_buckets[SPF_BOUNDS.partition_point(|b| *b < took)] += 1;
        }
        while let Some(t) = control.poll_transmit() {
            if let Payload::Owned(bytes) = &t.payload {
                let i = t.iface.index();
                transmit(&socks[i], &peers[i], bytes).await;
            }
        }
        if control.fib_version() != version {
            version = control.fib_version();
            let _ = fib_tx.send(Arc::clone(control.fib()));
        }
        let mut st = lock(&shared.control);
        let ls = control.link_state();
        st.control_malformed = control.malformed();
        st.neighbours = ls.neighbours();
        st.lsas = ls.database().len();
        st.reachable = control.fib().route_count();
        st.next_hops = control.fib().next_hops();
        st.congested = control.cmp().congested();
        st.spf_runs = control.spf_runs();
        st.spf_seconds = spf_seconds;
        st.spf_buckets = spf_buckets;
        st.cmp_episodes = control.cmp().episodes();
        st.cmp_cut = control.cmp().cut_asked();
        st.cmp_messages = control.cmp().messages();
        st.refused_from.clear();
        st.refused_from.extend_from_slice(control.refused_from());
    }
}

/// One WARN line summing up what the interfaces refused since the last one (nothing
/// when nothing was).
fn report_refusals(
    control: &Control,
    shared: &Shared,
    last_source: &mut [u64],
    last_from: &mut [u64],
) {
    let mut parts = Vec::new();
    let mut total = 0;
    for (i, (src, from)) in last_source.iter_mut().zip(last_from.iter_mut()).enumerate() {
        let s_now = shared.refused[i].load(Relaxed);
        let f_now = control.refused_from().get(i).copied().unwrap_or(0);
        let (ds, df) = (s_now.saturating_sub(*src), f_now.saturating_sub(*from));
        (*src, *from) = (s_now, f_now);
        if ds + df > 0 {
            total += ds + df;
            let last = *lock(&shared.last_refused[i]);
            parts.push(format!(
                "interface {}: {ds} from a stranger (last {}), {df} naming another server",
                i + 1,
                last.map_or_else(|| "-".to_string(), |a| a.to_string())
            ));
        }
    }
    if total > 0 {
        tracing::warn!(
            server = control.id().0,
            refused = total,
            "SMDS: refused {total} datagrams in the last {:?}: {}",
            REFUSAL_LOG_INTERVAL,
            parts.join("; ")
        );
    }
}

/// A subscriber: a UDP socket attached to one SNI.
#[derive(Debug)]
pub struct Subscriber {
    sock: UdpSocket,
    sni: SocketAddr,
}

impl Subscriber {
    /// Binds a socket on `bind` and attaches to the SNI at `sni`.
    pub async fn attach(bind: SocketAddr, sni: SocketAddr) -> Result<Subscriber, SmdsError> {
        let sock = UdpSocket::bind(bind)
            .await
            .map_err(|e| SmdsError::io(format!("binding {bind}"), e))?;
        sock.send_to(&[], sni)
            .await
            .map_err(|e| SmdsError::io(format!("attaching to {sni}"), e))?;
        Ok(Subscriber { sock, sni })
    }

    /// The subscriber's own address (what its SNI learns from the attach).
    pub fn local_addr(&self) -> Result<SocketAddr, SmdsError> {
        self.sock
            .local_addr()
            .map_err(|e| SmdsError::io("reading the subscriber's address", e))
    }

    /// Attaches again (if the server restarted or the first datagram was lost).
    pub async fn reattach(&self) -> Result<(), SmdsError> {
        self.sock
            .send_to(&[], self.sni)
            .await
            .map(|_| ())
            .map_err(|e| SmdsError::io(format!("attaching to {}", self.sni), e))
    }

    /// Sends one L3_PDU.
    pub async fn send(&self, pdu: &[u8]) -> Result<(), SmdsError> {
        self.sock
            .send_to(pdu, self.sni)
            .await
            .map(|_| ())
            .map_err(|e| SmdsError::io(format!("sending to {}", self.sni), e))
    }

    /// Receives one datagram into `buf`; its length.
    pub async fn recv(&self, buf: &mut [u8]) -> Result<usize, SmdsError> {
        let (n, _) = self
            .sock
            .recv_from(buf)
            .await
            .map_err(|e| SmdsError::io("receiving", e))?;
        Ok(n)
    }
}

/// What `smds recv` prints for one PDU: its addresses and Info length, or why it did not
/// decode.
pub fn describe(pdu: &[u8]) -> Result<(E164Address, E164Address, &[u8]), SmdsError> {
    let v = atmlab_wire::L3Pdu::new_checked(pdu)?;
    let r = atmlab_wire::L3PduRepr::parse(&v)?;
    Ok((r.source, r.destination, r.info))
}

/// A network of servers in this process on loopback (`atmlab smds net up`).
#[derive(Debug)]
pub struct LiveNetwork {
    /// The servers, by name, in file order.
    pub servers: Vec<(String, LiveServer)>,
}

impl LiveNetwork {
    /// Binds every interface on 127.0.0.1 (system-chosen ports), joins the links, and
    /// starts every server.
    pub async fn up(
        topo: &crate::config::TopologyFile,
        queue: usize,
    ) -> Result<LiveNetwork, SmdsError> {
        let mut socks: Vec<Vec<(UdpSocket, Option<SocketAddr>)>> = Vec::new();
        for (name, cfg) in &topo.servers {
            let mut v = Vec::new();
            for i in 0..cfg.local.interfaces.len() {
                let s = UdpSocket::bind("127.0.0.1:0").await.map_err(|e| {
                    SmdsError::io(format!("server {name}: binding interface {}", i + 1), e)
                })?;
                v.push((s, None));
            }
            socks.push(v);
        }
        for &((sa, ia), (sb, ib)) in &topo.links {
            let addr_a = socks[sa][usize::from(ia)]
                .0
                .local_addr()
                .map_err(|e| SmdsError::io("reading a socket's address", e))?;
            let addr_b = socks[sb][usize::from(ib)]
                .0
                .local_addr()
                .map_err(|e| SmdsError::io("reading a socket's address", e))?;
            socks[sa][usize::from(ia)].1 = Some(addr_b);
            socks[sb][usize::from(ib)].1 = Some(addr_a);
        }
        let mut servers = Vec::new();
        for ((name, cfg), s) in topo.servers.iter().zip(socks) {
            servers.push((name.clone(), LiveServer::start(cfg.clone(), s, queue)?));
        }
        Ok(LiveNetwork { servers })
    }

    /// The network as JSON: per server its id, and per interface its kind, address and
    /// subscriber addresses (what `net up` writes to `net.json`).
    pub fn to_json(&self, topo: &crate::config::TopologyFile) -> serde_json::Value {
        let servers: Vec<serde_json::Value> = self
            .servers
            .iter()
            .zip(&topo.servers)
            .map(|((name, s), (_, cfg))| {
                let ifs: Vec<serde_json::Value> = cfg
                    .local
                    .interfaces
                    .iter()
                    .zip(s.addrs())
                    .map(|(ifc, a)| {
                        let addresses: Vec<String> = match ifc {
                            crate::fib::InterfaceConfig::Sni(c) => {
                                c.addresses.iter().map(|x| x.to_string()).collect()
                            }
                            _ => Vec::new(),
                        };
                        serde_json::json!({
                            "kind": ifc.kind().to_string(),
                            "addr": a.to_string(),
                            "addresses": addresses,
                        })
                    })
                    .collect();
                serde_json::json!({ "name": name, "id": s.id().0, "interfaces": ifs })
            })
            .collect();
        serde_json::json!({ "servers": servers })
    }

    /// True once every server has formed all its adjacencies and holds an LSA of every
    /// server.
    pub fn converged(&self) -> bool {
        let n = self.servers.len();
        self.servers.iter().all(|(_, s)| {
            let st = s.status();
            st.lsas == n && st.neighbours.iter().all(|(_, _, full)| *full)
        })
    }
}
