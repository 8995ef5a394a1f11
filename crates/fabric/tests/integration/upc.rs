//! Security (issue 24, item 5): usage parameter control. Every connection is policed at
//! ingress by the GCRA of `atmlab_core::gcra` on its contract (PCR with CDVT; SCR and
//! MBS for VBR), and a non-conforming cell is tagged CLP = 1 or discarded as the switch
//! is configured; each is counted on its connection and its input port. Before, a
//! connection admitted at any rate carried whatever its source sent.
//!
//! The core's verdicts are checked against GCRA arithmetic done by hand; the live tests
//! send a stream far above its PCR through a real switch server on loopback.

use std::net::SocketAddr;
use std::time::Duration as StdDuration;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::host::HostPort;
use atmlab_fabric::live::server::{self, RunningSwitch, ServerFile};
use atmlab_fabric::*;
use atmlab_wire::cell::{CELL_LEN, Cell, CellHeader, HeaderFormat, Pti};

use crate::common::{self, any_addr, grpc_client};

fn cell(vci: u16) -> [u8; CELL_LEN] {
    let mut buf = [0u8; CELL_LEN];
    CellHeader::uni(0, vci, Pti::user(false))
        .emit(&mut Cell::new_unchecked(&mut buf[..]))
        .unwrap();
    buf
}

fn ms(x: f64) -> Instant {
    Instant::from_picos((x * 1e9) as u64)
}

fn two_port_switch(policing: Policing, traffic: TrafficDescriptor) -> (Switch, u64) {
    let mut s = Switch::new(&SwitchConfig::uniform("s1", 2, BitRate(155.52e6))).unwrap();
    s.set_policing(policing);
    let (id, _) = s
        .commit(&Commit {
            traffic,
            ..common::commit(0, VcId::new(0, 100), 1, VcId::new(0, 200), 1000.0)
        })
        .unwrap();
    (s, id)
}

#[test]
fn the_core_polices_by_the_gcra_of_the_contract() {
    // CBR, PCR 1,000 cells/s (T = 1 ms), CDVT 0: cells 0.5 ms apart alternate C, NC
    // (TAT after a conforming cell at t is t + 1 ms; a cell at t + 0.5 ms is early).
    let cbr = TrafficDescriptor::cbr(CellRate(1000.0));
    let (mut s, id) = two_port_switch(Policing::Discard, cbr);
    let fates: Vec<CellFate> = (0..6)
        .map(|k| s.handle_cell_at(PortId(0), &mut cell(100), ms(0.5 * k as f64)))
        .collect();
    let policed: Vec<bool> = fates.iter().map(|f| *f == CellFate::Policed).collect();
    assert_eq!(policed, [false, true, false, true, false, true]);
    assert_eq!(s.policed(id), Some(3));
    let port = s.port_status(PortId(0)).unwrap().counters;
    assert_eq!((port.cells_in, port.cells_policed), (6, 3));
    assert_eq!(s.queue_len(PortId(1)), 3, "the conforming cells went on");
    // Without a time, nothing is policed (the simulator's path).
    assert!(matches!(
        s.handle_cell(PortId(0), &mut cell(100)),
        CellFate::Switched { queued: 1, .. }
    ));

    // Tagging: the same cells all go on, the non-conforming ones with CLP = 1.
    let (mut s, id) = two_port_switch(Policing::Tag, cbr);
    for k in 0..6 {
        s.handle_cell_at(PortId(0), &mut cell(100), ms(0.5 * k as f64));
    }
    let clp: Vec<bool> = (0..6)
        .map(|_| {
            let c = s.poll_transmit(PortId(1)).unwrap();
            let h =
                CellHeader::parse(&Cell::new_checked(&c[..]).unwrap(), HeaderFormat::Uni).unwrap();
            h.clp
        })
        .collect();
    assert_eq!(clp, [false, true, false, true, false, true]);
    assert_eq!(s.policed(id), Some(3));

    // Off: nothing policed, whatever the times.
    let (mut s, id) = two_port_switch(Policing::Off, cbr);
    for k in 0..6 {
        s.handle_cell_at(PortId(0), &mut cell(100), ms(0.01 * k as f64));
    }
    assert_eq!((s.policed(id), s.queue_len(PortId(1))), (Some(0), 6));
}

#[test]
fn vbr_is_policed_on_its_sustainable_rate_and_burst_and_modify_repolices() {
    // rt-VBR: PCR 10,000 (T = 0.1 ms), SCR 1,000 (Ts = 1 ms), MBS 5, CDVT 0. At the
    // peak rate, BT = (5 - 1)(1 - 0.1) ms = 3.6 ms lets exactly 5 cells through.
    let vbr = TrafficDescriptor {
        class: ServiceClass::RtVbr,
        pcr: CellRate(10_000.0),
        scr: CellRate(1000.0),
        mbs: 5,
        cdvt_ps: 0,
    };
    let (mut s, id) = two_port_switch(Policing::Discard, vbr);
    let burst: Vec<bool> = (0..8)
        .map(|k| {
            s.handle_cell_at(PortId(0), &mut cell(100), ms(0.1 * k as f64)) != CellFate::Policed
        })
        .collect();
    assert_eq!(burst, [true, true, true, true, true, false, false, false]);
    // Faster than the PCR is refused even with SCR credit left: after 10 ms of silence
    // the SCR bucket is empty, but two cells 0.05 ms apart break T = 0.1 ms.
    assert!(s.handle_cell_at(PortId(0), &mut cell(100), ms(20.0)) != CellFate::Policed);
    assert_eq!(
        s.handle_cell_at(PortId(0), &mut cell(100), ms(20.05)),
        CellFate::Policed
    );
    assert_eq!(s.policed(id), Some(4));
    // Modify to CBR at 100,000 cells/s: the same spacing now conforms.
    s.modify(&Modify {
        connection: id,
        traffic: TrafficDescriptor::cbr(CellRate(100_000.0)),
        clr: 0.0,
    })
    .unwrap();
    for k in 0..5 {
        let t = ms(30.0 + 0.05 * k as f64);
        assert!(s.handle_cell_at(PortId(0), &mut cell(100), t) != CellFate::Policed);
    }
    assert_eq!(s.policed(id), Some(4));
    // UBR is not policed.
    let ubr = TrafficDescriptor {
        class: ServiceClass::Ubr,
        ..TrafficDescriptor::cbr(CellRate(10.0))
    };
    let (mut s, id) = two_port_switch(Policing::Discard, ubr);
    for k in 0..10 {
        s.handle_cell_at(PortId(0), &mut cell(100), ms(0.001 * k as f64));
    }
    assert_eq!(s.policed(id), Some(0));
}

fn server_file(police: Option<&str>) -> ServerFile {
    let police = police.map_or(String::new(), |p| format!("police = \"{p}\"\n"));
    ServerFile::parse(
        &format!("name = \"s1\"\n{police}[[ports]]\nid = 0\n[[ports]]\nid = 1\n"),
        "upc.toml",
    )
    .unwrap()
}

fn udp(s: &RunningSwitch, port: u16) -> SocketAddr {
    s.ports.iter().find(|(p, _)| p.0 == port).unwrap().1
}

/// A connection 0:0/`vci_in` -> 1:0/`vci_out` at `pcr` cells/s with CDVT `cdvt`.
async fn connect(s: &RunningSwitch, vci_in: u16, vci_out: u16, pcr: f64, cdvt: Duration) -> u64 {
    let traffic = TrafficDescriptor {
        cdvt_ps: cdvt.as_picos(),
        ..TrafficDescriptor::cbr(CellRate(pcr))
    };
    let r = s
        .switch
        .execute_now(
            &[Command::Commit(Commit {
                traffic,
                ..common::commit(0, VcId::new(0, vci_in), 1, VcId::new(0, vci_out), pcr)
            })],
            Atomicity::AllOrNothing,
        )
        .unwrap();
    match &r[0] {
        Ok(Reply::Committed { connection, .. }) => *connection,
        other => panic!("{other:?}"),
    }
}

/// What the receiver on port 1 got: cells per VCI, and how many of them had CLP = 1.
#[derive(Debug, Default)]
struct Got {
    fast: u64,
    fast_tagged: u64,
    slow: u64,
    slow_tagged: u64,
}

/// Sends 800 cells on each connection (0/100, policed at 100 cells/s; 0/101, far under
/// its PCR) at 50 Mb/s, and counts what arrives on port 1 (0/200 and 0/201).
async fn run(s: &RunningSwitch) -> (Got, f64) {
    let rx = tokio::net::UdpSocket::bind(any_addr()).await.unwrap();
    assert!(s.attach_host(PortId(1), rx.local_addr().unwrap()));
    let mut a = HostPort::attach(any_addr(), udp(s, 0), BitRate(50e6))
        .await
        .unwrap();
    let a_addr = a.local_addr().unwrap();
    assert!(s.attach_host(PortId(0), a_addr));
    // 40-cell AAL5 frames: 48 x 40 - 8 octets of payload.
    let frame = vec![0x3cu8; 48 * 40 - 8];
    let started = std::time::Instant::now();
    for _ in 0..20 {
        a.send_frame(VcId::new(0, 100), &frame).await.unwrap();
        a.send_frame(VcId::new(0, 101), &frame).await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    common::eventually("every cell has entered", || {
        s.switch.describe_now().ports[0].counters.cells_in == 1600
    })
    .await;
    let out = s.switch.describe_now().ports[1].counters.cells_out;
    let mut got = Got::default();
    let mut buf = vec![0u8; 65_536];
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(10);
    while got.fast + got.slow < out {
        let n = tokio::time::timeout_at(deadline, rx.recv(&mut buf))
            .await
            .expect("the cells the switch sent arrive")
            .unwrap();
        for c in buf[..n].chunks_exact(CELL_LEN) {
            let h = CellHeader::parse(&Cell::new_checked(c).unwrap(), HeaderFormat::Uni).unwrap();
            let (count, tagged) = match h.vci {
                200 => (&mut got.fast, &mut got.fast_tagged),
                201 => (&mut got.slow, &mut got.slow_tagged),
                v => panic!("a cell on VCI {v}"),
            };
            *count += 1;
            *tagged += u64::from(h.clp);
        }
    }
    (got, elapsed)
}

async fn statistics(s: &RunningSwitch) -> atmlab_rpc::v1::StatisticsReply {
    grpc_client(s.grpc_addr, None)
        .await
        .raw()
        .statistics(atmlab_rpc::v1::StatisticsRequest::default())
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_above_its_pcr_is_discarded_and_counted() {
    let s = server::start(&server_file(Some("discard")), None)
        .await
        .unwrap();
    let fast = connect(&s, 100, 200, 100.0, Duration::ZERO).await;
    // 50 Mb/s is 117,925 cells/s: under 300,000, with 10 ms of tolerance for the
    // sender's bursts.
    let slow = connect(&s, 101, 201, 300_000.0, Duration::from_millis(10)).await;
    let (got, elapsed) = run(&s).await;
    let policed = s.switch.with_switch(|sw| sw.policed(fast)).unwrap();
    // GCRA(10 ms, 0) lets at most one cell per 10 ms through, plus the first.
    let bound = 2 + (elapsed * 100.0) as u64;
    assert!(
        got.fast <= bound,
        "{got:?}: more than {bound} cells in {elapsed} s"
    );
    assert_eq!(got.fast + policed, 800, "every cell forwarded or policed");
    assert_eq!((got.slow, got.slow_tagged, got.fast_tagged), (800, 0, 0));
    assert_eq!(s.switch.with_switch(|sw| sw.policed(slow)), Some(0));
    let st = statistics(&s).await;
    let p0 = st.ports.iter().find(|p| p.port == 0).unwrap();
    assert_eq!(p0.cells_policed, policed);
    let c = st
        .connections
        .iter()
        .find(|c| c.connection == fast)
        .unwrap();
    assert_eq!(c.cells_policed, policed);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_stream_above_its_pcr_is_tagged() {
    let s = server::start(&server_file(None), None).await.unwrap();
    let fast = connect(&s, 100, 200, 100.0, Duration::ZERO).await;
    let _slow = connect(&s, 101, 201, 300_000.0, Duration::from_millis(10)).await;
    let (got, elapsed) = run(&s).await;
    let policed = s.switch.with_switch(|sw| sw.policed(fast)).unwrap();
    // Every cell goes on; those beyond the contract carry CLP = 1.
    assert_eq!((got.fast, got.slow, got.slow_tagged), (800, 800, 0));
    assert_eq!(got.fast_tagged, policed);
    assert!(800 - policed <= 2 + (elapsed * 100.0) as u64, "{got:?}");
    s.stop().await;
}

#[test]
fn the_police_key_is_checked() {
    let f = ServerFile::parse(
        "name = \"s1\"\npolice = \"maybe\"\n[[ports]]\nid = 0\n",
        "t",
    )
    .unwrap();
    let e = f.policing().unwrap_err().to_string();
    assert!(e.contains("police") && e.contains("maybe"), "{e}");
    assert_eq!(server_file(None).policing().unwrap(), Policing::Tag);
    assert_eq!(server_file(Some("off")).policing().unwrap(), Policing::Off);
}
