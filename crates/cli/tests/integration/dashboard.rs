//! The dashboard in a real browser (issue 25, acceptance 2): `atmlab up` serves it, calls
//! run from `callgen`, a connection is set up with `cm connect`, and headless Chromium
//! (Debian's `chromium`, driven through its WebDriver, `chromedriver`) loads the page.
//! The page must show every switch of the topology, a non-zero call rate and the
//! connection the test set up, and its path once clicked; a screenshot is taken (set
//! `ATMLAB_SCREENSHOT=docs/dashboard.png` to refresh the one the README shows).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::common::{Proc, http, serve_on_free_port};

/// `name` on the PATH, or a test failure saying how to get it.
fn tool(name: &str) -> String {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "{name} is missing: run the README's test command (bash scripts/test.sh), which \
         installs Debian's chromium and chromium-driver"
    );
    path
}

/// A WebDriver session on a chromedriver at `addr`.
struct Browser {
    addr: SocketAddr,
    session: String,
}

impl Browser {
    fn call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let path = format!("/session/{}{path}", self.session);
        let body = (method == "POST").then(|| body.to_string());
        let (code, text) = http(self.addr, method, &path, body.as_deref())
            .unwrap_or_else(|| panic!("chromedriver did not answer {method} {path}"));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(code, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn script(&self, js: &str) -> serde_json::Value {
        self.call(
            "POST",
            "/execute/sync",
            serde_json::json!({ "script": js, "args": [] }),
        )
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.addr,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): a live network and a headless Chromium"]
fn the_dashboard_shows_the_network_calls_and_a_connection_in_chromium() {
    let _cpu = crate::common::measuring_alone();
    let chromium = tool("chromium");
    let chromedriver = tool("chromedriver");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();

    // The network, its manager and its dashboard.
    let mut up = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["--data", data, "up", "--insecure", "--json"])
        .args(["--dashboard", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = BufReader::new(up.stdout.take().unwrap())
        .lines()
        .next()
        .expect("up prints its addresses")
        .unwrap();
    let _up = Proc(up);
    let net: serde_json::Value = serde_json::from_str(&line).unwrap();
    let page = net["dashboard"]
        .as_str()
        .expect("a dashboard URL")
        .to_string();
    let cm = net["cm"]
        .as_str()
        .unwrap()
        .split("://")
        .nth(1)
        .unwrap()
        .to_string();
    let switches: Vec<String> = net["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert!(switches.len() >= 3, "{net}");

    // Calls for the charts, and one connection of the test's own.
    let _calls = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["--data", data, "callgen", "--insecure", "--cm", &cm])
            .args(["--rate", "200", "--seconds", "60", "--holding", "50 ms"])
            .args(["--pair", "a:b", "--allow-failures"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let o = crate::common::atmlab(
        &[
            "--data",
            data,
            "cm",
            "connect",
            "--insecure",
            "--cm",
            &cm,
            "--from",
            "a",
            "--to",
            "b",
            "--pcr",
            "5000",
            "--json",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let conn: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = conn["id"].as_u64().unwrap().to_string();
    // Cells on it for a while (paced below its 5,000 cells/s), so the links show a rate.
    let a = net["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "a")
        .expect("host a");
    let file = dir.path().join("cells.bin");
    std::fs::write(&file, vec![0x5a; 3_000_000]).unwrap();
    let _cells = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["--data", data, "host", "send", "--insecure", "--as", "a"])
            .args(["--switch", a["attach"].as_str().unwrap()])
            .args(["--control", a["control"].as_str().unwrap()])
            .args(["--port", &a["port"].to_string()])
            .args([
                "--vc",
                conn["source_vc"].as_str().unwrap(),
                "--rate",
                "1.5 Mb/s",
            ])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // The browser.
    let (_driver, addr) =
        serve_on_free_port("chromedriver", "/status", Duration::from_secs(60), |port| {
            Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        });
    let caps = serde_json::json!({ "capabilities": { "alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1100"],
        },
    }}});
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        let answer = http(addr, "POST", "/session", Some(&caps.to_string()));
        if let Some((200, text)) = &answer {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            break v["value"]["sessionId"].as_str().unwrap().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver never started a session: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let browser = Browser { addr, session };
    browser.call("POST", "/url", serde_json::json!({ "url": page }));

    // What a person sees: every switch drawn, a call rate above zero, the live stream
    // on, and our connection in the list.
    let seen = r#"
        const t = (id) => (document.getElementById(id) || {}).textContent || "";
        return {
          switches: [...document.querySelectorAll('#topo g.switch text')].map(e => e.textContent),
          rate: t('now-rate'),
          live: t('live'),
          conns: [...document.querySelectorAll('#conns tbody tr')].map(r => r.cells[0].textContent),
          updates: Number(document.body.dataset.updates || 0),
        };"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    let last = loop {
        let v = browser.script(seen);
        let drawn: Vec<String> = serde_json::from_value(v["switches"].clone()).unwrap();
        let rate: f64 = v["rate"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .next()
            .and_then(|n| n.replace(',', "").parse().ok())
            .unwrap_or(0.0);
        let listed = v["conns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str() == Some(id.as_str()));
        if switches.iter().all(|s| drawn.contains(s))
            && rate > 0.0
            && listed
            && v["live"] == "live"
            && v["updates"].as_u64().unwrap_or(0) >= 5
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed the network: {v} (switches {switches:?}, connection {id})"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!("the page: {last}");

    // Click our connection: its hops are listed, switch by switch, and its links drawn
    // as its path.
    let hops = browser.script(&format!(
        r#"const row = [...document.querySelectorAll('#conns tbody tr')]
             .find(r => r.cells[0].textContent === "{id}");
           row.click();
           return {{ hops: document.getElementById('hops').textContent,
                     path: document.querySelectorAll('#topo .path').length }};"#
    ));
    let text = hops["hops"].as_str().unwrap();
    for hop in conn["hops"].as_array().unwrap() {
        let sw = hop["switch"].as_str().unwrap();
        assert!(text.contains(sw), "hop {sw} missing from {text:?}");
    }
    assert!(hops["path"].as_u64().unwrap() > 0, "no path drawn: {hops}");

    let png = browser.call("GET", "/screenshot", serde_json::Value::Null);
    let png = base64::engine::general_purpose::STANDARD
        .decode(png.as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let to = std::env::var_os("ATMLAB_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("dashboard.png"));
    std::fs::write(&to, &png).unwrap();
}
