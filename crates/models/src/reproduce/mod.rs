//! The reproductions of the simulation papers (`atmlab reproduce PAPER`, DESIGN.md §4,
//! Reports): each runs the paper's scenarios and writes its tables and figures, with the
//! published numbers beside ours. The CLI only parses arguments and says where the report
//! went.

pub mod rdma;
