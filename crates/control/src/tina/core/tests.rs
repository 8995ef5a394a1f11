//! The performer cores driven without I/O (paper 001 §1.2.1, §4.3): an LNC over a
//! two-level NML-CP hierarchy over one EML-CP per switch, each switch the sans-IO switch
//! core, connected by an in-test loop that carries every invocation to its callee and
//! every answer back.

use std::collections::{BTreeMap, HashMap, VecDeque};

use atmlab_core::time::Instant;
use atmlab_core::traffic::ServiceClass;
use atmlab_core::units::BitRate;
use atmlab_fabric::config::SwitchConfig;
use atmlab_fabric::switch::Switch;

use super::super::partition::{Subnetwork, hierarchy};
use super::super::{Counts, SetupMode, iface};
use super::eml::EmlCore;
use super::lnc::{CallInfo, Contract, LncCore, LncReply, LncRequest};
use super::nml::NmlCore;
use super::{
    ErrorKind, HopSpec, InvocationId, OpId, SncCore, SncError, SncRequest, SncResult, Traffic,
};

enum Node {
    Nml(NmlCore),
    Eml(EmlCore),
}

/// Something in flight between two machines.
enum Msg {
    /// An operation for node `node`, from `parent` (`None`: the LNC) under `id`.
    Request {
        node: usize,
        parent: Option<usize>,
        id: InvocationId,
        request: SncRequest,
    },
    /// An answer for `node` (`None`: the LNC).
    Answer {
        node: Option<usize>,
        id: InvocationId,
        answer: SncResult,
    },
}

/// The in-test network: every machine, the switches, and what is in flight.
struct Net {
    lnc: LncCore,
    /// Node 0 is the root NML-CP.
    nodes: Vec<Node>,
    /// Per node, the node of each of its children.
    kids: Vec<Vec<usize>>,
    switches: BTreeMap<String, Switch>,
    route: Vec<HopSpec>,
    /// The operation each node runs for a caller: (node, op) -> (caller, invocation).
    callers: HashMap<(usize, OpId), (Option<usize>, InvocationId)>,
    next_op: OpId,
    queue: VecDeque<Msg>,
    /// The most child invocations one NML-CP had in flight at once.
    widest: usize,
    /// The next Release sent to this switch fails, as a switch server briefly away.
    fail_release_at: Option<String>,
    now: Instant,
}

impl Net {
    /// Three switches on a line, the last one's output port admitting `last_rate`
    /// cells/s if given; the hierarchy root, {s1, s2}, {s3} (depth 2, fan-out 2).
    fn new(mode: SetupMode, last_rate: Option<f64>) -> Net {
        let names: Vec<String> = ["s1", "s2", "s3"].iter().map(|s| s.to_string()).collect();
        let mut switches = BTreeMap::new();
        for n in &names {
            let mut c = SwitchConfig::uniform(n, 2, BitRate(155.52e6));
            if let (Some(rate), "s3") = (last_rate, n.as_str()) {
                c.ports[1].capacity = atmlab_core::units::CellRate(rate);
            }
            switches.insert(n.clone(), Switch::new(&c).unwrap());
        }
        let mut net = Net {
            lnc: LncCore::new(),
            nodes: Vec::new(),
            kids: Vec::new(),
            switches,
            route: HopSpec::through(&["s1", "s2", "s3"], 0, 1),
            callers: HashMap::new(),
            next_op: 1,
            queue: VecDeque::new(),
            widest: 0,
            fail_release_at: None,
            now: Instant::from_picos(0),
        };
        net.add(&hierarchy(&names, 2, 2).unwrap(), mode);
        net
    }

    /// The node of `sub` and, below it, its children's; returns its index.
    fn add(&mut self, sub: &Subnetwork, mode: SetupMode) -> usize {
        let me = self.nodes.len();
        let (n, child_iface) = if sub.children.is_empty() {
            (sub.switches.len(), iface::NML_EML)
        } else {
            (sub.children.len(), iface::NML_NML)
        };
        let core = NmlCore::new(sub.clone(), vec![child_iface; n], mode);
        self.nodes.push(Node::Nml(core));
        self.kids.push(Vec::new());
        let mut kids = Vec::new();
        if sub.children.is_empty() {
            for sw in &sub.switches {
                kids.push(self.nodes.len());
                self.nodes.push(Node::Eml(EmlCore::new(sw.clone(), "tina")));
                self.kids.push(Vec::new());
            }
        } else {
            for c in &sub.children {
                kids.push(self.add(c, mode));
            }
        }
        self.kids[me] = kids;
        me
    }

    /// Runs `request` at the LNC to its end.
    fn run(&mut self, request: LncRequest) -> Result<LncReply, SncError> {
        let op = self.next_op;
        self.next_op += 1;
        self.lnc.handle_request(self.now, op, request);
        let mut out = None;
        loop {
            self.now = self
                .now
                .saturating_add(atmlab_core::time::Duration::from_micros(10));
            while let Some((o, r)) = self.lnc.poll_reply() {
                assert_eq!(o, op);
                out = Some(r);
            }
            while let Some(r) = self.lnc.poll_route() {
                assert_eq!(r.destination, "b");
                self.lnc
                    .handle_route(self.now, r.id, Ok(self.route.clone()));
            }
            while let Some(t) = self.lnc.poll_transmit() {
                let (node, parent, id, request) = (0, None, t.id, t.call);
                self.queue.push_back(Msg::Request {
                    node,
                    parent,
                    id,
                    request,
                });
            }
            for i in 0..self.nodes.len() {
                self.drain(i);
            }
            let Some(msg) = self.queue.pop_front() else {
                return out.expect("the LNC answered");
            };
            self.deliver(msg);
        }
    }

    /// Takes what node `i` emitted into the queue (a switch answers at once).
    fn drain(&mut self, i: usize) {
        let mut batch = 0;
        match &mut self.nodes[i] {
            Node::Nml(n) => {
                while let Some(t) = n.poll_transmit() {
                    batch += 1;
                    let node = self.kids[i][t.call.child];
                    let (parent, id, request) = (Some(i), t.id, t.call.request);
                    self.queue.push_back(Msg::Request {
                        node,
                        parent,
                        id,
                        request,
                    });
                }
            }
            Node::Eml(e) => {
                while let Some(t) = e.poll_transmit() {
                    let sw = self.switches.get_mut(e.switch()).unwrap();
                    let fail = matches!(t.call, atmlab_fabric::switch::Command::Release(_))
                        && self.fail_release_at.as_deref() == Some(e.switch());
                    let answer = if fail {
                        self.fail_release_at = None;
                        Err(SncError::new(ErrorKind::Unavailable, "switch server away"))
                    } else {
                        sw.apply(&t.call).map_err(|e| {
                            SncError::new(SncError::of_fabric(e.kind()), e.to_string())
                        })
                    };
                    e.handle_answer(t.id, answer);
                }
            }
        }
        self.widest = self.widest.max(batch);
        loop {
            let reply = match &mut self.nodes[i] {
                Node::Nml(n) => n.poll_reply(),
                Node::Eml(e) => e.poll_reply(),
            };
            let Some((op, answer)) = reply else { break };
            let (node, id) = self.callers.remove(&(i, op)).expect("a caller");
            self.queue.push_back(Msg::Answer { node, id, answer });
        }
    }

    fn deliver(&mut self, msg: Msg) {
        match msg {
            Msg::Request {
                node,
                parent,
                id,
                request,
            } => {
                let op = self.next_op;
                self.next_op += 1;
                self.callers.insert((node, op), (parent, id));
                match &mut self.nodes[node] {
                    Node::Nml(n) => n.handle_request(op, request),
                    Node::Eml(e) => e.handle_request(op, request),
                }
            }
            Msg::Answer {
                node: None,
                id,
                answer,
            } => self.lnc.handle_answer(self.now, id, answer),
            Msg::Answer {
                node: Some(n),
                id,
                answer,
            } => match &mut self.nodes[n] {
                Node::Nml(c) => c.handle_answer(id, answer),
                Node::Eml(_) => unreachable!("an EML-CP's callees are switches"),
            },
        }
    }

    /// Every machine's invocations, by interface.
    fn totals(&self) -> Counts {
        let mut all = self.lnc.invocations().clone();
        for n in &self.nodes {
            let c = match n {
                Node::Nml(c) => c.invocations(),
                Node::Eml(c) => c.invocations(),
            };
            super::add(&mut all, c);
        }
        all
    }

    /// SNCs held by every performer.
    fn sncs(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|n| match n {
                Node::Nml(c) => c.sncs(),
                Node::Eml(c) => c.sncs(),
            })
            .collect()
    }

    /// Switches holding connections or reservations.
    fn dirty(&self) -> Vec<&str> {
        self.switches
            .iter()
            .filter(|(_, s)| s.connection_count() > 0 || !s.reservations().is_empty())
            .map(|(n, _)| n.as_str())
            .collect()
    }

    fn add_call(&mut self, pcr: f64) -> Result<CallInfo, SncError> {
        let contract = Contract {
            traffic: Traffic {
                class: ServiceClass::Cbr,
                pcr,
                scr: 0.0,
                mbs: 0,
                clr: 0.0,
            },
            ctd_us: 0,
            cdv_us: 0,
            burst_tolerance_us: 0,
        };
        match self.run(LncRequest::Add {
            source: "a".into(),
            destinations: vec!["b".into()],
            contract,
            tag: "unit".into(),
        })? {
            LncReply::Connection(info) => Ok(*info),
            LncReply::Deleted => panic!("an Add answered Deleted"),
        }
    }
}

#[test]
fn a_setup_crosses_two_levels_sequentially_or_in_parallel_and_releases() {
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        let mut net = Net::new(mode, None);
        let info = net.add_call(10_000.0).unwrap();
        assert_eq!(info.hops.len(), 3, "{mode:?}");
        assert!(info.source_vc.is_some());
        // Consecutive hops agree on the identifier of the link between them.
        for w in info.hops.windows(2) {
            assert_eq!(w[0].out_id, w[1].in_id, "{mode:?}");
            assert!(w[0].out_id.is_some());
        }
        for (h, (name, sw)) in info.hops.iter().zip(&net.switches) {
            assert_eq!(&h.switch, name);
            assert_eq!(sw.connections()[0].id, h.connection);
        }
        // The contract comes back as given (CBR with no SCR or MBS on the wire).
        assert_eq!(info.contract.traffic.scr, 0.0);
        let inv = net.totals();
        assert_eq!(inv[iface::LNC_NML], 1);
        match mode {
            SetupMode::Sequential => {
                assert_eq!(
                    (
                        inv[iface::NML_NML],
                        inv[iface::NML_EML],
                        inv[iface::EML_SWITCH]
                    ),
                    (2, 3, 3 + 3 + 1)
                );
                assert_eq!(net.widest, 1, "sequential: one child at a time");
            }
            SetupMode::Parallel => {
                // root: ReserveLink (s2's output) via nml.0, then both setups; nml.0:
                // ReserveLink (s1's output) via s1's EML-CP, then both setups.
                assert_eq!(
                    (
                        inv[iface::NML_NML],
                        inv[iface::NML_EML],
                        inv[iface::EML_SWITCH]
                    ),
                    (3, 1 + 1 + 2 + 1, 2 + 3 + 2)
                );
                assert_eq!(net.widest, 2, "parallel: both children at once");
            }
        }
        assert_eq!(u64::from(info.invocations), inv.values().sum::<u64>());
        assert_eq!(net.lnc.get(info.id), Some(&info));

        assert_eq!(
            net.run(LncRequest::Delete { id: info.id }),
            Ok(LncReply::Deleted)
        );
        assert!(net.dirty().is_empty(), "{mode:?}: {:?}", net.dirty());
        assert!(
            net.sncs().iter().all(|&n| n == 0),
            "{mode:?}: {:?}",
            net.sncs()
        );
        assert_eq!(net.lnc.active(), 0);
        let again = net.run(LncRequest::Delete { id: info.id }).unwrap_err();
        assert_eq!(again.kind, ErrorKind::NotFound);
    }
}

#[test]
fn a_setup_refused_at_the_last_hop_leaves_nothing() {
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        let mut net = Net::new(mode, Some(5_000.0));
        let e = net.add_call(10_000.0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ResourceExhausted, "{mode:?}: {e}");
        assert!(net.dirty().is_empty(), "{mode:?}: {:?}", net.dirty());
        assert!(
            net.sncs().iter().all(|&n| n == 0),
            "{mode:?}: {:?}",
            net.sncs()
        );
        let s = net.lnc.stats();
        assert_eq!((s.blocked, s.rollbacks, s.established), (1, 1, 0));
        assert_eq!(net.lnc.active(), 0);
        // What fits still goes through afterwards.
        net.add_call(1_000.0).unwrap();
    }
}

#[test]
fn a_release_whose_child_release_fails_keeps_the_part_for_a_retry() {
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        let mut net = Net::new(mode, None);
        let info = net.add_call(10_000.0).unwrap();
        net.fail_release_at = Some("s2".into());
        let e = net.run(LncRequest::Delete { id: info.id }).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{mode:?}");
        // s1 and s3 are released; s2's part is still held, all the way up.
        assert_eq!(net.dirty(), vec!["s2"], "{mode:?}");
        assert_eq!(net.lnc.active(), 1);
        let held: usize = net.sncs().iter().sum();
        // The root's SNC, nml.0's (s2's part only), s2's EML-CP's.
        assert_eq!(held, 3, "{mode:?}: {:?}", net.sncs());
        // The retry releases only what is left: nothing is released twice (a second
        // release of s1's connection would be refused by the switch).
        assert_eq!(
            net.run(LncRequest::Delete { id: info.id }),
            Ok(LncReply::Deleted)
        );
        assert!(net.dirty().is_empty(), "{mode:?}: {:?}", net.dirty());
        assert!(net.sncs().iter().all(|&n| n == 0), "{mode:?}");
        assert_eq!(net.lnc.stats().released, 1);
    }
}

#[test]
fn an_eml_cp_gives_back_what_a_refused_setup_reserved() {
    let cfg = SwitchConfig::uniform("s1", 2, BitRate(1e6));
    let mut sw = Switch::new(&cfg).unwrap();
    let mut eml = EmlCore::new("s1", "tina");
    let setup = super::SetupSnc {
        hops: HopSpec::through(&["s1"], 0, 1),
        in_id: None,
        out_id: None,
        traffic: Some(Traffic {
            class: ServiceClass::Cbr,
            pcr: 1e9,
            scr: 0.0,
            mbs: 0,
            clr: 0.0,
        }),
        buffer_cells: 0,
        tag: String::new(),
    };
    eml.handle_request(7, SncRequest::Setup(setup));
    let mut commands = Vec::new();
    while let Some(t) = eml.poll_transmit() {
        let answer = sw
            .apply(&t.call)
            .map_err(|e| SncError::new(SncError::of_fabric(e.kind()), e.to_string()));
        commands.push(t.call);
        eml.handle_answer(t.id, answer);
    }
    let (op, r) = eml.poll_reply().unwrap();
    assert_eq!(op, 7);
    assert_eq!(r.unwrap_err().kind, ErrorKind::ResourceExhausted);
    // Reserve in, reserve out, commit (refused), then both given back, in order.
    let kinds: Vec<&str> = commands
        .iter()
        .map(|c| match c {
            atmlab_fabric::switch::Command::Reserve(_) => "reserve",
            atmlab_fabric::switch::Command::Commit(_) => "commit",
            atmlab_fabric::switch::Command::Unreserve(_) => "unreserve",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["reserve", "reserve", "commit", "unreserve", "unreserve"]
    );
    assert!(sw.reservations().is_empty());
    assert_eq!(eml.sncs(), 0);
    assert_eq!(eml.invocations()[iface::EML_SWITCH], 5);
}
