//! Criterion benches of the softmax family (bf16) against a device-to-device copy of the same
//! bytes; see `common/rows.rs`.

#[path = "common/gpu.rs"]
mod gpu;
#[path = "common/rows.rs"]
mod rows_common;

use ferrokern::rows::Rows;
use ferrokern::verify::RowOp;

fn main() {
    rows_common::run("softmax", &[RowOp::Softmax, RowOp::LogSoftmax, RowOp::CrossEntropy], Rows::new(8192, 32_000));
}
