//! The QoS mapper over gRPC: a real `QosMapperService` on 127.0.0.1:0 behind mutual TLS,
//! called through `RemoteQosMapper`, agreeing with the collocated core.

use atmlab_control::ControlError;
use atmlab_control::qos::{
    CellQos, MapQos, Mapper, QosMapper, QosMapperService, RemoteQosMapper, UserQos,
};
use atmlab_core::time::Duration;
use atmlab_core::traffic::ServiceClass;
use atmlab_rpc::tls::{self, TlsFiles};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

fn video(class: ServiceClass) -> UserQos {
    UserQos {
        class,
        frame_rate: 30.0,
        frame_size: 4000,
        peak_frame_size: 9180,
        peak_frame_rate: 0.0,
        frame_loss: 1e-4,
        delay: Duration::from_millis(150),
    }
}

/// The same contract, give or take the wire's microsecond rounding of durations.
fn same(remote: &CellQos, local: &CellQos) {
    assert_eq!(remote.traffic, local.traffic);
    assert_eq!(remote.clr, local.clr);
    for (r, l) in [
        (remote.ctd, local.ctd),
        (remote.cdv, local.cdv),
        (remote.burst_tolerance, local.burst_tolerance),
    ] {
        assert!(
            r.as_picos().abs_diff(l.as_picos()) <= 1_000_000,
            "{r} vs {l}"
        );
    }
}

#[tokio::test]
async fn a_remote_mapper_maps_as_the_collocated_one_does() {
    let dir = tempfile::tempdir().unwrap();
    tls::init_certs(
        dir.path(),
        &tls::Subject::list(&["cm:qos", "cm:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let server_tls = TlsFiles::in_dir(dir.path(), "qos").load().unwrap();
    let client_tls = TlsFiles::in_dir(dir.path(), "cm").load().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("https://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(QosMapperService::new(QosMapper::default()).serve(
        listener,
        Some(server_tls),
        async {
            let _ = stopped.await;
        },
    ));

    let remote = RemoteQosMapper::connect(&addr, Some(&client_tls))
        .await
        .unwrap();
    let local = QosMapper::default();
    for class in [
        ServiceClass::Cbr,
        ServiceClass::RtVbr,
        ServiceClass::NrtVbr,
        ServiceClass::Ubr,
    ] {
        let q = video(class);
        let expected = local.map(&q).unwrap();
        let got = remote.map(&q).await.unwrap();
        same(&got, &expected);
        // Back to user terms, remotely: what the core gives for what came over the wire.
        let user = remote.unmap(&got).await.unwrap();
        let back = local.unmap(&got);
        assert_eq!(user.class, class);
        assert_eq!(user.frame_size, back.frame_size);
        assert_eq!(user.peak_frame_size, 9208); // 192 cells' worth
        assert_eq!(user.frame_rate, back.frame_rate);
        assert!(
            (user.frame_loss - 1e-4).abs() < 1e-12,
            "{}",
            user.frame_loss
        );
        assert!(
            user.delay.as_picos().abs_diff(q.delay.as_picos()) <= 1_000_000,
            "{}",
            user.delay
        );
    }

    // The connection manager's view: either kind behind one type.
    let q = video(ServiceClass::RtVbr);
    let via_enum = Mapper::Remote(remote.clone()).map(&q).await.unwrap();
    same(&via_enum, &local.map(&q).unwrap());
    same(&Mapper::Collocated(local).map(&q).await.unwrap(), &via_enum);

    // A refusal keeps its code and names the field.
    let e = remote
        .map(&UserQos {
            frame_loss: 1.5,
            ..q
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    assert!(e.to_string().contains("frame_loss"), "{e}");
    let mut bad = via_enum;
    bad.traffic.scr.0 = bad.traffic.pcr.0 * 2.0;
    let e = remote.unmap(&bad).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    assert!(e.to_string().contains("traffic.scr"), "{e}");

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    // A stopped mapper is unavailable, not a wrong answer.
    let e = remote.map(&q).await.unwrap_err();
    assert!(matches!(e, ControlError::Call { .. }), "{e}");
}
