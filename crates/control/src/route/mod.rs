//! The route object: a link-state view of the network and QoS-constrained routes through it
//! (paper 000 §II-B step 3 of Fig. 2: "a path in the network is obtained from the
//! RouteObject ... Routes are updated asynchronously"; §II-C-1 on caching alternate
//! routes per source-destination pair).
//!
//! - `object`: [`RouteObject`], the sans-IO core: switches, their ports (capacity and
//!   bandwidth allocated, in cells/s), the duplex links between ports and the hosts on
//!   ports, kept as a petgraph `Graph` with one node per switch and one directed edge
//!   per direction of a link. Bandwidth is charged on a switch's *output* port, as the
//!   switches' admission control charges it, so a route needs `free >= bandwidth` on
//!   every output port it uses, the last one (towards the destination host) included.
//! - `discover` (the live shell, feature `live`): [`discover`], [`spawn_refresher`] and
//!   [`start`], which read the view from the name service and the switch servers.
//!
//! **Which route.** [`RouteObject::route`] returns the widest-shortest path: fewest hops
//! among the ports with enough free bandwidth; among those, the one whose tightest port
//! has the most free bandwidth (it leaves the most room, so later calls block less);
//! then, to be deterministic, the smallest sequence of (switch name, output port).
//! [`RouteObject::k_routes`] gives up to `k` loop-free alternates in that order, by Yen's
//! algorithm (J. Y. Yen, "Finding the k shortest loopless paths in a network", Management
//! Science 17(11), 1971) over the same search.
//!
//! **Freshness.** The view is what the switches said when last asked; the switches'
//! admission control has the last word. [`discover`] asks them (through the name service
//! and each switch server's Describe); [`spawn_refresher`] does so every period and
//! replaces the view. A route object's answer is a hint: the connection managers' route
//! cache (`crate::cm::routes::CachedRouter`) takes the path the view ranks best, and where
//! the view shows no path with the bandwidth free it still asks the switches along the
//! path it would take with the bandwidth free, so a stale view never refuses a call the
//! switches have room for (issue 23: live managers blocked above Erlang-B on a view up to
//! a second old). The managers do not record their own commits and releases in the view
//! ([`RouteObject::set_allocated`]): several managers share the switches, so one
//! manager's record would still miss the others'; a refresh whose Describe was answered
//! before a commit would overwrite the record with the older value (and a record kept as a
//! delta would count the commit twice after a refresh that has it); and every commit and
//! release would take the route object's lock. The view ranks paths; admission control
//! decides.

#[cfg(feature = "live")]
mod discover;
mod object;
#[cfg(test)]
mod tests;

#[cfg(feature = "live")]
pub use discover::{Discoverer, discover, spawn_refresher, start};
pub use object::{Hop, NetworkView, PortState, Route, RouteObject};
