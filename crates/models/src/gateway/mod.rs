//! The ATM-FDDI gateway of paper 004 (Buddhikot, Kapoor, Parulkar, WUCS-92-36).
pub mod fddi;
pub mod model;
pub mod mpp;
pub mod sar;
pub mod spp;

pub use model::{GatewayConfig, GatewayKind};
