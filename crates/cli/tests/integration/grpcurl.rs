//! Operators' gRPC tools against a running network (issue 25, item 4): the real `grpcurl`
//! binary, with the lab's certificates as an operator would pass them, lists, describes
//! and health-checks `atmlab up`'s connection manager and a switch server through
//! server reflection and `grpc.health.v1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The grpcurl to run: `ATMLAB_GRPCURL`, else `.tools/bin/grpcurl` in the clone (where
/// scripts/test.sh builds it), else one on `PATH`. None is a failure, not a skip.
fn grpcurl() -> PathBuf {
    if let Some(p) = std::env::var_os("ATMLAB_GRPCURL") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "ATMLAB_GRPCURL={} is not a file: run scripts/test.sh, which builds grpcurl \
             into .tools/bin, or point ATMLAB_GRPCURL at a grpcurl binary",
            p.display()
        );
        return p;
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/grpcurl");
    if tools.is_file() {
        return tools;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("grpcurl"))
            .find(|p| p.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "grpcurl not found (not in ATMLAB_GRPCURL, {}, nor on PATH): run scripts/test.sh, \
             which builds the pinned version into .tools/bin",
            tools.display()
        )
    })
}

/// `atmlab up`, killed when the test ends however it ends.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `grpcurl FLAGS ADDR VERB...` as the lab's admin against `addr`, expecting the
/// server named `authority` (`NAME.ROLE.atmlab`).
fn run(certs: &Path, authority: &str, flags: &[&str], addr: &str, verb: &[&str]) -> Output {
    let tool = grpcurl();
    let out = Command::new(&tool)
        .arg("-cacert")
        .arg(certs.join("ca.pem"))
        .arg("-cert")
        .arg(certs.join("admin.pem"))
        .arg("-key")
        .arg(certs.join("admin.key"))
        .args(["-authority", authority, "-max-time", "20"])
        .args(flags)
        .arg(addr)
        .args(verb)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "grpcurl {flags:?} {verb:?} against {authority} at {addr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole network under TLS, and grpcurl built with Go"]
fn grpcurl_lists_describes_and_checks_health_of_a_running_network() {
    // Found first: a missing tool fails the test before the network starts.
    let _ = grpcurl();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up = Up(Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["up", "--data"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let net = data.join("net.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let v = loop {
        if let Ok(t) = std::fs::read_to_string(&net)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["cm"].is_string()
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "atmlab up never wrote its addresses"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let certs = data.join("certs");
    let addr = |url: &str| url.trim_start_matches("https://").to_string();
    let cm = addr(v["cm"].as_str().unwrap());
    assert!(v["cm"].as_str().unwrap().starts_with("https://"), "{v}");
    let s1 = &v["switches"][0];
    let switch = addr(s1["grpc"].as_str().unwrap());
    let switch_name = format!("{}.switch.atmlab", s1["name"].as_str().unwrap());

    for (authority, addr, service) in [
        ("cm-xbind.cm.atmlab", &cm, "atmlab.v1.ConnectionManager"),
        (switch_name.as_str(), &switch, "atmlab.v1.SwitchServer"),
    ] {
        let list = run(&certs, authority, &[], addr, &["list"]);
        let list = String::from_utf8_lossy(&list.stdout);
        let names: Vec<&str> = list.lines().collect();
        assert!(names.contains(&service), "{authority}: {list}");
        assert!(
            names.contains(&"grpc.health.v1.Health"),
            "{authority}: {list}"
        );

        let described = run(&certs, authority, &[], addr, &["describe", service]);
        let described = String::from_utf8_lossy(&described.stdout);
        assert!(
            described.contains(&format!("{service} is a service")) && described.contains("rpc "),
            "{authority}: {described}"
        );

        for name in ["", service] {
            let body = serde_json::json!({ "service": name }).to_string();
            let health = run(
                &certs,
                authority,
                &["-d", &body],
                addr,
                &["grpc.health.v1.Health/Check"],
            );
            let answer: serde_json::Value = serde_json::from_slice(&health.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&health.stdout)));
            assert_eq!(answer["status"], "SERVING", "{authority} {name:?}");
        }
    }
    drop(up);
}
