//! The etcd client against a real etcd (heavy tier: Debian's `etcd-server`, started by
//! `etcd_server`): keys, leases that lapse when nobody keeps them alive, watches,
//! elections that pass to the next campaigner when the leader's lease lapses, a
//! client that carries on through a member's death, and the name service's directory
//! kept in etcd (`NameClient` given `etcd://...`).

use std::time::Duration;

use atmlab_control::ControlError;
use atmlab_control::etcd::{EtcdClient, WatchKind};
use atmlab_control::names::{NameClient, ObjectInfo, ObjectKind};
use tokio::time::{Instant, timeout};

use crate::common::{DEADLINE, eventually};
use crate::etcd_server::EtcdCluster;

/// The lease of the fail-over targets (issue 26: fail-over under 2 s with a 1 s lease).
const SHORT: Duration = Duration::from_secs(1);

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn keys_leases_and_watches() {
    let etcd = EtcdCluster::start(1);
    let client = EtcdClient::connect(&etcd.endpoints()).await.unwrap();

    // Plain keys.
    client.put("/t/plain/a", "1", None).await.unwrap();
    client.put("/t/plain/b", "2", None).await.unwrap();
    client
        .put("/t/plainer", "not under /t/plain/", None)
        .await
        .unwrap();
    let a = client.get("/t/plain/a").await.unwrap().unwrap();
    assert_eq!(a.value, b"1");
    assert_eq!(a.lease, 0);
    let (under, rev) = client.get_prefix("/t/plain/").await.unwrap();
    let keys: Vec<&str> = under.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/t/plain/a", "/t/plain/b"]);
    assert!(rev >= a.mod_revision, "{rev} < {}", a.mod_revision);
    assert!(client.get("/t/none").await.unwrap().is_none());

    // Create-if-absent: refused with the key as it stands.
    assert_eq!(client.create("/t/once", "first", None).await.unwrap(), None);
    let held = client
        .create("/t/once", "second", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.value, b"first");

    // A watch sees puts and deletes under its prefix, and nothing else.
    let mut watch = client.watch_prefix("/t/w/", 0).await.unwrap();
    client.put("/t/elsewhere", "x", None).await.unwrap();
    client.put("/t/w/k", "v", None).await.unwrap();
    assert!(client.delete("/t/w/k").await.unwrap());
    assert!(!client.delete("/t/w/k").await.unwrap());
    let put = timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((put.kind, put.kv.key.as_str()), (WatchKind::Put, "/t/w/k"));
    assert_eq!(put.kv.value, b"v");
    let del = timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (del.kind, del.kv.key.as_str()),
        (WatchKind::Delete, "/t/w/k")
    );

    // A key on a lease kept alive outlives the TTL several times over ...
    let lease = client.grant(SHORT).await.unwrap();
    assert_eq!(
        lease.ttl(),
        SHORT,
        "etcd raised the lease: check --election-timeout"
    );
    client
        .put("/t/w/leased", "alive", Some(lease.id()))
        .await
        .unwrap();
    let put = timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(put.kv.lease, lease.id());
    let watch_lease = lease.watch();
    tokio::time::sleep(SHORT * 3).await; // the thing under test is that time passes
    assert!(!watch_lease.is_lost());
    assert!(client.get("/t/w/leased").await.unwrap().is_some());

    // ... and goes when nobody keeps the lease alive; `lost` fires no later.
    let abandoned = Instant::now();
    lease.abandon();
    let del = timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (del.kind, del.kv.key.as_str()),
        (WatchKind::Delete, "/t/w/leased")
    );
    assert!(
        watch_lease.is_lost(),
        "etcd let the lease go {:?} after the last keep-alive stopped, before the client \
         reported it lost",
        abandoned.elapsed()
    );

    // Revoking removes its keys at once and reports the loss at once.
    let lease = client.grant(Duration::from_secs(60)).await.unwrap();
    client
        .put("/t/revoked", "x", Some(lease.id()))
        .await
        .unwrap();
    let w = lease.watch();
    lease.revoke().await.unwrap();
    assert!(w.is_lost());
    assert!(client.get("/t/revoked").await.unwrap().is_none());

    assert_eq!(client.delete_prefix("/t/plain/").await.unwrap(), 2);
}

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn the_next_campaigner_leads_when_the_leader_s_lease_lapses() {
    let etcd = EtcdCluster::start(1);
    let one = EtcdClient::connect(&etcd.endpoints()).await.unwrap();
    let two = EtcdClient::connect(&etcd.endpoints()).await.unwrap();
    let election = one.election();
    assert!(election.leader("cm/alpha").await.unwrap().is_none());
    let mut observer = election.observe("cm/alpha").await.unwrap();

    // The first campaigner wins at once.
    let lease_one = one.grant(SHORT).await.unwrap();
    let first = election
        .campaign("cm/alpha", "first", &lease_one)
        .await
        .unwrap();
    assert_eq!(first.lease_id(), lease_one.id());
    let seen = timeout(DEADLINE, observer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.value, b"first");
    assert_eq!(seen.key, first.key());

    // The second waits for as long as the first keeps its lease alive.
    let lease_two = two.grant(SHORT).await.unwrap();
    let election_two = two.election();
    let mut second = Box::pin(election_two.campaign("cm/alpha", "second", &lease_two));
    assert!(
        timeout(SHORT * 3, &mut second).await.is_err(),
        "elected while the first leader's lease is alive"
    );
    assert!(!first.is_lost());
    first.proclaim("first, again").await.unwrap();
    let seen = timeout(DEADLINE, observer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.value, b"first, again");
    let current = election.leader("cm/alpha").await.unwrap().unwrap();
    assert_eq!(current.value, b"first, again");

    // The first leader's keep-alives stop (its process hangs or dies): the second is
    // elected once the lease lapses, and the first has been told by then.
    let stopped = Instant::now();
    let lost = first.lost();
    lease_one.abandon();
    let second = timeout(DEADLINE, second).await.unwrap().unwrap();
    let took = stopped.elapsed();
    assert!(
        first.is_lost(),
        "the second was elected {took:?} after the first's keep-alives stopped, before \
         the first was told its leadership was lost"
    );
    timeout(Duration::ZERO, lost).await.unwrap();
    eprintln!("take-over {took:?} after the leader's keep-alives stopped (lease {SHORT:?})");
    let seen = timeout(DEADLINE, observer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.value, b"second");
    assert_eq!(seen.key, second.key());
    assert!(!second.is_lost());

    // Resigning hands over at once, to a third campaigner; the lease stays.
    let lease_three = one.grant(SHORT).await.unwrap();
    let mut third = Box::pin(election.campaign("cm/alpha", "third", &lease_three));
    assert!(
        timeout(Duration::from_millis(200), &mut third)
            .await
            .is_err()
    );
    second.resign().await.unwrap();
    let third = timeout(DEADLINE, third).await.unwrap().unwrap();
    assert!(!lease_two.is_lost());
    let seen = timeout(DEADLINE, observer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.value, b"third");
    assert_eq!(
        election.leader("cm/alpha").await.unwrap().unwrap().key,
        third.key()
    );

    // A campaign whose lease is lost while it waits fails instead of waiting forever.
    let lease_four = two.grant(SHORT).await.unwrap();
    let id = lease_four.id();
    let waiting = election_two.campaign("cm/alpha", "fourth", &lease_four);
    let revoke = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        two.revoke(id).await
    };
    let (result, revoked) = timeout(DEADLINE, async { tokio::join!(waiting, revoke) })
        .await
        .unwrap();
    revoked.unwrap();
    let e = result.unwrap_err();
    assert_eq!(e.kind(), atmlab_control::ErrorKind::NotFound, "{e}");
    assert!(lease_four.is_lost());
    assert_eq!(
        election.leader("cm/alpha").await.unwrap().unwrap().key,
        third.key()
    );

    // A leader whose key is deleted (by hand here) is told, though its lease lives.
    assert!(!third.is_lost());
    assert!(one.delete(&third.key()).await.unwrap());
    timeout(DEADLINE, third.lost()).await.unwrap();
    assert!(!lease_three.is_lost());
}

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn a_client_carries_on_through_a_member_s_death() {
    let mut etcd = EtcdCluster::start(3);
    let client = EtcdClient::connect(&etcd.endpoints()).await.unwrap();
    let lease = client.grant(Duration::from_secs(5)).await.unwrap();
    client
        .put("/t/m/before", "x", Some(lease.id()))
        .await
        .unwrap();
    let mut watch = client.watch_prefix("/t/m/", 0).await.unwrap();

    // Kill the member the client talks to.
    let current = client.current_member().to_owned();
    let i = (0..3).find(|&i| etcd.member(i) == current).unwrap();
    etcd.kill(i);

    // Requests move to another member; the watch resumes there; the lease lives on.
    client.put("/t/m/after", "y", None).await.unwrap();
    assert_ne!(client.current_member(), current);
    let put = timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (put.kind, put.kv.key.as_str()),
        (WatchKind::Put, "/t/m/after")
    );
    tokio::time::sleep(Duration::from_secs(6)).await; // longer than the lease: it must live
    assert!(!lease.is_lost(), "{}", etcd.logs());
    assert!(client.get("/t/m/before").await.unwrap().is_some());
}

fn object(name: &str, kind: ObjectKind, address: &str) -> ObjectInfo {
    ObjectInfo::new(name, kind, address)
}

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn the_registry_in_etcd_keeps_a_name_while_its_holder_lives() {
    let etcd = EtcdCluster::start(1);
    let url = etcd.endpoints();
    let names = NameClient::connect(&url, None).await.unwrap();
    assert!(names.is_etcd());
    let other_lab = NameClient::connect(&format!("{url}/lab2"), None)
        .await
        .unwrap();

    let s1 = names
        .register_and_renew(
            object("switch/s1", ObjectKind::SwitchServer, "http://127.0.0.1:1")
                .with_attribute("raw", "127.0.0.1:2"),
            SHORT,
        )
        .await
        .unwrap();
    let a = names
        .register_and_renew(object("host/a", ObjectKind::Host, "udp:127.0.0.1:3"), SHORT)
        .await
        .unwrap();
    let owner = object("owner/cm1", ObjectKind::OwnerClaim, "http://127.0.0.1:4");
    let claim = names.claim_and_renew(owner.clone(), SHORT).await.unwrap();

    // Resolved and listed (by kind too), through another client, with their leases.
    let reader = NameClient::connect(&url, None).await.unwrap();
    let (o, left) = reader.resolve("switch/s1").await.unwrap();
    assert_eq!(o.address, "http://127.0.0.1:1");
    assert_eq!(o.attributes["raw"], "127.0.0.1:2");
    assert!(left <= SHORT, "{left:?}");
    let all: Vec<String> = reader
        .list(None)
        .await
        .unwrap()
        .into_iter()
        .map(|(o, _)| o.name)
        .collect();
    assert_eq!(all, ["host/a", "owner/cm1", "switch/s1"]);
    let hosts = reader.list(Some(ObjectKind::Host)).await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].0.name, "host/a");
    // Another prefix is another directory.
    assert!(other_lab.list(None).await.unwrap().is_empty());

    // A claim on a held name at another address is refused, naming the holder; at the
    // same address it is the holder's again.
    let e = reader
        .claim(
            &object("owner/cm1", ObjectKind::OwnerClaim, "http://127.0.0.1:5"),
            Some(SHORT),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), atmlab_control::ErrorKind::Other(6), "{e}");
    assert!(e.to_string().contains("held by http://127.0.0.1:4"), "{e}");
    // Names and objects are checked before anything is written.
    let e = reader
        .register(&object("has space", ObjectKind::Host, "x"), None)
        .await
        .unwrap_err();
    assert!(matches!(e, ControlError::InvalidName { .. }), "{e}");
    let e = reader
        .register(&object("host/z", ObjectKind::Host, ""), None)
        .await
        .unwrap_err();
    assert!(matches!(e, ControlError::InvalidRegistration { .. }), "{e}");

    // Kept alive past several leases.
    tokio::time::sleep(SHORT * 3).await; // the thing under test is that time passes
    assert!(reader.resolve("switch/s1").await.is_ok());
    assert!(s1.renewals() >= 3, "{} keep-alives", s1.renewals());

    // A holder that stops renewing loses the name when its lease lapses; one that
    // stops cleanly removes it at once.
    s1.abandon().await;
    assert!(
        reader.resolve("switch/s1").await.is_ok(),
        "gone before its lease ran out"
    );
    eventually("switch/s1's lease lapsed", || {
        let reader = reader.clone();
        async move {
            matches!(
                reader.resolve("switch/s1").await,
                Err(ControlError::NotRegistered { .. })
            )
        }
    })
    .await;
    a.stop().await;
    assert!(matches!(
        reader.resolve("host/a").await,
        Err(ControlError::NotRegistered { .. })
    ));
    // The claim lapsed with its holder: another address may claim it now.
    claim.abandon().await;
    eventually("the claim lapsed", || {
        let reader = reader.clone();
        async move {
            reader
                .list(Some(ObjectKind::OwnerClaim))
                .await
                .unwrap()
                .is_empty()
        }
    })
    .await;
    reader
        .claim(
            &object("owner/cm1", ObjectKind::OwnerClaim, "http://127.0.0.1:5"),
            Some(SHORT),
        )
        .await
        .unwrap();
    drop(etcd);
}

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn a_route_view_follows_the_registry_in_etcd_as_it_changes() {
    use atmlab_control::route::{RouteObject, discover, spawn_refresher};
    use std::sync::{Arc, Mutex};
    let etcd = EtcdCluster::start(1);
    // The line of three, registered in its own name service; copied into etcd below.
    let (net, _) = crate::common::line3().await;
    let local = NameClient::connect(&net.names_url(), None).await.unwrap();
    let registry = NameClient::connect(&etcd.endpoints(), None).await.unwrap();
    let empty = discover(&registry, None).await.unwrap();
    let route = Arc::new(Mutex::new(RouteObject::new(empty).unwrap()));
    // Polled once an hour: only the registry's watch can bring changes in time.
    let refresher = spawn_refresher(
        route.clone(),
        registry.clone(),
        None,
        Duration::from_secs(3_600),
    );
    let mut held = Vec::new();
    for (o, _) in local.list(None).await.unwrap() {
        held.push((
            o.name.clone(),
            registry.register_and_renew(o, SHORT * 10).await.unwrap(),
        ));
    }
    let sees = |host: &'static str| {
        let route = route.clone();
        move || {
            let route = route.clone();
            async move { route.lock().unwrap().host(host).is_some() }
        }
    };
    eventually("the view has host b", sees("b")).await;
    eventually("the view has both links", || {
        let route = route.clone();
        async move { route.lock().unwrap().view().links().len() == 2 }
    })
    .await;
    // s3 and its host leave the registry: the view follows.
    for (name, h) in held {
        if name == "switch/s3" || name == "host/b" {
            h.stop().await;
        }
    }
    eventually("host b left the view", || {
        let route = route.clone();
        async move { route.lock().unwrap().host("b").is_none() }
    })
    .await;
    refresher.abort();
}

/// A follower's index in `etcd` (a member that is not the Raft leader), so that
/// freezing it does not also make the cluster elect a new leader.
async fn a_follower(etcd: &EtcdCluster) -> usize {
    for i in 0..3 {
        let one = EtcdClient::connect(&format!("etcd://{}", etcd.member(i)))
            .await
            .unwrap();
        let s = one.status().await.unwrap();
        if s.header.map(|h| h.member_id) != Some(s.leader) {
            return i;
        }
    }
    panic!("no follower in a three-member cluster");
}

/// The lease of the hung-member test: long enough that a keep-alive delayed by a loaded
/// machine (the heavy tier runs tests side by side on two cores) is not what the test
/// sees, short enough that the member's hang lasts several TTLs within the test.
const HUNG_TTL: Duration = Duration::from_secs(3);

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn a_lease_and_a_campaign_outlive_a_member_that_hangs() {
    let etcd = EtcdCluster::start(3);
    let hung = a_follower(&etcd).await;
    let others: Vec<usize> = (0..3).filter(|&i| i != hung).collect();
    // The waiting campaigner talks to the member that will hang; the leader to others.
    let list = |first: usize| {
        let order = [first, (first + 1) % 3, (first + 2) % 3];
        let members: Vec<String> = order.iter().map(|&i| etcd.member(i)).collect();
        format!("etcd://{}", members.join(","))
    };
    let leader_side = EtcdClient::connect(&list(others[0])).await.unwrap();
    let waiter_side = EtcdClient::connect(&list(hung)).await.unwrap();
    assert_eq!(waiter_side.current_member(), etcd.member(hung));
    let lease_one = leader_side.grant(HUNG_TTL).await.unwrap();
    let first = leader_side
        .election()
        .campaign("cm/beta", "first", &lease_one)
        .await
        .unwrap();
    let lease_two = waiter_side.grant(HUNG_TTL).await.unwrap();
    let election = waiter_side.election();
    let mut second = Box::pin(election.campaign("cm/beta", "second", &lease_two));
    assert!(
        timeout(Duration::from_millis(300), &mut second)
            .await
            .is_err()
    );

    // The member hangs: connections open, nothing answered.
    etcd.pause(hung);
    // Keep-alives move on to another member within a third of the TTL each, so the
    // lease lives on although its member said nothing for several TTLs.
    let frozen = Instant::now();
    tokio::time::sleep(HUNG_TTL * 3).await; // the thing under test is that time passes
    assert!(
        !lease_two.is_lost(),
        "the lease was lost {:?} after its member hung",
        frozen.elapsed()
    );
    assert_ne!(waiter_side.current_member(), etcd.member(hung));

    // The leader resigns: the campaign, waiting through a watch on the hung member,
    // notices the dead connection (HTTP/2 pings), watches again through another
    // member, and is elected.
    first.resign().await.unwrap();
    let second = timeout(DEADLINE, second).await.unwrap().unwrap();
    eprintln!(
        "elected {:?} after the member hung (its connection found dead by pings)",
        frozen.elapsed()
    );
    assert!(!second.is_lost());
    let current = leader_side.election().leader("cm/beta").await.unwrap();
    assert_eq!(current.unwrap().key, second.key());

    // The hung member comes back: nothing it held (a watch, requests cut off) may
    // cost the standing leader its key.
    etcd.resume(hung);
    etcd.wait_healthy();
    let back = Instant::now();
    while back.elapsed() < HUNG_TTL * 2 {
        // The thing under test is that the member has time to act.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !second.is_lost(),
            "leadership lost after the member came back"
        );
    }
    let current = leader_side.election().leader("cm/beta").await.unwrap();
    assert_eq!(current.unwrap().key, second.key());
}

#[tokio::test]
#[ignore = "heavy tier (scripts/test.sh): needs etcd (Debian's etcd-server)"]
async fn a_registry_in_etcd_over_mutual_tls_refuses_strangers() {
    use atmlab_rpc::tls::{self, Subject, TlsFiles};
    let dir = tempfile::tempdir().unwrap();
    let subjects = Subject::list(&["names:etcd0", "switch:s1", "admin:admin"]).unwrap();
    tls::init_certs(dir.path(), &subjects, false).unwrap();
    let load = |dir: &std::path::Path, name| TlsFiles::in_dir(dir, name).load().unwrap();
    let etcd = EtcdCluster::start_tls(dir.path(), &["etcd0"]);
    let url = etcd.endpoints();
    assert!(url.starts_with("etcds://"), "{url}");

    // Lab certificates: a switch registers, an operator reads.
    let names = NameClient::connect(&url, Some(&load(dir.path(), "s1")))
        .await
        .unwrap();
    let held = names
        .register_and_renew(
            object("switch/s1", ObjectKind::SwitchServer, "https://127.0.0.1:1"),
            SHORT,
        )
        .await
        .unwrap();
    let admin = NameClient::connect(&url, Some(&load(dir.path(), "admin")))
        .await
        .unwrap();
    let (o, _) = admin.resolve("switch/s1").await.unwrap();
    assert_eq!(o.address, "https://127.0.0.1:1");

    // A stranger (another CA's certificate), a client without one, and plain text are
    // all refused.
    let elsewhere = tempfile::tempdir().unwrap();
    tls::init_certs(
        elsewhere.path(),
        &Subject::list(&["admin:admin"]).unwrap(),
        false,
    )
    .unwrap();
    let stranger = load(elsewhere.path(), "admin");
    assert!(NameClient::connect(&url, Some(&stranger)).await.is_err());
    let e = NameClient::connect(&url, None).await.unwrap_err();
    assert!(e.to_string().contains("needs a TLS identity"), "{e}");
    let plain = url.replacen("etcds://", "etcd://", 1);
    assert!(NameClient::connect(&plain, None).await.is_err());
    held.stop().await;
    assert!(admin.list(None).await.unwrap().is_empty());
}
