//! The subnetwork hierarchy of TINA's network management layer (paper 001 §1.2.1: "the
//! request ... is hierarchically partitioned across the network until the decision is
//! taken locally at each switch"): which NML-CP covers which switches, and how a route
//! splits into the runs of hops inside each child subnetwork. Pure: no I/O.

use std::ops::Range;

use crate::ControlError;

/// One NML-CP's subnetwork: its switches and, above the lowest level, its child
/// subnetworks (each a contiguous part of `switches`). A subnetwork without children is
/// served by an NML-CP whose children are the switches' EML-CPs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnetwork {
    /// "nml", "nml.0", "nml.0.1", ...: the path from the root.
    pub name: String,
    /// The switches inside, in the order given.
    pub switches: Vec<String>,
    /// Child subnetworks; empty at the lowest level.
    pub children: Vec<Subnetwork>,
}

impl Subnetwork {
    /// The levels of NML-CPs from here down (1 at the lowest level).
    pub fn depth(&self) -> u32 {
        1 + self
            .children
            .iter()
            .map(Subnetwork::depth)
            .max()
            .unwrap_or(0)
    }

    /// Every subnetwork, this one first, depth first.
    pub fn all(&self) -> Vec<&Subnetwork> {
        let mut v = vec![self];
        for c in &self.children {
            v.extend(c.all());
        }
        v
    }

    /// The index of the child (subnetwork, or switch at the lowest level) that holds
    /// `switch`.
    pub fn child_of(&self, switch: &str) -> Option<usize> {
        if self.children.is_empty() {
            self.switches.iter().position(|s| s == switch)
        } else {
            self.children
                .iter()
                .position(|c| c.switches.iter().any(|s| s == switch))
        }
    }

    /// The maximal runs of consecutive hops (`route` lists each hop's switch) that lie
    /// in one child: (child index, hop range). A route that leaves a child and comes
    /// back gives that child two runs. A switch outside this subnetwork is an error.
    pub fn runs(&self, route: &[&str]) -> Result<Vec<(usize, Range<usize>)>, String> {
        let mut out: Vec<(usize, Range<usize>)> = Vec::new();
        for (i, sw) in route.iter().enumerate() {
            let c = self
                .child_of(sw)
                .ok_or_else(|| format!("switch {sw:?} is not in subnetwork {}", self.name))?;
            match out.last_mut() {
                // At the lowest level every hop is its own EML-CP's: a switch crossed
                // twice (a loop) still gets one run per crossing.
                Some((last, r)) if *last == c && !self.children.is_empty() => r.end = i + 1,
                _ => out.push((c, i..i + 1)),
            }
        }
        Ok(out)
    }
}

/// The hierarchy over `switches` (in the order that makes subnetworks contiguous, e.g.
/// along a chain): `depth` levels of NML-CPs, each above the lowest splitting its
/// switches into `fanout` contiguous parts of nearly equal size; a part of one switch is
/// not split further.
pub fn hierarchy(switches: &[String], depth: u32, fanout: u32) -> Result<Subnetwork, ControlError> {
    let bad = |reason: String| ControlError::InvalidView { reason };
    if switches.is_empty() {
        return Err(bad("the TINA hierarchy needs at least one switch".into()));
    }
    if depth == 0 {
        return Err(bad("the TINA hierarchy needs a depth of at least 1".into()));
    }
    if fanout < 2 && depth > 1 {
        return Err(bad(format!(
            "a TINA hierarchy deeper than 1 needs a fan-out of at least 2, not {fanout}"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(d) = switches.iter().find(|s| !seen.insert(s.as_str())) {
        return Err(bad(format!("switch {d:?} given twice")));
    }
    Ok(build("nml".into(), switches, depth, fanout as usize))
}

fn build(name: String, switches: &[String], depth: u32, fanout: usize) -> Subnetwork {
    let mut children = Vec::new();
    if depth > 1 && switches.len() > 1 {
        let parts = fanout.min(switches.len());
        let (base, extra) = (switches.len() / parts, switches.len() % parts);
        let mut at = 0;
        for i in 0..parts {
            let n = base + usize::from(i < extra);
            children.push(build(
                format!("{name}.{i}"),
                &switches[at..at + n],
                depth - 1,
                fanout,
            ));
            at += n;
        }
    }
    Subnetwork {
        name,
        switches: switches.to_vec(),
        children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("s{i}")).collect()
    }

    #[test]
    fn depth_one_is_one_nml_cp_over_every_switch() {
        let h = hierarchy(&names(8), 1, 2).unwrap();
        assert_eq!(h.depth(), 1);
        assert!(h.children.is_empty());
        assert_eq!(h.runs(&["s1", "s2", "s3"]).unwrap().len(), 3);
    }

    #[test]
    fn deeper_levels_split_contiguously() {
        let h = hierarchy(&names(8), 3, 2).unwrap();
        assert_eq!(h.depth(), 3);
        assert_eq!(h.children[0].switches, names(4));
        assert_eq!(h.children[1].children[1].switches, ["s7", "s8"]);
        assert_eq!(h.all().len(), 7);
        // Uneven: 5 switches in 2 parts are 3 + 2.
        let h = hierarchy(&names(5), 2, 2).unwrap();
        assert_eq!(h.children[0].switches.len(), 3);
        // Parts of one switch are not split again.
        let h = hierarchy(&names(2), 5, 2).unwrap();
        assert_eq!(h.depth(), 2);
    }

    #[test]
    fn a_route_splits_into_runs_per_child() {
        let h = hierarchy(&names(8), 2, 2).unwrap();
        let r = h.runs(&["s3", "s4", "s5", "s6"]).unwrap();
        assert_eq!(r, vec![(0, 0..2), (1, 2..4)]);
        let r = h.runs(&["s4", "s5", "s4"]).unwrap();
        assert_eq!(r, vec![(0, 0..1), (1, 1..2), (0, 2..3)]);
        assert!(h.runs(&["s9"]).unwrap_err().contains("not in subnetwork"));
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(hierarchy(&[], 1, 2).is_err());
        assert!(hierarchy(&names(3), 0, 2).is_err());
        assert!(hierarchy(&names(3), 2, 1).is_err());
        assert!(hierarchy(&["s1".into(), "s1".into()], 1, 2).is_err());
    }
}
