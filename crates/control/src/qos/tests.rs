//! The mapping's tests: byte-exact cases from the rules, refusals that name the field,
//! and round-trip properties; the wire's with the live shell.

use atmlab_core::time::Duration;
use atmlab_core::traffic::ServiceClass;
use atmlab_core::units::CellRate;
use proptest::prelude::*;

use super::mapper::is_vbr;
use super::*;
use crate::ControlError;
fn qos(class: ServiceClass) -> UserQos {
    UserQos {
        class,
        frame_rate: 30.0,
        frame_size: 4000,
        peak_frame_size: 0,
        peak_frame_rate: 0.0,
        frame_loss: 1e-4,
        delay: Duration::from_millis(100),
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
}

#[test]
fn aal5_cells_are_the_trailer_rounded_up_to_whole_cells() {
    let a = AalOverhead::AAL5;
    assert_eq!(a.cells(1), 1);
    assert_eq!(a.cells(40), 1); // 40 + 8 = 48: exactly one cell
    assert_eq!(a.cells(41), 2);
    assert_eq!(a.cells(9180), 192); // the classical IP over ATM MTU
    assert_eq!(a.cells(u32::MAX), 89_478_486);
    assert_eq!(a.max_octets(1), 40);
    assert_eq!(a.max_octets(192), 9208);
    assert_eq!(a.cells(a.max_octets(192)), 192);
    assert_eq!(AalOverhead::AAL34.cells(33), 1);
    assert_eq!(AalOverhead::AAL34.cells(34), 2);
}

#[test]
fn cbr_reserves_the_peak() {
    let m = QosMapper::default();
    // 30 frames/s of 4000 octets: 84 cells each (4008 / 48 = 83.5).
    let c = m.map(&qos(ServiceClass::Cbr)).unwrap();
    assert_eq!(c.traffic.class, ServiceClass::Cbr);
    assert_eq!(c.traffic.pcr, CellRate(30.0 * 84.0));
    assert_eq!(c.traffic.scr, c.traffic.pcr);
    assert_eq!(c.traffic.mbs, 84);
    assert_eq!(c.burst_tolerance, Duration::ZERO);
    // With a peak: PCR follows the peak rate and the peak size.
    let c = m
        .map(&UserQos {
            peak_frame_rate: 60.0,
            peak_frame_size: 9180,
            ..qos(ServiceClass::Cbr)
        })
        .unwrap();
    assert_eq!(c.traffic.pcr, CellRate(60.0 * 192.0));
}

#[test]
fn vbr_has_a_sustainable_rate_and_a_burst_tolerance() {
    let m = QosMapper::default();
    let q = UserQos {
        peak_frame_size: 9180,
        ..qos(ServiceClass::RtVbr)
    };
    let c = m.map(&q).unwrap();
    let (pcr, scr) = (30.0 * 192.0, 30.0 * 84.0);
    assert_eq!(c.traffic.pcr, CellRate(pcr));
    assert_eq!(c.traffic.scr, CellRate(scr));
    assert_eq!(c.traffic.mbs, 192);
    let tau = 191.0 * (1.0 / scr - 1.0 / pcr);
    assert_eq!(c.burst_tolerance, Duration::from_secs_f64(tau));
    // A constant stream has no burst tolerance.
    let c = m.map(&qos(ServiceClass::NrtVbr)).unwrap();
    assert_eq!(c.traffic.scr, c.traffic.pcr);
    assert_eq!(c.burst_tolerance, Duration::ZERO);
}

#[test]
fn ubr_has_a_peak_only() {
    let c = QosMapper::default()
        .map(&UserQos {
            delay: Duration::ZERO,
            ..qos(ServiceClass::Ubr)
        })
        .unwrap();
    assert_eq!(c.traffic.pcr, CellRate(30.0 * 84.0));
    assert_eq!(c.traffic.scr, c.traffic.pcr);
    assert_eq!((c.ctd, c.cdv), (Duration::ZERO, Duration::ZERO));
}

#[test]
fn loss_is_shared_among_the_cells_of_a_frame() {
    let c = QosMapper::default().map(&qos(ServiceClass::Cbr)).unwrap();
    // 1e-4 over 84 cells: about 1e-4 / 84.
    assert!(close(c.clr, 1e-4 / 84.0, 1e-4), "{}", c.clr);
    // Exactly: 84 cells surviving is one frame surviving.
    assert!(close((1.0 - c.clr).powi(84), 1.0 - 1e-4, 1e-12));
    let lossless = QosMapper::default()
        .map(&UserQos {
            frame_loss: 0.0,
            ..qos(ServiceClass::Cbr)
        })
        .unwrap();
    assert_eq!(lossless.clr, 0.0);
}

#[test]
fn delay_is_serialisation_then_transfer_then_variation() {
    let c = QosMapper::default().map(&qos(ServiceClass::Cbr)).unwrap();
    // 84 cells at 2520 cells/s: the last leaves 83/2520 s after the first.
    let serialisation = Duration::from_secs_f64(83.0 / 2520.0);
    assert_eq!(c.ctd, Duration::from_millis(100) - serialisation);
    assert_eq!(c.cdv, Duration::from_picos((c.ctd.as_picos() + 2) / 4));
    // A budget the frame cannot even be sent in.
    let e = QosMapper::default()
        .map(&UserQos {
            delay: Duration::from_millis(30),
            ..qos(ServiceClass::Cbr)
        })
        .unwrap_err();
    assert!(
        matches!(e, ControlError::InvalidQos { field: "delay", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("leaves no time"), "{e}");
}

#[test]
fn invalid_user_qos_names_the_field() {
    let m = QosMapper::default();
    let field = |q: UserQos| match m.map(&q) {
        Err(ControlError::InvalidQos { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let q = qos(ServiceClass::RtVbr);
    assert_eq!(
        field(UserQos {
            frame_rate: 0.0,
            ..q
        }),
        "frame_rate"
    );
    assert_eq!(
        field(UserQos {
            frame_rate: -1.0,
            ..q
        }),
        "frame_rate"
    );
    assert_eq!(
        field(UserQos {
            frame_rate: f64::NAN,
            ..q
        }),
        "frame_rate"
    );
    assert_eq!(
        field(UserQos {
            frame_rate: f64::INFINITY,
            ..q
        }),
        "frame_rate"
    );
    assert_eq!(field(UserQos { frame_size: 0, ..q }), "frame_size");
    assert_eq!(
        field(UserQos {
            peak_frame_size: 100,
            ..q
        }),
        "peak_frame_size"
    );
    assert_eq!(
        field(UserQos {
            peak_frame_rate: 10.0,
            ..q
        }),
        "peak_frame_rate"
    );
    assert_eq!(
        field(UserQos {
            peak_frame_rate: 1e307,
            ..q
        }),
        "peak_frame_rate"
    );
    assert_eq!(
        field(UserQos {
            frame_loss: 1.0,
            ..q
        }),
        "frame_loss"
    );
    assert_eq!(
        field(UserQos {
            frame_loss: -0.1,
            ..q
        }),
        "frame_loss"
    );
    assert_eq!(
        field(UserQos {
            frame_loss: f64::NAN,
            ..q
        }),
        "frame_loss"
    );
    assert_eq!(
        field(UserQos {
            delay: Duration::ZERO,
            ..q
        }),
        "delay"
    );
    let e = m
        .map(&UserQos {
            delay: Duration::ZERO,
            ..qos(ServiceClass::Cbr)
        })
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    assert_eq!(e.to_string(), "invalid QoS: delay: CBR needs a delay bound");
}

#[test]
fn invalid_configurations_are_refused() {
    let bad = |config| QosMapper::new(config).unwrap_err().to_string();
    assert!(
        bad(QosMapperConfig {
            aal: AalOverhead {
                per_frame: 48,
                payload: 48
            },
            ..Default::default()
        })
        .contains("aal")
    );
    assert!(
        bad(QosMapperConfig {
            cdv_fraction: 1.5,
            ..Default::default()
        })
        .contains("cdv_fraction")
    );
    let m = QosMapper::new(QosMapperConfig {
        aal: AalOverhead::AAL34,
        cdv_fraction: 0.5,
    })
    .unwrap();
    // 4000 + 11 octets in 44-octet payloads: 92 cells.
    assert_eq!(m.map(&qos(ServiceClass::Cbr)).unwrap().traffic.mbs, 92);
}

fn classes() -> impl Strategy<Value = ServiceClass> {
    prop_oneof![
        Just(ServiceClass::Cbr),
        Just(ServiceClass::RtVbr),
        Just(ServiceClass::NrtVbr),
        Just(ServiceClass::Ubr),
    ]
}

/// Valid user QoS; `constant_rate` keeps the peak frame rate at the mean.
fn user_qos(constant_rate: bool) -> impl Strategy<Value = UserQos> {
    (
        classes(),
        0.1f64..10_000.0,
        1u32..100_000,
        0u32..50_000,
        0.0f64..3.0,
        0.0f64..0.5,
        0u64..1_000_000,
    )
        .prop_map(
            move |(class, frame_rate, frame_size, extra, burst, frame_loss, slack_us)| {
                let peak_frame_rate = if constant_rate {
                    frame_rate
                } else {
                    frame_rate * (1.0 + burst)
                };
                UserQos {
                    class,
                    frame_rate,
                    frame_size,
                    peak_frame_size: frame_size + extra,
                    peak_frame_rate,
                    frame_loss,
                    // Longer than a frame interval, so a frame can always be sent.
                    delay: Duration::from_secs_f64(1.0 / peak_frame_rate)
                        + Duration::from_micros(slack_us),
                }
            },
        )
}

proptest! {
    #[test]
    fn unmap_recovers_rates_and_sizes_to_within_a_cell(q in user_qos(true)) {
        let m = QosMapper::default();
        let payload = m.config().aal.payload;
        let c = m.map(&q).unwrap();
        c.validate().unwrap();
        let u = m.unmap(&c);
        prop_assert_eq!(u.class, q.class);
        prop_assert!(close(u.peak_frame_rate, q.peak_frame_rate, 1e-12));
        prop_assert!(u.peak_frame_size >= q.peak_frame_size);
        prop_assert!(u.peak_frame_size < q.peak_frame_size + payload);
        if is_vbr(q.class) {
            prop_assert!(close(u.frame_rate, q.frame_rate, 1e-12));
            prop_assert!(u.frame_size >= q.frame_size);
            prop_assert!(u.frame_size < q.frame_size + payload);
        } else {
            // CBR and UBR reserve the peak: a constant stream of peak frames.
            prop_assert_eq!(u.frame_size, u.peak_frame_size);
            prop_assert!(close(u.frame_rate, u.peak_frame_rate, 0.0));
        }
        prop_assert!(close(u.frame_loss, q.frame_loss, 1e-9) || (u.frame_loss - q.frame_loss).abs() < 1e-15);
        let dd = u.delay.as_picos().abs_diff(q.delay.as_picos());
        prop_assert!(dd <= 1, "delay {} vs {}", u.delay, q.delay);
        // And the unmapped QoS maps to the same contract.
        let again = m.map(&u).unwrap().traffic;
        prop_assert_eq!((again.class, again.mbs), (c.traffic.class, c.traffic.mbs));
        prop_assert!(close(again.pcr.0, c.traffic.pcr.0, 1e-12));
        prop_assert!(close(again.scr.0, c.traffic.scr.0, 1e-12));
    }

    #[test]
    fn map_unmap_map_keeps_the_contract(q in user_qos(false)) {
        let m = QosMapper::default();
        let c = m.map(&q).unwrap();
        let again = m.map(&m.unmap(&c)).unwrap();
        prop_assert_eq!(again.traffic.class, c.traffic.class);
        prop_assert!(close(again.traffic.pcr.0, c.traffic.pcr.0, 1e-12));
        prop_assert_eq!(again.traffic.mbs, c.traffic.mbs);
        // SCR comes back to within one cell per frame (at the peak frame rate).
        let per_frame = c.traffic.pcr.0 / f64::from(c.traffic.mbs);
        prop_assert!(again.traffic.scr.0 >= c.traffic.scr.0 * (1.0 - 1e-12));
        prop_assert!(again.traffic.scr.0 <= c.traffic.scr.0 + per_frame * (1.0 + 1e-9));
        prop_assert!(close(again.clr, c.clr, 1e-9) || (again.clr - c.clr).abs() < 1e-15);
    }

}

/// The IDL's side: conversions, refusals of bad fields from the wire, and the
/// collocated and enum mappers of the live shell.
#[cfg(feature = "live")]
mod wire {
    use atmlab_rpc::v1 as pb;

    use super::*;
    use crate::qos::convert::micros;

    #[test]
    fn invalid_cell_qos_from_the_wire_names_the_field() {
        let good = pb_cell_qos(&QosMapper::default().map(&qos(ServiceClass::RtVbr)).unwrap());
        let field = |c: pb::CellQos| match cell_qos_from_pb(&c) {
            Err(ControlError::InvalidQos { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let with = |f: &dyn Fn(&mut pb::TrafficDescriptor)| {
            let mut c = good;
            f(c.traffic.as_mut().unwrap());
            c
        };
        assert_eq!(
            field(pb::CellQos {
                traffic: None,
                ..good
            }),
            "traffic"
        );
        assert_eq!(
            field(with(&|t| t.service_class = 0)),
            "traffic.service_class"
        );
        assert_eq!(field(with(&|t| t.pcr = 0.0)), "traffic.pcr");
        assert_eq!(field(with(&|t| t.scr = t.pcr * 2.0)), "traffic.scr");
        assert_eq!(field(with(&|t| t.mbs = 0)), "traffic.mbs");
        assert_eq!(field(with(&|t| t.clr = 1.0)), "traffic.clr");
        // CBR: the SCR on the wire is ignored, an MBS of 0 is one cell.
        let cbr = cell_qos_from_pb(&with(&|t| {
            t.service_class = pb::ServiceClass::Cbr as i32;
            t.scr = 0.0;
            t.mbs = 0;
        }))
        .unwrap();
        assert_eq!(cbr.traffic.scr, cbr.traffic.pcr);
        assert_eq!(cbr.traffic.mbs, 1);
        let e = user_qos_from_pb(&pb::UserQos::default()).unwrap_err();
        assert!(e.to_string().contains("service_class"), "{e}");
    }

    #[test]
    fn microseconds_on_the_wire_never_round_a_bound_away() {
        assert_eq!(micros(Duration::ZERO), 0);
        assert_eq!(micros(Duration::from_nanos(1)), 1);
        assert_eq!(micros(Duration::from_nanos(1499)), 1);
        assert_eq!(micros(Duration::from_nanos(1500)), 2);
        assert_eq!(micros(Duration::MAX), u64::MAX / 1_000_000);
    }

    #[tokio::test]
    async fn collocated_and_enum_mappers_agree_with_the_core() {
        let core = QosMapper::default();
        let q = qos(ServiceClass::RtVbr);
        let direct = core.map(&q).unwrap();
        assert_eq!(MapQos::map(&core, &q).await.unwrap(), direct);
        let m = Mapper::Collocated(core);
        assert_eq!(m.map(&q).await.unwrap(), direct);
        assert_eq!(m.unmap(&direct).await.unwrap(), core.unmap(&direct));
    }

    proptest! {
        #[test]
        fn the_wire_keeps_a_contract_to_the_microsecond(q in user_qos(false)) {
            let m = QosMapper::default();
            let c = m.map(&q).unwrap();
            let back = cell_qos_from_pb(&pb_cell_qos(&c)).unwrap();
            prop_assert_eq!(back.traffic, c.traffic);
            prop_assert_eq!(back.clr, c.clr);
            for (a, b) in [(back.ctd, c.ctd), (back.cdv, c.cdv), (back.burst_tolerance, c.burst_tolerance)] {
                prop_assert!(a.as_picos().abs_diff(b.as_picos()) <= 1_000_000, "{} vs {}", a, b);
            }
            let u = user_qos_from_pb(&pb_user_qos(&q)).unwrap();
            prop_assert_eq!(UserQos { delay: q.delay, ..u }, q);
        }
    }
}
