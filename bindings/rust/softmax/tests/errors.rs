// SPDX-License-Identifier: Apache-2.0
//! Bad input: every failure is an Err carrying the right status and the library's message, and
//! nothing is written to the outputs.

use std::os::raw::c_void;
use std::ptr;

use softmax::{Backend, Dropout, Dtype, Options, Status};

fn poisoned(n: usize) -> Vec<f32> {
    vec![f32::from_bits(0x7fc0_dead); n]
}

fn untouched(y: &[f32]) -> bool {
    y.iter().all(|v| v.to_bits() == 0x7fc0_dead)
}

#[test]
fn slice_lengths_must_equal_rows_times_cols() {
    let x = vec![0.0f32; 6];
    let mut y = poisoned(6);
    let e = softmax::rows(&x[..5], &mut y, 2, 3, &Options::default()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidSize);
    assert_eq!(e.message(), "x has 5 elements but rows * cols = 2 * 3 = 6");
    let mut long_y = poisoned(7);
    let e = softmax::rows(&x, &mut long_y, 2, 3, &Options::default()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidSize);
    assert!(e.message().starts_with("y has 7 elements"), "{}", e);
    let mut mask = vec![0u8; 5];
    let d = Dropout {
        p: 0.5,
        seed: 1,
        offset: 0,
    };
    let e =
        softmax::dropout(&x, &mut y, Some(&mut mask), 2, 3, d, &Options::default()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidSize);
    assert!(e.message().starts_with("keep_mask has 5 elements"), "{}", e);
    let e = softmax::rows(&x, &mut y, usize::MAX, 2, &Options::default()).unwrap_err();
    assert_eq!(e.status(), Status::SizeOverflow, "{}", e);
    assert!(untouched(&y));
}

#[test]
fn empty_slices_succeed_and_sizes_still_must_match() {
    let x: Vec<f32> = Vec::new();
    let mut y: Vec<f32> = Vec::new();
    let o = Options::default();
    softmax::rows(&x, &mut y, 0, 4, &o).unwrap();
    softmax::rows(&x, &mut y, 4, 0, &o).unwrap();
    softmax::rows_backward(&x, &x, &mut y, 0, 0, &o).unwrap();
    let mut stats: Vec<f32> = vec![f32::NAN; 3];
    let mut sums: Vec<f32> = vec![f32::NAN; 3];
    // cols == 0: the statistics still hold one element per row, and nothing is written.
    softmax::row_stats(&x, &mut stats, &mut sums, 3, 0, &o).unwrap();
    assert!(stats.iter().chain(&sums).all(|v| v.is_nan()));
    let e = softmax::row_stats(&x, &mut stats[..2], &mut sums, 3, 0, &o).unwrap_err();
    assert_eq!(e.status(), Status::InvalidSize);
    assert_eq!(e.message(), "row_max has 2 elements but rows = 3");
    assert_eq!(
        e.to_string(),
        "SOFTMAX_STATUS_INVALID_SIZE: row_max has 2 elements but rows = 3"
    );
}

#[test]
fn bad_dropout_probability() {
    let x = vec![1.0f32; 8];
    for &p in &[1.5f32, -0.1, f32::NAN, f32::INFINITY] {
        let mut y = poisoned(8);
        let mut mask = vec![0xAAu8; 8];
        let d = Dropout {
            p,
            seed: 1,
            offset: 0,
        };
        let e = softmax::dropout(&x, &mut y, Some(&mut mask), 2, 4, d, &Options::default())
            .unwrap_err();
        assert_eq!(e.status(), Status::InvalidProbability, "p = {}: {}", p, e);
        assert!(
            e.message().contains("dropout p must lie in [0, 1]"),
            "{}",
            e
        );
        assert!(untouched(&y), "p = {} wrote y", p);
        assert!(mask.iter().all(|&m| m == 0xAA), "p = {} wrote the mask", p);
    }
    let mut y = poisoned(8);
    let e = softmax::dropout(
        &x,
        &mut y,
        None,
        2,
        4,
        Dropout {
            p: 1.5,
            seed: 0,
            offset: 0,
        },
        &Options::default(),
    )
    .unwrap_err();
    assert!(e.message().contains("got 1.5"), "{}", e);
}

#[test]
fn bad_options_are_reported_by_the_library() {
    let x = vec![1.0f32; 8];
    let mut y = poisoned(8);
    let e = softmax::rows(&x, &mut y, 2, 4, &Options::default().num_threads(-1)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidOptions);
    assert!(e.message().contains("num_threads must be >= 0"), "{}", e);
    let d = Dropout {
        p: 0.5,
        seed: 0,
        offset: 0,
    };
    let e = softmax::dropout(&x, &mut y, None, 2, 4, d, &Options::default().log(true)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidOptions);
    assert!(e.message().contains("SOFTMAX_FLAG_LOG"), "{}", e);
    assert!(untouched(&y));
}

#[test]
fn cuda_backend_is_refused_for_borrowed_slices() {
    let x = vec![1.0f32; 8];
    let mut y = poisoned(8);
    let e =
        softmax::rows(&x, &mut y, 2, 4, &Options::default().backend(Backend::Cuda)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidBackend);
    assert!(e.message().contains("*_raw"), "{}", e);
    assert!(untouched(&y));
}

#[test]
fn raw_pointer_errors() {
    let x = [1.0f32; 8];
    let mut y = poisoned(8);
    let o = Options::default();
    let xp = x.as_ptr() as *const c_void;
    let yp = y.as_mut_ptr() as *mut c_void;
    unsafe {
        let e =
            softmax::rows_raw(ptr::null(), yp, 2, 4, Dtype::F32, &o, ptr::null_mut()).unwrap_err();
        assert_eq!(
            (e.status(), e.message()),
            (Status::NullPointer, "x is NULL")
        );
        let e = softmax::rows_raw(xp, ptr::null_mut(), 2, 4, Dtype::F32, &o, ptr::null_mut())
            .unwrap_err();
        assert_eq!(
            (e.status(), e.message()),
            (Status::NullPointer, "y is NULL")
        );
        let e = softmax::rows_raw(xp, yp, 2, -3, Dtype::F32, &o, ptr::null_mut()).unwrap_err();
        assert_eq!(
            (e.status(), e.message()),
            (Status::InvalidSize, "cols must be >= 0, got -3")
        );
        let e = softmax::rows_raw(xp, yp, i64::MAX, i64::MAX, Dtype::F32, &o, ptr::null_mut())
            .unwrap_err();
        assert_eq!(e.status(), Status::SizeOverflow, "{}", e);
        // y one element after x: a partial overlap, which only x == y is allowed to be.
        let shifted = y.as_mut_ptr().add(1) as *mut c_void;
        let e = softmax::rows_raw(
            yp as *const c_void,
            shifted,
            1,
            4,
            Dtype::F32,
            &o,
            ptr::null_mut(),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::OverlappingBuffers, "{}", e);
        let mut mask = vec![0u8; 8];
        let d = Dropout {
            p: 0.5,
            seed: 0,
            offset: 0,
        };
        let e = softmax::dropout_raw(
            xp,
            yp,
            (yp as *mut u8).add(4),
            2,
            4,
            Dtype::F32,
            d,
            &o,
            ptr::null_mut(),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::OverlappingBuffers, "{}", e);
        assert!(e.message().contains("keep_mask"), "{}", e);
        // Host memory on the CUDA backend: unavailable without CUDA, wrong memory space with it.
        let cuda = o.backend(Backend::Cuda);
        let e = softmax::dropout_raw(
            xp,
            yp,
            mask.as_mut_ptr(),
            2,
            4,
            Dtype::F32,
            d,
            &cuda,
            ptr::null_mut(),
        )
        .unwrap_err();
        let expected = if softmax::backend_available(Backend::Cuda) {
            Status::WrongMemorySpace
        } else {
            Status::BackendUnavailable
        };
        assert_eq!(e.status(), expected, "{}", e);
        assert!(!e.message().is_empty());
    }
    assert!(untouched(&y));
}

#[test]
fn backward_and_sharded_calls_check_slices_and_report_the_library() {
    let o = Options::default();
    let y = vec![0.25f32; 8];
    let mut dx = poisoned(8);
    let e = softmax::rows_backward(&y, &y[..7], &mut dx, 2, 4, &o).unwrap_err();
    assert_eq!(
        (e.status(), e.message()),
        (
            Status::InvalidSize,
            "dy has 7 elements but rows * cols = 2 * 4 = 8"
        )
    );
    let d = Dropout {
        p: -0.5,
        seed: 1,
        offset: 2,
    };
    let e = softmax::dropout_backward(&y, &y, &mut dx, 2, 4, d, &o).unwrap_err();
    assert_eq!(e.status(), Status::InvalidProbability, "{}", e);
    assert!(e.message().contains("got -0.5"), "{}", e);
    let e = softmax::dropout_backward(&y, &y, &mut dx, 2, 4, Dropout { p: 0.5, ..d }, &o.log(true))
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidOptions, "{}", e);
    let e = softmax::rows_backward(&y, &y, &mut dx, 2, 4, &o.backend(Backend::Cuda)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidBackend);
    assert!(untouched(&dx));
    // f64 rows cannot be sharded: float statistics would not carry their range.
    let x64 = vec![0.5f64; 8];
    let (mut m, mut s) = (vec![0.0f32; 2], vec![0.0f32; 2]);
    let e = softmax::row_stats(&x64, &mut m, &mut s, 2, 4, &o).unwrap_err();
    assert_eq!(e.status(), Status::InvalidDtype, "{}", e);
    assert!(e.message().contains("float row statistics"), "{}", e);
    let mut row_dot = vec![0.0f32; 3];
    let e = softmax::backward_row_stats(&y, &y, &mut row_dot, 2, 4, &o).unwrap_err();
    assert_eq!(e.message(), "row_dot has 3 elements but rows = 2");
}

#[test]
fn status_names_come_from_the_library() {
    assert_eq!(
        Status::InvalidProbability.name(),
        "SOFTMAX_STATUS_INVALID_PROBABILITY"
    );
    assert_eq!(Status::from_raw(0), None);
    assert_eq!(Status::from_raw(7), Some(Status::InvalidProbability));
    assert_eq!(Status::from_raw(999), Some(Status::Unknown(999)));
    assert_eq!(Status::Unknown(999).name(), "SOFTMAX_STATUS_UNKNOWN");
    for code in 1..=13 {
        assert_eq!(Status::from_raw(code).unwrap().raw(), code);
    }
}
