//! # atmlab-models: simulation models built from the sans-IO cores
//!
//! Traffic sources ([`source`]), access-control cores ([`access`]: `Gcra`, `LeakyBucket`,
//! `VirtualClock`, `Rdma`), the ATM-FDDI gateway of paper 004 ([`gateway`]: `Spp`, `Mpp`
//! with the NPE, `TimedTokenRing`), the model kinds `atmlab sim run` understands
//! ([`registry`]: the validation model [`queue`], paper 003's [`access_link`] and
//! [`backbone`], paper 004's `gateway`), and the papers' reproductions ([`reproduce`]:
//! `rdma`, `gateway`).
//!
//! What it is not: no I/O; the engine is `atmlab-sim`, the byte formats `atmlab-wire`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
pub mod access_link;
pub mod backbone;
mod batched;
pub mod gateway;
pub mod queue;
pub mod source;

use atmlab_sim::model::ModelKind;

/// Every model kind `atmlab sim run` knows, by name.
pub fn registry() -> Vec<&'static dyn ModelKind> {
    vec![
        &queue::QueueKind,
        &access_link::AccessKind,
        &backbone::BackboneKind,
        &gateway::GatewayKind,
    ]
}

/// The model kind called `name`.
pub fn model_kind(name: &str) -> Option<&'static dyn ModelKind> {
    registry().into_iter().find(|k| k.name() == name)
}

mod error;
pub use error::ModelsError;
