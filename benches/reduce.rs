//! Criterion benches of the reduce family (bf16) against a device-to-device copy of the same
//! bytes; see `common/rows.rs`.

#[path = "common/gpu.rs"]
mod gpu;
#[path = "common/rows.rs"]
mod rows_common;

use ferrokern::rows::Rows;
use ferrokern::verify::RowOp;

fn main() {
    rows_common::run("reduce", &[RowOp::Sum, RowOp::Max, RowOp::Argmax], Rows::new(32_768, 4096));
}
