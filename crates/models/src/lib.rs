//! # atmlab-models: simulation models built from the sans-IO cores
//!
//! The systems of papers 003 and 004 as cores that compute and do nothing else, and the
//! model kinds that put them on the engine (`atmlab-sim`) for `atmlab sim run`:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`source`] | traffic sources as sans-IO cores: Poisson, CBR, voice ON-OFF, AR(1) video, MMPP-2, bursty ⟨Λp, Λa, B⟩ |
//! | [`access`] | access-control cores: `Gcra` (ITU-T I.371), paper 003's `LeakyBucket`, `VirtualClock` and `Rdma` |
//! | [`gateway`] | paper 004's ATM-FDDI gateway: the cell format, `Spp`, `Mpp` with the NPE, the timed-token ring, and the model kind `gateway` |
//! | [`queue`] | the model kind `queue`: one FIFO server, the validation model (M/M/1, M/D/1, M/M/1/K) and the engine's benchmark |
//! | [`access_link`] | the model kind `access`: paper 003's source, mechanism and access link (Figure 5) |
//! | [`backbone`] | the model kind `backbone`: paper 003's two MMPP LANs contending at an internal node (Figures 6-11) |
//! | [`control`] | the model kind `control`: papers 000 and 001's control planes, the real connection manager (or TINA performers), switch and route cores in virtual time |
//!
//! [`registry`] lists the model kinds by name and [`model_kind`] finds one; a private
//! module runs the models measured by one component (paper 003's, with batch means).
//! Errors: [`ModelsError`]. `examples/new_model_kind.rs` shows how to write a model kind.
//!
//! What it is not: no I/O, no clock and no sockets (a live host paces real cells with the
//! same cores elsewhere); not the engine (`atmlab-sim`), not the byte formats
//! (`atmlab-wire`), and not the papers' reproductions or their reports, which run these
//! models from `atmlab-lab`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
pub mod access_link;
pub mod backbone;
mod batched;
pub mod control;
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
        &control::ControlKind,
    ]
}

/// The model kind called `name`.
pub fn model_kind(name: &str) -> Option<&'static dyn ModelKind> {
    registry().into_iter().find(|k| k.name() == name)
}

mod error;
pub use error::ModelsError;

#[cfg(test)]
mod tests {
    /// Every metric of every kind has a unit, so `sim run`'s table and plot axes never
    /// show a bare number (issue 27, item 5); a metric added without one fails here.
    #[test]
    fn every_metric_has_a_unit() {
        for kind in super::registry() {
            for m in kind.metrics() {
                assert!(
                    kind.metric_unit(m).is_some_and(|u| !u.is_empty()),
                    "{}: metric {m} has no unit",
                    kind.name()
                );
            }
            assert_eq!(kind.metric_unit("no_such_metric"), None, "{}", kind.name());
        }
    }
}
