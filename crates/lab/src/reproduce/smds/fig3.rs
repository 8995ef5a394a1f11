//! Fig. 3 of paper 002 (§4.2), measured: the flow rate of user data through two SMDS
//! servers against the PDU size, over loopback UDP ([`flow_rates`]) and over the atmlab
//! data plane, every hop AAL3/4 cells through atmlab switches ([`flow_rates_atm`]), each
//! sender at most a window of PDUs ahead of its sink.

use super::*;

/// Fig. 3 over loopback: two servers, one ISSI, a sender at most `window` PDUs ahead.
pub fn flow_rates(
    sizes: &[usize],
    run: StdDuration,
    window: u64,
) -> Result<Vec<FlowPoint>, LabError> {
    let topo = fig3_servers()?;
    runtime()?.block_on(async {
        let net = LiveNetwork::up(&topo, 64).await?;
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        while !net.converged() {
            if StdInstant::now() > deadline {
                return Err(LabError::run(
                    "the smds reproduction",
                    "the two servers did not converge",
                ));
            }
            tokio::time::sleep(StdDuration::from_millis(10)).await;
        }
        let any = "127.0.0.1:0".parse().expect("literal");
        let tx = Subscriber::attach(any, net.servers[0].1.addrs()[0]).await?;
        let rx = Arc::new(Subscriber::attach(any, net.servers[1].1.addrs()[0]).await?);
        tokio::time::sleep(StdDuration::from_millis(50)).await;
        let sink = Arc::new(Sink::default());
        let reader = {
            let (rx, sink) = (Arc::clone(&rx), Arc::clone(&sink));
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                while let Ok(n) = rx.recv(&mut buf).await {
                    sink.arrived(n);
                }
            })
        };
        let points = windowed(sizes, run, window, &mut FlowSender::Udp(&tx), &sink).await;
        reader.abort();
        points
    })
}

/// Fig. 3's two servers, one subscriber each, one ISSI (SNIs first, then the ISSI).
fn fig3_servers() -> Result<TopologyFile, LabError> {
    Ok(TopologyFile::parse(
        "hello_ms = 50\n[[server]]\nname = \"a\"\nsubscribers = [\"I:15550101\"]\n\
         [[server]]\nname = \"b\"\nsubscribers = [\"I:15550201\"]\n[[link]]\na = \"a\"\nb = \"b\"\n",
        "fig3",
    )?)
}

fn runtime() -> Result<tokio::runtime::Runtime, LabError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LabError::io("starting a runtime", e))
}

/// What the receiving subscriber counted.
#[derive(Debug, Default)]
struct Sink {
    got: AtomicU64,
    octets: AtomicU64,
    notify: tokio::sync::Notify,
}

impl Sink {
    /// An L3_PDU of `n` octets arrived (its Info: `n` - 40, no PAD at our sizes).
    fn arrived(&self, n: usize) {
        self.octets
            .fetch_add(n.saturating_sub(40) as u64, Ordering::Relaxed);
        self.got.fetch_add(1, Ordering::Relaxed);
        self.notify.notify_one();
    }
}

/// The sending subscriber of Fig. 3: on loopback UDP, or over ATM.
enum FlowSender<'a> {
    Udp(&'a Subscriber),
    Atm(&'a mut AtmSubscriber),
}

impl FlowSender<'_> {
    async fn send(&mut self, pdu: &[u8]) -> Result<(), LabError> {
        match self {
            FlowSender::Udp(s) => Ok(s.send(pdu).await?),
            FlowSender::Atm(s) => s.send(pdu).await.map(|_| ()),
        }
    }
}

/// Fig. 3's measurement, one PDU size after another: the sender at most `window` PDUs
/// ahead of what `sink` received, 100 ms of warm-up, then `run` measured.
async fn windowed(
    sizes: &[usize],
    run: StdDuration,
    window: u64,
    tx: &mut FlowSender<'_>,
    sink: &Sink,
) -> Result<Vec<FlowPoint>, LabError> {
    let (got, octets, notify) = (&sink.got, &sink.octets, &sink.notify);
    let mut points = Vec::new();
    for &info in sizes {
        let body = vec![0x5au8; info];
        let pdu = l3_pdu(
            "I:15550101".parse().expect("literal"),
            "I:15550201".parse().expect("literal"),
            &body,
            1,
        )?;
        let mut sent = 0u64;
        let mut lost = 0u64;
        let base_got = got.load(Ordering::Relaxed);
        let mut measure_from: Option<(StdInstant, u64, u64)> = None;
        let warm = StdDuration::from_millis(100);
        let t0 = StdInstant::now();
        loop {
            let elapsed = t0.elapsed();
            if measure_from.is_none() && elapsed >= warm {
                measure_from = Some((
                    StdInstant::now(),
                    got.load(Ordering::Relaxed),
                    octets.load(Ordering::Relaxed),
                ));
            }
            if elapsed >= warm + run {
                break;
            }
            let delivered = got.load(Ordering::Relaxed) - base_got;
            // A PDU given up as lost may still arrive, and so may a previous size's
            // after this one began: neither may take the count in flight below zero
            // (it overflowed here, once, on a loaded machine).
            let in_flight = sent.saturating_sub(lost).saturating_sub(delivered);
            if in_flight < window {
                tx.send(&pdu).await?;
                sent += 1;
                continue;
            }
            // Window full: wait for a delivery, or give up on the outstanding ones.
            if tokio::time::timeout(StdDuration::from_millis(20), notify.notified())
                .await
                .is_err()
            {
                let delivered = got.load(Ordering::Relaxed) - base_got;
                lost += sent.saturating_sub(lost).saturating_sub(delivered);
            }
        }
        // Late arrivals of PDUs counted lost are not lost.
        let lost = lost.min(sent.saturating_sub(got.load(Ordering::Relaxed) - base_got));
        let (m0, g0, o0) = measure_from.unwrap_or((t0, base_got, 0));
        let secs = m0.elapsed().as_secs_f64();
        let g = got.load(Ordering::Relaxed) - g0;
        let o = octets.load(Ordering::Relaxed) - o0;
        points.push(FlowPoint {
            info,
            pdus_per_s: g as f64 / secs,
            // Info octets delivered (every size here is a multiple of 4: no PAD).
            mbps: o as f64 * 8.0 / secs / 1e6,
            lost,
        });
        // Let the last PDUs drain before the next size.
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
    Ok(points)
}

/// Fig. 3 over ATM: the topology. Two switches joined by one trunk, the six ends of the
/// three hops on host ports: subscriber u1 and server a's SNI on s1, a's ISSI on s1 and
/// b's on s2 (the ISSI crosses the trunk), b's SNI and subscriber u2 on s2. Every link at
/// 155.52 Mb/s, the SBA-200's line rate (the paper's "150 Mbps").
pub const FIG3_ATM_TOPOLOGY: &str = r#"
name = "smds-fig3-atm"
[defaults]
link_rate = "155.52 Mb/s"
buffer_cells = 4096
[[switch]]
name = "s1"
ports = 4
[[switch]]
name = "s2"
ports = 4
[[link]]
a = "s1:3"
b = "s2:3"
[[host]]
name = "u1"
at = "s1:0"
[[host]]
name = "a-sni"
at = "s1:1"
[[host]]
name = "a-issi"
at = "s1:2"
[[host]]
name = "b-issi"
at = "s2:2"
[[host]]
name = "b-sni"
at = "s2:1"
[[host]]
name = "u2"
at = "s2:0"
"#;

/// The link rate of [`FIG3_ATM_TOPOLOGY`], bits/s.
pub const ATM_LINK_RATE: f64 = 155.52e6;

/// What the ATM hops counted over a Fig. 3 run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AtmCounts {
    /// Cells the five senders (u1, a's SNI and ISSI, b's ISSI and SNI) sent.
    pub cells_sent: u64,
    /// Messages the receivers' AAL3/4 reassembly discarded (a cell lost or damaged).
    pub lost: u64,
}

/// Fig. 3 over ATM: the same two servers, every hop (subscriber to SNI, the ISSI, SNI
/// to subscriber) a pair of connections through atmlab switches set up by a manager,
/// each message AAL3/4 cells paced at the link rate; the same window and sizes as
/// [`flow_rates`]. The lab's state (net.json) goes to a directory under `scratch`.
pub fn flow_rates_atm(
    sizes: &[usize],
    run: StdDuration,
    window: u64,
    scratch: &FsPath,
) -> Result<(Vec<FlowPoint>, AtmCounts), LabError> {
    let servers = fig3_servers()?;
    let topology = atmlab_control::net::Topology::parse(FIG3_ATM_TOPOLOGY, "Fig. 3 over ATM")?;
    let rate = atmlab_core::units::BitRate(ATM_LINK_RATE);
    runtime()?.block_on(async {
        let spec = crate::launch::LabSpec::in_data_dir(topology, &scratch.join("fig3-atm"), true);
        let lab = crate::launch::Lab::start(spec, &mut |_| {}).await?;
        lab.within(async |lab| {
            let cm = atmlab_control::cm::live::start(
                atmlab_control::cm::core::CmConfig::new(atmlab_control::cm::core::CmKind::Xbind),
                lab.clients.clone(),
                Box::new(lab.router()),
            )
            .map_err(|e| LabError::run("Fig. 3 over ATM", e.message))?;
            let r = fig3_atm_on(lab, &cm, &servers, rate, sizes, run, window).await;
            cm.shutdown().await;
            r
        })
        .await
    })
}

async fn fig3_atm_on(
    lab: &crate::launch::Lab,
    cm: &atmlab_control::cm::live::CmHandle,
    servers: &TopologyFile,
    rate: atmlab_core::units::BitRate,
    sizes: &[usize],
    run: StdDuration,
    window: u64,
) -> Result<(Vec<FlowPoint>, AtmCounts), LabError> {
    // CBR reservations well inside the links (ours: the paper gives none); the live
    // data plane does not police, the hosts pace at the link rate.
    let pcr = 100_000.0;
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let mut ends = Vec::new();
    for (x, y) in [("u1", "a-sni"), ("a-issi", "b-issi"), ("b-sni", "u2")] {
        let (vx, vy) = smds_atm::duplex(cm, x, y, pcr).await?;
        ends.push(smds_atm::attachment(&lab.net, x, vx, rate)?);
        ends.push(smds_atm::attachment(&lab.net, y, vy, rate)?);
    }
    let (u1, a_sni, a_issi, b_issi, b_sni, u2) =
        (ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]);
    // Each interface's host port is bound to it through the control path, in process
    // (host ports take no host by a first datagram).
    let bind = |host: &str, at: std::net::SocketAddr| {
        lab.net
            .attach_host(host, at)
            .map_err(|e| LabError::run("Fig. 3 over ATM", format!("binding {host}: {e}")))
    };
    let mut adapters = Vec::new();
    let mut start =
        async |cfg: &atmlab_smds::server::ServerConfig,
               (sni_host, sni): (&str, atmlab_smds::config::AtmAttach),
               (issi_host, issi): (&str, atmlab_smds::config::AtmAttach)| {
            let (l1, a1) = smds_atm::attach(sni, any).await?;
            let (l2, a2) = smds_atm::attach(issi, any).await?;
            bind(sni_host, a1.local)?;
            bind(issi_host, a2.local)?;
            adapters.push(a1);
            adapters.push(a2);
            Ok::<_, LabError>(atmlab_smds::live::LiveServer::start_links(
                cfg.clone(),
                vec![
                    atmlab_smds::live::Link::Frames(l1),
                    atmlab_smds::live::Link::Frames(l2),
                ],
                64,
            )?)
        };
    let sa = start(&servers.servers[0].1, ("a-sni", a_sni), ("a-issi", a_issi)).await?;
    let sb = start(&servers.servers[1].1, ("b-sni", b_sni), ("b-issi", b_issi)).await?;
    let deadline = StdInstant::now() + StdDuration::from_secs(10);
    while ![&sa, &sb].iter().all(|s| {
        let st = s.status();
        st.lsas == 2 && st.neighbours.iter().all(|n| n.2)
    }) {
        if StdInstant::now() > deadline {
            return Err(LabError::run(
                "Fig. 3 over ATM",
                "the two servers did not converge over their ATM ISSI",
            ));
        }
        tokio::time::sleep(StdDuration::from_millis(10)).await;
    }
    let mut tx = AtmSubscriber::attach(u1).await?;
    let mut rx = AtmSubscriber::attach(u2).await?;
    bind("u1", tx.local_addr()?)?;
    bind("u2", rx.local_addr()?)?;
    let sink = Arc::new(Sink::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (sink, stop) = (Arc::clone(&sink), Arc::clone(&stop));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match rx.recv(StdDuration::from_millis(50)).await {
                    Ok(Some(pdu)) => sink.arrived(pdu.len()),
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
            rx
        })
    };
    let points = windowed(sizes, run, window, &mut FlowSender::Atm(&mut tx), &sink).await;
    stop.store(true, Ordering::Relaxed);
    let rx = reader
        .await
        .map_err(|e| LabError::run("Fig. 3 over ATM", format!("the receiver: {e}")))?;
    let mut counts = AtmCounts {
        cells_sent: tx.cells_sent(),
        lost: rx.counters().lost,
    };
    for a in &adapters {
        counts.cells_sent += a.stats.cells_sent.load(Ordering::Relaxed);
        counts.lost += a.stats.aal34().lost;
    }
    drop((sa, sb));
    Ok((points?, counts))
}
