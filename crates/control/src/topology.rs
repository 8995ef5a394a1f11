//! Topology files (paper 000 §III and paper 001 §4's testbeds, as text): the switches, the
//! links between their ports and the hosts on them, with port defaults. One format for
//! both shells: `atmlab net up` starts it live ([`crate::net`]), and the simulated control
//! plane (`atmlab-models`, model kind `control`) runs the same file in virtual time. Needs
//! the `topology` feature (serde and TOML, no I/O besides [`Topology::load`]).
//!
//! A topology (TOML):
//!
//! ```toml
//! name = "line3"
//! [defaults]                 # optional, for every port
//! link_rate = "155.52 Mb/s"
//! buffer_cells = 1024
//!
//! [[switch]]
//! name = "s1"
//! ports = 2                  # ports 0..2
//!
//! [[link]]                   # a duplex link between two switch ports (NNI)
//! a = "s1:1"
//! b = "s2:0"
//!
//! [[host]]                   # an end system on a switch port (UNI)
//! name = "a"
//! at = "s1:0"
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;

use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::{Interface, PortConfig, SwitchConfig};
use serde::Deserialize;

use crate::ControlError;
use crate::route::{NetworkView, PortState};

/// Port settings shared by every port unless a switch says otherwise.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortDefaults {
    /// Link rate, e.g. "155.52 Mb/s".
    pub link_rate: Option<String>,
    /// Admissible bandwidth, e.g. "300000 cells/s".
    pub capacity: Option<String>,
    /// Output buffer (cells).
    pub buffer_cells: Option<u32>,
    /// VPI range.
    pub vpi: Option<[u16; 2]>,
    /// VCI range.
    pub vci: Option<[u16; 2]>,
}

/// One switch of a topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Its name (letters, digits, '-', '.'; it is also its certificate's name).
    pub name: String,
    /// Number of ports, numbered from 0.
    pub ports: u16,
    /// Overrides of the defaults for this switch's ports.
    #[serde(default)]
    pub port: Option<PortDefaults>,
}

/// A link between two switch ports, written "switch:port".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
}

/// An end system attached to a switch port.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Its name.
    pub name: String,
    /// "switch:port".
    pub at: String,
}

/// A whole topology file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The network's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Port defaults.
    #[serde(default)]
    pub defaults: PortDefaults,
    /// Switches.
    #[serde(rename = "switch", default)]
    pub switches: Vec<SwitchSpec>,
    /// Links.
    #[serde(rename = "link", default)]
    pub links: Vec<LinkSpec>,
    /// Hosts.
    #[serde(rename = "host", default)]
    pub hosts: Vec<HostSpec>,
}

/// A "switch:port" reference.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRef {
    /// The switch.
    pub switch: String,
    /// The port.
    pub port: u16,
}

impl Topology {
    /// Parses and checks a topology; errors name the origin and the key.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ControlError> {
        let t: Topology = toml::from_str(text).map_err(|e| ControlError::Topology {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        t.check(origin)?;
        Ok(t)
    }

    /// Reads a topology file.
    pub fn load(path: &Path) -> Result<Self, ControlError> {
        let text = std::fs::read_to_string(path).map_err(|e| ControlError::Topology {
            origin: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Resolves "switch:port", checking both exist.
    pub fn port_ref(&self, s: &str) -> Result<PortRef, String> {
        let (sw, p) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not written \"switch:port\""))?;
        let port: u16 = p
            .parse()
            .map_err(|_| format!("{s:?}: {p:?} is not a port number"))?;
        let spec = self
            .switches
            .iter()
            .find(|x| x.name == sw)
            .ok_or_else(|| format!("{s:?}: there is no switch {sw:?}"))?;
        if port >= spec.ports {
            return Err(format!("{s:?}: switch {sw} has ports 0..{}", spec.ports));
        }
        Ok(PortRef {
            switch: sw.to_string(),
            port,
        })
    }

    fn check(&self, origin: &str) -> Result<(), ControlError> {
        let err = |message: String| ControlError::Topology {
            origin: origin.to_string(),
            message,
        };
        let bad = |message: String| Err(err(message));
        if self.switches.is_empty() {
            return bad("no [[switch]]".into());
        }
        let mut names = BTreeSet::new();
        for s in &self.switches {
            let ok = !s.name.is_empty()
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                && s.name != "ca"
                && s.name != "names"
                && s.name != "admin";
            if !ok {
                return bad(format!(
                    "switch name {:?}: use letters, digits, '-' and '.' (not ca, names, admin)",
                    s.name
                ));
            }
            if !names.insert(s.name.clone()) {
                return bad(format!("switch {:?} appears twice", s.name));
            }
            if s.ports == 0 {
                return bad(format!("switch {}: ports must be at least 1", s.name));
            }
        }
        let mut used: BTreeMap<PortRef, String> = BTreeMap::new();
        let mut claim = |r: PortRef, by: String| -> Result<(), String> {
            if let Some(prev) = used.insert(r.clone(), by.clone()) {
                return Err(format!(
                    "{}:{} is used by both {prev} and {by}",
                    r.switch, r.port
                ));
            }
            Ok(())
        };
        for (i, l) in self.links.iter().enumerate() {
            let a = self
                .port_ref(&l.a)
                .map_err(|e| err(format!("link[{i}].a: {e}")))?;
            let b = self
                .port_ref(&l.b)
                .map_err(|e| err(format!("link[{i}].b: {e}")))?;
            claim(a, format!("link[{i}]")).map_err(err)?;
            claim(b, format!("link[{i}]")).map_err(err)?;
        }
        let mut hosts = BTreeSet::new();
        for h in &self.hosts {
            if !hosts.insert(h.name.clone()) {
                return bad(format!("host {:?} appears twice", h.name));
            }
            let r = self
                .port_ref(&h.at)
                .map_err(|e| err(format!("host {}: at: {e}", h.name)))?;
            claim(r, format!("host {}", h.name)).map_err(err)?;
        }
        // Every port's values (rates, capacities, ranges) as each switch will take them,
        // so that a topology `net check` accepts is one `net up` starts, and a bad value
        // is refused before anything is made, under the key the file gives it.
        self.switch_configs().map_err(|e| match e {
            ControlError::Topology { message, .. } => err(message),
            other => other,
        })?;
        Ok(())
    }

    /// The trunk ports of `switch` (those on a link), which carry NNI headers.
    pub fn trunk_ports(&self, switch: &str) -> BTreeSet<u16> {
        self.links
            .iter()
            .flat_map(|l| [self.port_ref(&l.a), self.port_ref(&l.b)])
            .flatten()
            .filter(|r| r.switch == switch)
            .map(|r| r.port)
            .collect()
    }

    /// The settings of `switch`'s ports: its own overrides, else the defaults.
    pub fn port_settings(&self, switch: &SwitchSpec) -> PortDefaults {
        let d = switch.port.clone().unwrap_or_default();
        let pick = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        PortDefaults {
            link_rate: pick(&d.link_rate, &self.defaults.link_rate),
            capacity: pick(&d.capacity, &self.defaults.capacity),
            buffer_cells: d.buffer_cells.or(self.defaults.buffer_cells),
            vpi: d.vpi.or(self.defaults.vpi),
            vci: d.vci.or(self.defaults.vci),
        }
    }

    /// Every switch's trunk ports, in one pass over the links (a topology of a thousand
    /// switches asks for all of them).
    fn all_trunk_ports(&self) -> BTreeMap<String, BTreeSet<u16>> {
        let index: BTreeMap<&str, &SwitchSpec> =
            self.switches.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut trunks: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
        for l in &self.links {
            for end in [&l.a, &l.b] {
                if let Some((sw, p)) = end.split_once(':')
                    && let (Some(spec), Ok(p)) = (index.get(sw), p.parse::<u16>())
                    && p < spec.ports
                {
                    trunks.entry(sw.to_string()).or_default().insert(p);
                }
            }
        }
        trunks
    }

    /// Every switch's configuration, in the topology's order ([`Topology::switch_config`]
    /// for each, in one pass).
    pub fn switch_configs(&self) -> Result<Vec<SwitchConfig>, ControlError> {
        let trunks = self.all_trunk_ports();
        let none = BTreeSet::new();
        self.switches
            .iter()
            .map(|s| self.config_of(s, trunks.get(&s.name).unwrap_or(&none)))
            .collect()
    }

    /// The switch configuration of `name` as the switch core takes it (the same ports a
    /// live switch server of this topology has), for the simulated control plane.
    pub fn switch_config(&self, name: &str) -> Result<SwitchConfig, ControlError> {
        self.config_of(self.switch(name)?, &self.trunk_ports(name))
    }

    /// The switch called `name`.
    pub fn switch(&self, name: &str) -> Result<&SwitchSpec, ControlError> {
        self.switches
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ControlError::Topology {
                origin: "topology".into(),
                message: format!("no switch {name:?}"),
            })
    }

    fn config_of(
        &self,
        spec: &SwitchSpec,
        trunk: &BTreeSet<u16>,
    ) -> Result<SwitchConfig, ControlError> {
        let err = |message: String| ControlError::Topology {
            origin: "topology".into(),
            message,
        };
        let name = spec.name.as_str();
        let d = self.port_settings(spec);
        let where_ = |key: &str| {
            if spec.port.as_ref().is_some_and(|p| match key {
                "link_rate" => p.link_rate.is_some(),
                _ => p.capacity.is_some(),
            }) {
                format!("switch {name}: port.{key}")
            } else {
                format!("defaults.{key}")
            }
        };
        let link = match &d.link_rate {
            Some(s) => {
                BitRate::from_str(s).map_err(|e| err(format!("{}: {e}", where_("link_rate"))))?
            }
            None => BitRate(155.52e6),
        };
        let capacity = match &d.capacity {
            Some(s) => Some(
                CellRate::from_str(s).map_err(|e| err(format!("{}: {e}", where_("capacity"))))?,
            ),
            None => None,
        };
        let ports = (0..spec.ports)
            .map(|id| {
                let mut pc = PortConfig::new(id, link);
                if trunk.contains(&id) {
                    pc.interface = Interface::Nni;
                }
                if let Some(c) = capacity {
                    pc.capacity = c;
                }
                if let Some(b) = d.buffer_cells {
                    pc.buffer_cells = b;
                    pc.clp_threshold = b / 4 * 3;
                }
                if let Some([a, b]) = d.vpi {
                    pc.vpi_range = (a, b);
                }
                if let Some([a, b]) = d.vci {
                    pc.vci_range = (a, b);
                }
                pc
            })
            .collect();
        let cfg = SwitchConfig {
            name: name.to_string(),
            ports,
        };
        cfg.validate()
            .map_err(|e| err(format!("switch {name}: {e}")))?;
        Ok(cfg)
    }

    /// The route object's view of this topology with nothing allocated: each port's
    /// admissible bandwidth and its link's far end, each host's port.
    pub fn view(&self) -> Result<NetworkView, ControlError> {
        let mut peers: BTreeMap<PortRef, PortRef> = BTreeMap::new();
        for l in &self.links {
            if let (Ok(a), Ok(b)) = (self.port_ref(&l.a), self.port_ref(&l.b)) {
                peers.insert(a.clone(), b.clone());
                peers.insert(b, a);
            }
        }
        let mut switches = Vec::new();
        for (s, cfg) in self.switches.iter().zip(self.switch_configs()?) {
            let ports = cfg
                .ports
                .iter()
                .map(|p| {
                    let here = PortRef {
                        switch: s.name.clone(),
                        port: p.id.0,
                    };
                    PortState {
                        port: p.id.0,
                        capacity: p.capacity.0,
                        allocated: 0.0,
                        peer: peers.get(&here).map(|r| (r.switch.clone(), r.port)),
                    }
                })
                .collect();
            switches.push((s.name.clone(), ports));
        }
        let hosts = self
            .hosts
            .iter()
            .filter_map(|h| {
                self.port_ref(&h.at)
                    .ok()
                    .map(|r| (h.name.clone(), r.switch, r.port))
            })
            .collect();
        Ok(NetworkView { switches, hosts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
name = "t"
[defaults]
link_rate = "155.52 Mb/s"
capacity = "1250 cells/s"
[[switch]]
name = "s1"
ports = 3
[[switch]]
name = "s2"
ports = 2
port = { buffer_cells = 64, vci = [40, 99] }
[[link]]
a = "s1:1"
b = "s2:0"
[[host]]
name = "a"
at = "s1:0"
[[host]]
name = "b"
at = "s2:1"
"#;

    #[test]
    fn each_switch_gets_its_ports_and_the_view_its_links() {
        let t = Topology::parse(TEXT, "test").unwrap();
        let all = t.switch_configs().unwrap();
        for (s, c) in t.switches.iter().zip(&all) {
            assert_eq!(&t.switch_config(&s.name).unwrap(), c);
        }
        let s1 = &all[0];
        assert_eq!(s1.ports.len(), 3);
        assert_eq!(s1.ports[1].interface, Interface::Nni);
        assert_eq!(s1.ports[0].interface, Interface::Uni);
        assert!((s1.ports[0].capacity.0 - 1250.0).abs() < 1e-9);
        let s2 = &all[1];
        assert_eq!(
            (s2.ports[1].buffer_cells, s2.ports[1].vci_range),
            (64, (40, 99))
        );
        let v = t.view().unwrap();
        let peer = |sw: &str, p: u16| {
            v.switches
                .iter()
                .find(|(n, _)| n == sw)
                .and_then(|(_, ports)| ports.iter().find(|x| x.port == p))
                .and_then(|x| x.peer.clone())
        };
        assert_eq!(peer("s1", 1), Some(("s2".into(), 0)));
        assert_eq!(peer("s1", 0), None);
        assert_eq!(
            v.hosts,
            vec![("a".into(), "s1".into(), 0), ("b".into(), "s2".into(), 1)]
        );
        assert!(t.switch_config("s9").is_err());
    }

    /// The simulated plane's switches are the live servers' (the same file, one reading).
    #[cfg(feature = "live")]
    #[test]
    fn the_live_server_gets_the_same_switch() {
        let t = Topology::parse(TEXT, "test").unwrap();
        for s in &t.switches {
            let live = t
                .server_file(&s.name, None)
                .unwrap()
                .switch_config()
                .unwrap();
            assert_eq!(live, t.switch_config(&s.name).unwrap(), "{}", s.name);
        }
    }
}
