//! Roles at the switch server (issue 24, "any certificate is root"): a host's
//! certificate committed a cross-connect with `owner = cm-xbind`, took most of a port and
//! released the manager's connections. Now commands come only from `cm` and `admin`, and
//! a manager acts only for the owner its certificate names, on the gRPC and the raw-TCP
//! ports alike; every refusal is counted.

use atmlab_core::ids::PortId;
use atmlab_core::ids::VcId;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::raw::RawClient;
use atmlab_fabric::live::server::{self, ServerFile};
use atmlab_fabric::*;
use atmlab_rpc::tls::{Expect, Role, Subject, TlsFiles, TlsIdentity};

use crate::common::{self, grpc_client};

fn file() -> ServerFile {
    ServerFile::parse(
        "name = \"s1\"\nraw = \"127.0.0.1:0\"\n[[ports]]\nid = 0\nhost_name = \"hosta\"\n\
         [[ports]]\nid = 1\n",
        "test",
    )
    .unwrap()
}

fn commit(owner: &str, in_vci: u16, out_vci: u16) -> Commit {
    Commit {
        owner: owner.into(),
        ..common::commit(0, VcId::new(0, in_vci), 1, VcId::new(0, out_vci), 1_000.0)
    }
}

fn forbidden(e: &FabricError) -> bool {
    e.kind() == ErrorKind::PermissionDenied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_managers_command_and_each_only_for_its_own_owner() {
    let dir = tempfile::tempdir().unwrap();
    let subjects = Subject::list(&[
        "switch:s1",
        "cm:cm-xbind",
        "cm:cm-seq",
        "host:hosta",
        "observer:watch",
        "admin:admin",
    ])
    .unwrap();
    atmlab_rpc::tls::init_certs(dir.path(), &subjects, false).unwrap();
    let load = |name: &str| -> TlsIdentity { TlsFiles::in_dir(dir.path(), name).load().unwrap() };
    let sw = server::start(&file(), Some(&load("s1"))).await.unwrap();
    let client = |name: &str| {
        let id = load(name);
        async move { grpc_client(sw.grpc_addr, Some(&id)).await }
    };
    let xbind = client("cm-xbind").await;
    let seq = client("cm-seq").await;
    let host = client("hosta").await;
    let watch = client("watch").await;
    let admin = client("admin").await;

    // The manager sets up a connection of its own.
    let (mine, _) = xbind.commit(&commit("cm-xbind", 100, 100)).await.unwrap();

    // A host, posing as the manager: refused, nothing installed.
    let e = host
        .commit(&commit("cm-xbind", 101, 101))
        .await
        .unwrap_err();
    assert!(
        forbidden(&e) && e.to_string().contains("host \"hosta\""),
        "{e}"
    );
    let e = host.release(mine, false).await.unwrap_err();
    assert!(forbidden(&e), "{e}");
    // A host binds the port named for it (host_name), and no other.
    host.attach_host(PortId(0), "127.0.0.1:9".parse().unwrap())
        .await
        .unwrap();
    let e = host
        .attach_host(PortId(1), "127.0.0.1:9".parse().unwrap())
        .await
        .unwrap_err();
    assert!(forbidden(&e), "{e}");
    // An observer reads, and does nothing else.
    assert_eq!(watch.connections().await.unwrap().len(), 1);
    watch.describe().await.unwrap();
    let e = watch
        .execute(
            vec![Command::Reserve(Reserve {
                owner: "watch".into(),
                ..common::reserve(1, 1)
            })],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap()
        .remove(0)
        .unwrap_err();
    assert!(forbidden(&e), "{e}");

    // Another manager cannot spoof the owner field, nor touch the first one's call.
    let e = seq.commit(&commit("cm-xbind", 102, 102)).await.unwrap_err();
    assert!(forbidden(&e) && e.to_string().contains("cm-seq"), "{e}");
    let e = seq.release(mine, false).await.unwrap_err();
    assert!(forbidden(&e) && e.to_string().contains("connection"), "{e}");
    // A continue-on-error batch runs what is allowed and refuses the rest in place.
    let results = seq
        .execute(
            vec![
                Command::Release(Release {
                    connection: mine,
                    keep_reserved: false,
                }),
                Command::Commit(commit("cm-seq", 103, 103)),
            ],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap();
    assert!(forbidden(results[0].as_ref().unwrap_err()), "{results:?}");
    let Ok(Reply::Committed {
        connection: theirs, ..
    }) = &results[1]
    else {
        panic!("{results:?}")
    };

    // The raw-TCP port holds the same line.
    let raw = |name: &str| {
        let id = load(name).expecting(Expect::Role(Role::Switch));
        let addr = sw.raw_addr.unwrap();
        async move {
            let tls = atmlab_rpc::tls::connect(
                &id.connector().unwrap(),
                addr,
                &Expect::Role(Role::Switch),
            )
            .await
            .unwrap();
            RawClient::new(tls)
        }
    };
    let raw_host = raw("hosta").await;
    let r = raw_host
        .execute(
            vec![Command::Commit(commit("cm-xbind", 104, 104))],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert!(forbidden(r[0].as_ref().unwrap_err()), "{r:?}");
    let raw_seq = raw("cm-seq").await;
    let r = raw_seq
        .execute(
            vec![Command::Release(Release {
                connection: mine,
                keep_reserved: false,
            })],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert!(forbidden(r[0].as_ref().unwrap_err()), "{r:?}");

    // Nothing of the manager's was touched; only the two allowed commits stand.
    let mut ids: Vec<u64> = admin
        .connections()
        .await
        .unwrap()
        .iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [mine, *theirs]);
    assert_eq!(sw.authz.refused(), 9, "every refusal is counted");
    // Each manager releases its own; an admin may release anyone's.
    xbind.release(mine, false).await.unwrap();
    admin.release(*theirs, false).await.unwrap();
    assert!(admin.connections().await.unwrap().is_empty());
    sw.stop().await;
}
