//! The switch core: two-phase allocation, admission, refusals that change nothing,
//! all-or-nothing batches, and the per-cell switching function.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use atmlab_fabric::*;
use atmlab_wire::cell::{CELL_LEN, Cell, CellHeader, HeaderFormat, Pti};
use proptest::prelude::*;

use crate::common::{commit, config3, oc3, reserve};

fn switch3() -> Switch {
    Switch::new(&config3()).unwrap()
}

/// Everything a refused request must leave unchanged (counters aside).
#[derive(Debug, PartialEq)]
struct Fingerprint(
    Vec<(u16, u64, u32, u32, u32)>,
    Vec<Connection>,
    Vec<Reservation>,
);

fn fp(s: &Switch) -> Fingerprint {
    Fingerprint(
        s.ports()
            .iter()
            .map(|p| {
                (
                    p.config.id.0,
                    (p.allocated * 1e6).round() as u64,
                    p.buffer_allocated,
                    p.reserved,
                    p.committed,
                )
            })
            .collect(),
        s.connections(),
        s.reservations(),
    )
}

fn cbr(rate: f64) -> TrafficDescriptor {
    TrafficDescriptor::cbr(CellRate(rate))
}

#[test]
fn two_phase_reserve_commit_release_returns_everything() {
    let mut s = switch3();
    let before = fp(&s);
    let ids = s.reserve(&reserve(1, 10)).unwrap();
    assert_eq!(ids.len(), 10);
    assert!(ids.iter().all(|id| id.vpi.0 == 0 && id.vci.0 >= 32));
    assert_eq!(s.port_status(PortId(1)).unwrap().reserved, 10);
    let (conn, replenished) = s
        .commit(&Commit {
            replenish: 3,
            ..commit(0, VcId::new(0, 100), 1, ids[0], 1000.0)
        })
        .unwrap();
    assert_eq!(replenished.len(), 3);
    let p1 = s.port_status(PortId(1)).unwrap();
    assert_eq!((p1.reserved, p1.committed), (12, 1));
    assert!((p1.allocated - 1000.0).abs() < 1e-9);
    s.release(&Release {
        connection: conn,
        keep_reserved: false,
    })
    .unwrap();
    let mut rest: Vec<VcId> = ids[1..].to_vec();
    rest.extend(replenished);
    s.unreserve(&Unreserve {
        port: PortId(1),
        ids: rest,
        owner: "cm".into(),
    })
    .unwrap();
    assert_eq!(fp(&s), before);
    assert_eq!(s.connection_count(), 0);
}

#[test]
fn release_keep_reserved_returns_ids_to_the_owner() {
    let mut s = switch3();
    let (conn, _) = s
        .commit(&commit(0, VcId::new(0, 40), 1, VcId::new(0, 50), 10.0))
        .unwrap();
    s.release(&Release {
        connection: conn,
        keep_reserved: true,
    })
    .unwrap();
    let r = s.reservations();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].port, r[0].id, r[0].owner.as_str()),
        (PortId(1), VcId::new(0, 50), "cm")
    );
}

#[test]
fn every_refusal_names_the_problem_and_changes_nothing() {
    let mut s = switch3();
    // Some state to protect.
    let (c1, _) = s
        .commit(&commit(
            0,
            VcId::new(0, 100),
            1,
            VcId::new(0, 200),
            100_000.0,
        ))
        .unwrap();
    s.reserve(&Reserve {
        owner: "other".into(),
        ..reserve(1, 2)
    })
    .unwrap();
    let other_ids: Vec<VcId> = s.reservations().iter().map(|r| r.id).collect();
    let before = fp(&s);
    let cases: Vec<(Command, ErrorKind, &str)> = vec![
        (
            Command::Commit(commit(9, VcId::new(0, 100), 1, VcId::new(0, 300), 1.0)),
            ErrorKind::NotFound,
            "unknown port 9",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 101), 7, VcId::new(0, 300), 1.0)),
            ErrorKind::NotFound,
            "unknown port 7",
        ),
        (
            Command::Commit(commit(0, VcId::new(99, 100), 1, VcId::new(0, 300), 1.0)),
            ErrorKind::OutOfRange,
            "VPI 99",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 101), 1, VcId::new(0, 9000), 1.0)),
            ErrorKind::OutOfRange,
            "VCI 9000",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 100), 1, VcId::new(0, 300), 1.0)),
            ErrorKind::AlreadyExists,
            "input 0/100 is already used",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 101), 1, VcId::new(0, 200), 1.0)),
            ErrorKind::AlreadyExists,
            "output 0/200 is already used",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 101), 1, other_ids[0], 1.0)),
            ErrorKind::AlreadyExists,
            "reserved by another owner",
        ),
        (
            Command::Commit(commit(
                0,
                VcId::new(0, 101),
                1,
                VcId::new(0, 300),
                300_000.0,
            )),
            ErrorKind::ResourceExhausted,
            "cells/s free",
        ),
        (
            Command::Commit(Commit {
                buffer_cells: 5000,
                ..commit(0, VcId::new(0, 101), 1, VcId::new(0, 300), 1.0)
            }),
            ErrorKind::ResourceExhausted,
            "buffer cells",
        ),
        (
            Command::Commit(Commit {
                branches: vec![],
                ..commit(0, VcId::new(0, 101), 1, VcId::new(0, 300), 1.0)
            }),
            ErrorKind::InvalidArgument,
            "at least one branch",
        ),
        (
            Command::Commit(commit(0, VcId::new(0, 101), 1, VcId::new(0, 300), 0.0)),
            ErrorKind::InvalidArgument,
            "peak cell rate",
        ),
        (
            Command::Commit(Commit {
                traffic: TrafficDescriptor {
                    class: ServiceClass::RtVbr,
                    pcr: CellRate(10.0),
                    scr: CellRate(20.0),
                    mbs: 10,
                    cdvt_ps: 0,
                },
                ..commit(0, VcId::new(0, 101), 1, VcId::new(0, 300), 1.0)
            }),
            ErrorKind::InvalidArgument,
            "sustainable cell rate",
        ),
        (
            Command::Commit(Commit {
                branches: vec![
                    Branch {
                        port: PortId(1),
                        id: VcId::new(0, 300),
                    },
                    Branch {
                        port: PortId(1),
                        id: VcId::new(0, 300),
                    },
                ],
                ..commit(0, VcId::new(0, 101), 1, VcId::new(0, 300), 1.0)
            }),
            ErrorKind::InvalidArgument,
            "appears twice",
        ),
        (
            Command::Reserve(reserve(1, 0)),
            ErrorKind::InvalidArgument,
            "1 to 65536",
        ),
        (
            Command::Reserve(reserve(1, 5000)),
            ErrorKind::ResourceExhausted,
            "5000 identifiers asked",
        ),
        (
            Command::Reserve(Reserve {
                vpi: 200,
                ..reserve(1, 1)
            }),
            ErrorKind::OutOfRange,
            "VPI 200",
        ),
        (
            Command::Unreserve(Unreserve {
                port: PortId(1),
                ids: other_ids.clone(),
                owner: "cm".into(),
            }),
            ErrorKind::NotFound,
            "is not reserved by this owner",
        ),
        (
            Command::Release(Release {
                connection: 999,
                keep_reserved: false,
            }),
            ErrorKind::NotFound,
            "unknown connection 999",
        ),
        (
            Command::DropBranch(BranchChange {
                connection: c1,
                branch: Branch {
                    port: PortId(1),
                    id: VcId::new(0, 200),
                },
            }),
            ErrorKind::InvalidArgument,
            "last branch",
        ),
        (
            Command::AddBranch(BranchChange {
                connection: c1,
                branch: Branch {
                    port: PortId(2),
                    id: VcId::new(0, 5),
                },
            }),
            ErrorKind::OutOfRange,
            "VCI 5",
        ),
    ];
    for (cmd, kind, needle) in cases {
        let err = s.apply(&cmd).unwrap_err();
        assert_eq!(err.kind(), kind, "{cmd:?}: {err}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
        assert_eq!(fp(&s), before, "{cmd:?} changed the switch");
    }
}

#[test]
fn all_or_nothing_batches_undo_exactly() {
    let mut s = switch3();
    let (c1, _) = s
        .commit(&commit(0, VcId::new(0, 33), 1, VcId::new(0, 34), 10.0))
        .unwrap();
    let before = fp(&s);
    let cmds = vec![
        Command::Reserve(reserve(2, 5)),
        Command::Commit(Commit {
            replenish: 4,
            ..commit(0, VcId::new(0, 40), 2, VcId::new(0, 41), 10.0)
        }),
        Command::Release(Release {
            connection: c1,
            keep_reserved: true,
        }),
        Command::AddBranch(BranchChange {
            connection: 2,
            branch: Branch {
                port: PortId(1),
                id: VcId::new(0, 90),
            },
        }),
        // Fails: the input identifier is free but the port does not exist.
        Command::Commit(commit(5, VcId::new(0, 40), 2, VcId::new(0, 42), 10.0)),
        Command::Reserve(reserve(1, 1)),
    ];
    let out = s.execute(&cmds, Atomicity::AllOrNothing);
    assert_eq!(out.len(), 6);
    assert!(
        out[..4]
            .iter()
            .all(|r| r.as_ref().unwrap_err() == &FabricError::Aborted)
    );
    assert_eq!(out[4].as_ref().unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(out[5].as_ref().unwrap_err(), &FabricError::Aborted);
    assert_eq!(fp(&s), before);
    // The next id is the one the undone commit had: ids stay dense.
    let (c2, _) = s
        .commit(&commit(0, VcId::new(0, 40), 2, VcId::new(0, 41), 10.0))
        .unwrap();
    assert_eq!(c2, 2);
    // Continue-on-error runs each alone.
    let out = s.execute(
        &[
            Command::Reserve(reserve(1, 1)),
            Command::Reserve(reserve(9, 1)),
            Command::Reserve(reserve(1, 1)),
        ],
        Atomicity::ContinueOnError,
    );
    assert!(out[0].is_ok() && out[1].is_err() && out[2].is_ok());
}

#[test]
fn partitions_keep_owners_apart() {
    let mut s = switch3();
    let a = s
        .reserve(&Reserve {
            within: Some((32, 63)),
            owner: "cm-a".into(),
            ..reserve(1, 32)
        })
        .unwrap();
    let b = s
        .reserve(&Reserve {
            within: Some((64, 95)),
            owner: "cm-b".into(),
            ..reserve(1, 32)
        })
        .unwrap();
    assert!(a.iter().all(|id| (32..=63).contains(&id.vci.0)));
    assert!(b.iter().all(|id| (64..=95).contains(&id.vci.0)));
    let err = s
        .reserve(&Reserve {
            within: Some((32, 63)),
            owner: "cm-a".into(),
            ..reserve(1, 1)
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted);
    // cm-b cannot commit on cm-a's identifier.
    let err = s
        .commit(&Commit {
            owner: "cm-b".into(),
            ..commit(0, VcId::new(0, 40), 1, a[0], 1.0)
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
}

#[test]
fn admission_uses_effective_bandwidth_per_class() {
    let mut s = switch3();
    let cap = s.port_status(PortId(1)).unwrap().config.capacity.per_sec();
    let vbr = TrafficDescriptor {
        class: ServiceClass::NrtVbr,
        pcr: CellRate(cap / 2.0),
        scr: CellRate(cap / 20.0),
        mbs: 50,
        cdvt_ps: 0,
    };
    // Effective bandwidth between SCR and PCR: more than two fit, fewer than twenty.
    let mut n = 0u16;
    while s
        .commit(&Commit {
            traffic: vbr,
            ..commit(0, VcId::new(0, 100 + n), 1, VcId::new(0, 100 + n), 1.0)
        })
        .is_ok()
    {
        n += 1;
    }
    assert!(n > 2 && n < 20, "{n} nrt-VBR connections admitted");
    // UBR is always admitted (it is charged nothing).
    let ubr = TrafficDescriptor {
        class: ServiceClass::Ubr,
        ..cbr(cap)
    };
    s.commit(&Commit {
        traffic: ubr,
        ..commit(0, VcId::new(0, 999), 1, VcId::new(0, 999), 1.0)
    })
    .unwrap();
}

fn uni_cell(vpi: u16, vci: u16, clp: bool, fill: u8) -> [u8; CELL_LEN] {
    let mut buf = [fill; CELL_LEN];
    let mut h = CellHeader::uni(vpi, vci, Pti::user(false));
    h.clp = clp;
    h.emit(&mut Cell::new_unchecked(&mut buf[..])).unwrap();
    buf
}

#[test]
fn cells_are_switched_with_rewritten_headers() {
    let mut s = switch3();
    // VC 0/100 on port 0 -> port 1 0/200 and port 2 (NNI) 300/400.
    let (conn, _) = s
        .commit(&Commit {
            branches: vec![
                Branch {
                    port: PortId(1),
                    id: VcId::new(0, 200),
                },
                Branch {
                    port: PortId(2),
                    id: VcId::new(300, 400),
                },
            ],
            ..commit(0, VcId::new(0, 100), 1, VcId::new(0, 200), 10.0)
        })
        .unwrap();
    let mut c = uni_cell(0, 100, false, 0xa5);
    assert_eq!(
        s.handle_cell(PortId(0), &mut c),
        CellFate::Switched {
            queued: 2,
            discarded: 0
        }
    );
    let out1 = s.poll_transmit(PortId(1)).unwrap();
    let v = Cell::new_checked(&out1[..]).unwrap();
    assert!(v.verify_hec());
    assert_eq!((v.vpi(HeaderFormat::Uni), v.vci()), (0, 200));
    assert_eq!(v.payload(), &[0xa5; 48][..]);
    let out2 = s.poll_transmit(PortId(2)).unwrap();
    let v = Cell::new_checked(&out2[..]).unwrap();
    assert!(v.verify_hec());
    assert_eq!((v.vpi(HeaderFormat::Nni), v.vci()), (300, 400));
    // Unknown VC and a corrupted header.
    let mut u = uni_cell(0, 101, false, 0);
    assert_eq!(s.handle_cell(PortId(0), &mut u), CellFate::Unknown);
    let mut bad = uni_cell(0, 100, false, 0);
    bad[0] ^= 0x03;
    assert_eq!(s.handle_cell(PortId(0), &mut bad), CellFate::HecError);
    let st = s.port_status(PortId(0)).unwrap().counters;
    assert_eq!(
        (st.cells_in, st.cells_unknown, st.cells_hec_errors),
        (3, 1, 1)
    );
    assert_eq!(s.connection(conn).unwrap().cells, 1);
    // Dropping a leaf prunes only it.
    s.drop_branch(&BranchChange {
        connection: conn,
        branch: Branch {
            port: PortId(2),
            id: VcId::new(300, 400),
        },
    })
    .unwrap();
    let mut c = uni_cell(0, 100, false, 1);
    // A good cell first returns the HEC receiver to correction mode.
    assert_eq!(
        s.handle_cell(PortId(0), &mut c),
        CellFate::Switched {
            queued: 1,
            discarded: 0
        }
    );
}

#[test]
fn vp_cross_connect_keeps_the_vci() {
    let mut s = switch3();
    s.commit(&Commit {
        kind: ConnectionKind::Vp,
        in_port: PortId(0),
        in_id: VcId::new(5, 0),
        branches: vec![Branch {
            port: PortId(2),
            id: VcId::new(77, 0),
        }],
        ..commit(0, VcId::new(0, 0), 1, VcId::new(0, 0), 10.0)
    })
    .unwrap();
    for vci in [1u16, 32, 4095, 65535] {
        let mut c = uni_cell(5, vci, true, 0);
        s.handle_cell(PortId(0), &mut c);
        let out = s.poll_transmit(PortId(2)).unwrap();
        let v = Cell::new_checked(&out[..]).unwrap();
        assert!(v.verify_hec());
        assert_eq!(
            (v.vpi(HeaderFormat::Nni), v.vci(), v.clp()),
            (77, vci, true)
        );
    }
    // The VPI is taken whole: a VC on it is refused, on input and output.
    let err = s
        .commit(&commit(0, VcId::new(5, 40), 1, VcId::new(0, 40), 1.0))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    let err = s
        .commit(&commit(1, VcId::new(0, 40), 2, VcId::new(77, 40), 1.0))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
}

#[test]
fn output_queue_discards_clp1_above_threshold_then_everything_when_full() {
    let mut cfg = SwitchConfig::uniform("s", 2, oc3());
    cfg.ports[1].buffer_cells = 10;
    cfg.ports[1].clp_threshold = 5;
    let mut s = Switch::new(&cfg).unwrap();
    s.commit(&commit(0, VcId::new(0, 100), 1, VcId::new(0, 100), 10.0))
        .unwrap();
    for _ in 0..5 {
        s.handle_cell(PortId(0), &mut uni_cell(0, 100, false, 0));
    }
    assert_eq!(
        s.handle_cell(PortId(0), &mut uni_cell(0, 100, true, 0)),
        CellFate::Switched {
            queued: 0,
            discarded: 1
        }
    );
    for _ in 0..5 {
        s.handle_cell(PortId(0), &mut uni_cell(0, 100, false, 0));
    }
    assert_eq!(
        s.handle_cell(PortId(0), &mut uni_cell(0, 100, false, 0)),
        CellFate::Switched {
            queued: 0,
            discarded: 1
        }
    );
    let c = s.port_status(PortId(1)).unwrap().counters;
    assert_eq!((c.cells_discarded_clp1, c.cells_discarded_full), (1, 1));
    let mut out = Vec::new();
    assert_eq!(s.drain(PortId(1), &mut out, 100), 10);
    assert_eq!(out.len(), 10 * CELL_LEN);
}

#[test]
fn restore_rebuilds_a_listed_table() {
    let mut s = switch3();
    for i in 0..20u16 {
        s.commit(&commit(
            0,
            VcId::new(0, 100 + i),
            1 + i % 2,
            VcId::new(0, 100 + i),
            10.0,
        ))
        .unwrap();
    }
    s.release(&Release {
        connection: 7,
        keep_reserved: false,
    })
    .unwrap();
    let listed = s.connections();
    let mut t = switch3();
    for c in &listed {
        t.restore(c).unwrap();
    }
    assert_eq!(fp(&t), fp(&s));
    let (next, _) = t
        .commit(&commit(0, VcId::new(0, 999), 1, VcId::new(0, 999), 1.0))
        .unwrap();
    assert_eq!(next, 21);
}

proptest! {
    /// Any sequence of commands, then releasing every connection and returning every
    /// reservation, leaves the resources exactly as before; and a failed command never
    /// changes anything.
    #[test]
    fn resources_after_release_equal_resources_before(ops in prop::collection::vec((0u8..6, 0u16..4, 0u16..40, 1u32..6), 1..80)) {
        let mut s = switch3();
        let before = fp(&s);
        for (op, port, x, n) in ops {
            let snapshot = fp(&s);
            let cmd = match op {
                0 => Command::Reserve(Reserve { port: PortId(port), count: n, owner: ["a", "b"][x as usize % 2].into(), ..Default::default() }),
                1 | 2 => Command::Commit(Commit {
                    replenish: n % 3,
                    ..commit(port, VcId::new(0, 32 + x), (port + 1) % 4, VcId::new(0, 32 + x * 2), f64::from(n) * 70_000.0)
                }),
                3 => Command::Release(Release { connection: u64::from(x % 8), keep_reserved: n % 2 == 0 }),
                4 => Command::AddBranch(BranchChange { connection: u64::from(x % 8), branch: Branch { port: PortId(port), id: VcId::new(0, 500 + x) } }),
                _ => Command::DropBranch(BranchChange { connection: u64::from(x % 8), branch: Branch { port: PortId(port), id: VcId::new(0, 500 + x) } }),
            };
            if s.apply(&cmd).is_err() {
                prop_assert_eq!(fp(&s), snapshot);
            }
        }
        for c in s.connections() {
            s.release(&Release { connection: c.id, keep_reserved: false }).unwrap();
        }
        for r in s.reservations() {
            s.unreserve(&Unreserve { port: r.port, ids: vec![r.id], owner: r.owner.into() }).unwrap();
        }
        prop_assert_eq!(fp(&s), before);
    }
}

/// Modify: the new bandwidth is admitted on every branch's port before it takes effect;
/// a refusal changes nothing; an all-or-nothing batch undoes it exactly; cells keep
/// flowing on the same entry throughout.
#[test]
fn modify_admits_first_and_undoes_exactly() {
    let mut s = switch3();
    let cap = s.port_status(PortId(1)).unwrap().config.capacity.per_sec();
    let mut c = commit(0, VcId::new(0, 33), 1, VcId::new(0, 34), 1000.0);
    c.branches.push(Branch {
        port: PortId(2),
        id: VcId::new(0, 35),
    });
    let (id, _) = s.commit(&c).unwrap();
    let alloc = |s: &Switch, p: u16| s.port_status(PortId(p)).unwrap().allocated;
    assert!((alloc(&s, 1) - 1000.0).abs() < 1e-6);
    // Up: charged on both branch ports.
    let up = Modify {
        connection: id,
        traffic: cbr(5000.0),
        clr: 0.0,
    };
    s.modify(&up).unwrap();
    assert!((alloc(&s, 1) - 5000.0).abs() < 1e-6);
    assert!((alloc(&s, 2) - 5000.0).abs() < 1e-6);
    assert_eq!(s.connection(id).unwrap().traffic.pcr.per_sec(), 5000.0);
    // Beyond the capacity: refused, nothing changes.
    let before = fp(&s);
    let err = s
        .apply(&Command::Modify(Modify {
            connection: id,
            traffic: cbr(cap * 2.0),
            clr: 0.0,
        }))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    assert_eq!(fp(&s), before);
    // Unknown connection.
    let err = s
        .apply(&Command::Modify(Modify {
            connection: 999,
            ..up
        }))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // In an all-or-nothing batch that fails later: undone exactly.
    let out = s.execute(
        &[
            Command::Modify(Modify {
                connection: id,
                traffic: cbr(200.0),
                clr: 0.0,
            }),
            Command::Release(Release {
                connection: 999,
                keep_reserved: false,
            }),
        ],
        Atomicity::AllOrNothing,
    );
    assert!(out[1].is_err());
    assert_eq!(fp(&s), before);
    // Down, then release: nothing left admitted.
    s.modify(&Modify {
        connection: id,
        traffic: cbr(10.0),
        clr: 0.0,
    })
    .unwrap();
    assert!((alloc(&s, 2) - 10.0).abs() < 1e-6);
    s.release(&Release {
        connection: id,
        keep_reserved: false,
    })
    .unwrap();
    assert_eq!(alloc(&s, 1), 0.0);
    assert_eq!(alloc(&s, 2), 0.0);
}

/// Admission cannot be bypassed (issue 24, item 5): a peak rate below one cell per second
/// (`1e-300` was admitted as no bandwidth, then carried hundreds of thousands of cells a
/// second), a non-finite one, a VBR sustainable rate below one cell per second, and a
/// hairpin (a branch out by the port and identifier the connection enters by, whose
/// cells loop for ever) are each refused, naming the cause, and change nothing. A branch
/// back out of the same port on another identifier is a loop-back, not a hairpin: taken.
#[test]
fn admission_refuses_vanishing_rates_and_hairpins() {
    let mut s = switch3();
    let ids = s.reserve(&reserve(1, 4)).unwrap();
    let before = fp(&s);
    let refused = |s: &mut Switch, c: Commit, why: &str| {
        let e = s.commit(&c).unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    };
    for rate in [1e-300, 0.5, f64::NAN, f64::INFINITY] {
        refused(
            &mut s,
            commit(0, VcId::new(0, 100), 1, ids[0], rate),
            "peak cell rate",
        );
    }
    let vbr = TrafficDescriptor {
        class: ServiceClass::NrtVbr,
        pcr: CellRate(1000.0),
        scr: CellRate(1e-300),
        mbs: 10,
        cdvt_ps: 0,
    };
    refused(
        &mut s,
        Commit {
            traffic: vbr,
            ..commit(0, VcId::new(0, 100), 1, ids[0], 1000.0)
        },
        "sustainable cell rate",
    );
    // The hairpin: in on port 1's own reserved VC, out on the same.
    refused(&mut s, commit(1, ids[1], 1, ids[1], 1000.0), "hairpin");
    let vp = Commit {
        kind: ConnectionKind::Vp,
        ..commit(2, VcId::new(5, 0), 2, VcId::new(5, 0), 1000.0)
    };
    refused(&mut s, vp, "hairpin");
    assert_eq!(fp(&s), before);

    // A loop-back on another identifier of the same port is a real connection.
    let (conn, _) = s.commit(&commit(1, ids[2], 1, ids[3], 1000.0)).unwrap();
    // And a leaf added back onto the input is the hairpin again.
    let e = s
        .add_branch(&BranchChange {
            connection: conn,
            branch: Branch {
                port: PortId(1),
                id: ids[2],
            },
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("hairpin"), "{e}");
}
