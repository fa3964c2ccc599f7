//! The Send + Sync promise of `Context`: launches from several host threads, each on its own
//! stream (`Context::fork`) or all through one shared handle, give correct results. Runs on
//! the emulator always and on the GPU when present.

mod common;

use ferrokern::elementwise::Op;
use ferrokern::rows::Rows;
use ferrokern::verify::{self, ElementwiseCase, RowCase, RowOp, Values};
use ferrokern::{Context, DType};

const THREADS: usize = 4;
const ROUNDS: usize = 6;

/// One thread's work: a mix of elementwise and row ops, each checked against its reference.
fn work(ctx: &Context, thread: usize) -> usize {
    let mut checked = 0;
    for round in 0..ROUNDS {
        let seed = (thread * 1000 + round) as u64;
        let op = Op::ALL[(thread + round) % Op::ALL.len()];
        let e = ElementwiseCase { op, dtype: DType::F32, len: 20_011, seed, offset: round % 2, values: Values::Finite };
        let r = verify::elementwise(ctx, &e).unwrap();
        assert!(r.passed(), "thread {thread} round {round} {op:?}: {r}");
        let row_op = [RowOp::Softmax, RowOp::LayerNorm, RowOp::Sum][(thread + round) % 3];
        let rc = RowCase {
            op: row_op,
            dtype: DType::BF16,
            shape: Rows::new(17, 1000 + thread),
            seed,
            offset: 0,
            values: Values::Finite,
            strategy: None,
        };
        let r = verify::rows(ctx, &rc).unwrap();
        assert!(r.passed(), "thread {thread} round {round} {row_op:?}: {r}");
        checked += 2;
    }
    checked
}

fn run_threads(ctx: &Context, fork: bool) -> usize {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let mine = if fork { ctx.fork().unwrap() } else { ctx.clone() };
                s.spawn(move || work(&mine, t))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a worker thread panicked")).sum()
    })
}

#[test]
fn threads_on_separate_streams_get_correct_results() {
    for ctx in common::backends("threads_on_separate_streams") {
        let n = run_threads(&ctx, true);
        println!("{}: {n} checked launches from {THREADS} threads on forked streams", ctx.backend());
    }
}

#[test]
fn threads_sharing_one_handle_get_correct_results() {
    for ctx in common::backends("threads_sharing_one_handle") {
        let n = run_threads(&ctx, false);
        println!("{}: {n} checked launches from {THREADS} threads on one stream", ctx.backend());
    }
}

#[test]
fn buffers_move_between_forks() {
    for ctx in common::backends("buffers_move_between_forks") {
        let other = ctx.fork().unwrap();
        let x = ctx.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let mut y = other.upload(&[10.0f32, 20.0, 30.0]).unwrap();
        ferrokern::elementwise::axpy(&other, 2.0, x.as_view(), y.as_view_mut()).unwrap();
        assert_eq!(y.to_host().unwrap(), vec![12.0, 24.0, 36.0]);
    }
}
