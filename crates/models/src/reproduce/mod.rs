//! The reproductions of the simulation papers (`atmlab reproduce PAPER`, DESIGN.md §4,
//! Reports): each runs the paper's scenarios through the runner and writes its tables
//! and figures (markdown, PNG/SVG, CSV), with the published numbers beside ours. The CLI
//! only parses arguments and says where the report went.

pub mod gateway;
pub mod rdma;
