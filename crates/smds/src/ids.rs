//! Identifiers of the SMDS server core: servers (the switching systems of paper 002
//! Fig. 1) and their interfaces (SNI, ISSI, ICI, §2.2).

use core::fmt;

/// A server (switching system) in the SMDS network; 0 is reserved ("no server").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ServerId(pub u32);

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// An interface of one server, an index into its configuration's interface list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct IfaceId(pub u16);

impl IfaceId {
    /// The index into the server's interface list.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// The three kinds of interface of paper 002 §2.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IfaceKind {
    /// Subscriber Network Interface: a customer's access.
    Sni,
    /// Inter-Switching System Interface: a link to another server of the same network.
    Issi,
    /// Inter-Carrier Interface: a link to another carrier's network.
    Ici,
}

impl fmt::Display for IfaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IfaceKind::Sni => "SNI",
            IfaceKind::Issi => "ISSI",
            IfaceKind::Ici => "ICI",
        })
    }
}
