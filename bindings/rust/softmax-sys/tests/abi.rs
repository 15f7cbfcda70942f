// SPDX-License-Identifier: Apache-2.0
//! The hand-written declarations against the library and the header they were written from.

use std::ffi::CStr;
use std::mem::{align_of, size_of, MaybeUninit};
use std::os::raw::c_void;
use std::ptr;

use softmax_sys::*;

fn cstr(p: *const std::os::raw::c_char) -> String {
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

/// Each constant's value gives the library's own name for it, so a renumbered or misspelled
/// constant fails here.
#[test]
fn status_constants_match_the_library_names() {
    let table = [
        (SOFTMAX_STATUS_SUCCESS, "SOFTMAX_STATUS_SUCCESS"),
        (SOFTMAX_STATUS_NULL_POINTER, "SOFTMAX_STATUS_NULL_POINTER"),
        (SOFTMAX_STATUS_INVALID_SIZE, "SOFTMAX_STATUS_INVALID_SIZE"),
        (SOFTMAX_STATUS_SIZE_OVERFLOW, "SOFTMAX_STATUS_SIZE_OVERFLOW"),
        (SOFTMAX_STATUS_INVALID_DTYPE, "SOFTMAX_STATUS_INVALID_DTYPE"),
        (
            SOFTMAX_STATUS_INVALID_BACKEND,
            "SOFTMAX_STATUS_INVALID_BACKEND",
        ),
        (
            SOFTMAX_STATUS_INVALID_OPTIONS,
            "SOFTMAX_STATUS_INVALID_OPTIONS",
        ),
        (
            SOFTMAX_STATUS_INVALID_PROBABILITY,
            "SOFTMAX_STATUS_INVALID_PROBABILITY",
        ),
        (
            SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
            "SOFTMAX_STATUS_OVERLAPPING_BUFFERS",
        ),
        (
            SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
            "SOFTMAX_STATUS_BACKEND_UNAVAILABLE",
        ),
        (
            SOFTMAX_STATUS_WRONG_MEMORY_SPACE,
            "SOFTMAX_STATUS_WRONG_MEMORY_SPACE",
        ),
        (SOFTMAX_STATUS_CUDA_ERROR, "SOFTMAX_STATUS_CUDA_ERROR"),
        (SOFTMAX_STATUS_OUT_OF_MEMORY, "SOFTMAX_STATUS_OUT_OF_MEMORY"),
        (
            SOFTMAX_STATUS_INTERNAL_ERROR,
            "SOFTMAX_STATUS_INTERNAL_ERROR",
        ),
    ];
    for (code, name) in table.iter() {
        assert_eq!(cstr(unsafe { softmax_status_string(*code) }), *name);
    }
}

#[test]
fn default_options_fill_in_this_struct_size() {
    let o = unsafe { softmax_default_options() };
    assert_eq!(
        o.struct_size,
        size_of::<softmax_options>(),
        "library and Rust disagree on sizeof"
    );
    assert_eq!(o.backend, SOFTMAX_BACKEND_AUTO);
    assert_eq!(o.flags, 0);
    assert!(o.stream.is_null());
    assert_eq!(o.num_threads, 0);
    assert_eq!(o.y_dtype, SOFTMAX_DTYPE_F32);
}

#[test]
fn version_matches_the_declared_constants() {
    let want = format!(
        "{}.{}.{}",
        SOFTMAX_VERSION_MAJOR, SOFTMAX_VERSION_MINOR, SOFTMAX_VERSION_PATCH
    );
    assert_eq!(cstr(unsafe { softmax_version() }), want);
}

/// dtype, backend and flag constants reach the library with their meaning: a value past the
/// declared ones is rejected with the status that names it, and each declared one is accepted.
#[test]
fn dtype_backend_and_flag_constants_are_accepted_and_their_successors_rejected() {
    let x = [0.5f32, 1.5, -2.0, 4.0];
    let mut y = [0.0f32; 4];
    let xp = x.as_ptr() as *const c_void;
    let yp = y.as_mut_ptr() as *mut c_void;
    unsafe {
        for &d in &[SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16] {
            assert_eq!(
                softmax_rows(xp, yp, 1, 2, d, ptr::null()),
                SOFTMAX_STATUS_SUCCESS
            );
        }
        assert_eq!(
            softmax_rows(xp, yp, 1, 2, SOFTMAX_DTYPE_F64 + 1, ptr::null()),
            SOFTMAX_STATUS_INVALID_DTYPE
        );
        assert!(cstr(softmax_last_error()).contains("dtype is 4"));
        // A success clears the thread's message.
        assert_eq!(
            softmax_rows(xp, yp, 1, 2, SOFTMAX_DTYPE_F32, ptr::null()),
            SOFTMAX_STATUS_SUCCESS
        );
        assert_eq!(cstr(softmax_last_error()), "");

        let mut o = softmax_default_options();
        o.backend = SOFTMAX_BACKEND_CPU;
        o.flags = SOFTMAX_FLAG_LOG;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_SUCCESS
        );
        assert!(y.iter().all(|&v| v < 0.0), "log flag ignored: {:?}", y);
        // y_dtype is read only with its flag: an invalid one is named only when the flag is set,
        // which checks both the field's offset and the flag's bit.
        o.flags = 0;
        o.y_dtype = 99;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_SUCCESS
        );
        o.flags = SOFTMAX_FLAG_Y_DTYPE;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_INVALID_DTYPE
        );
        assert!(cstr(softmax_last_error()).contains("options->y_dtype is 99"));
        o.y_dtype = SOFTMAX_DTYPE_F32;
        o.flags = (SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE) << 1;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_INVALID_OPTIONS
        );
        o.flags = 0;
        o.backend = SOFTMAX_BACKEND_CUDA + 1;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_INVALID_BACKEND
        );
        o.backend = SOFTMAX_BACKEND_AUTO;
        o.struct_size = SOFTMAX_OPTIONS_MAX_SIZE as usize + 1;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_INVALID_OPTIONS
        );
        o.struct_size = 4;
        assert_eq!(
            softmax_rows(xp, yp, 2, 2, SOFTMAX_DTYPE_F32, &o),
            SOFTMAX_STATUS_INVALID_OPTIONS
        );
        assert!(cstr(softmax_last_error()).contains("struct_size is 4"));
        assert_eq!(softmax_backend_available(SOFTMAX_BACKEND_AUTO), 1);
        assert_eq!(softmax_backend_available(SOFTMAX_BACKEND_CPU), 1);
    }
}

/// SOFTMAX_DTYPE_F64 reaches the library as f64 storage: a row of two doubles is normalised.
#[test]
fn f64_storage_is_accepted() {
    let x = [0.0f64, 3.0f64.ln()];
    let mut y = [f64::NAN; 2];
    let status = unsafe {
        softmax_rows(
            x.as_ptr() as *const c_void,
            y.as_mut_ptr() as *mut c_void,
            1,
            2,
            SOFTMAX_DTYPE_F64,
            ptr::null(),
        )
    };
    assert_eq!(
        status,
        SOFTMAX_STATUS_SUCCESS,
        "{}",
        cstr(unsafe { softmax_last_error() })
    );
    assert!(
        (y[0] - 0.25).abs() < 1e-15 && (y[1] - 0.75).abs() < 1e-15,
        "{:?}",
        y
    );
}

/// Every new entry point links and reaches the library's argument checks: a null required
/// pointer is named in the error, and an empty call (rows == 0) succeeds without reading any.
#[test]
fn new_entry_points_are_declared_with_their_arguments_in_order() {
    let x = [1.0f32; 8];
    let mut y = [0.0f32; 8];
    let mut stats = [0.0f32; 2];
    let xp = x.as_ptr() as *const c_void;
    let yp = y.as_mut_ptr() as *mut c_void;
    let sp = stats.as_mut_ptr();
    let null = ptr::null_mut::<c_void>();
    let nullf = ptr::null_mut::<f32>();
    unsafe {
        let calls: [(softmax_status, &str); 6] = [
            (
                softmax_rows_backward(xp, xp, null, 2, 4, SOFTMAX_DTYPE_F32, ptr::null()),
                "dx",
            ),
            (
                softmax_dropout_backward(
                    xp,
                    ptr::null(),
                    yp,
                    2,
                    4,
                    SOFTMAX_DTYPE_F32,
                    0.5,
                    1,
                    2,
                    ptr::null(),
                ),
                "dy",
            ),
            (
                softmax_row_stats(xp, sp, nullf, 2, 4, SOFTMAX_DTYPE_F32, ptr::null()),
                "row_sumexp",
            ),
            (
                softmax_rows_from_stats(xp, yp, nullf, sp, 2, 4, SOFTMAX_DTYPE_F32, ptr::null()),
                "row_max",
            ),
            (
                softmax_backward_row_stats(xp, xp, nullf, 2, 4, SOFTMAX_DTYPE_F32, ptr::null()),
                "row_dot",
            ),
            (
                softmax_rows_backward_from_stats(
                    xp,
                    xp,
                    yp,
                    nullf,
                    2,
                    4,
                    SOFTMAX_DTYPE_F32,
                    ptr::null(),
                ),
                "row_dot",
            ),
        ];
        for (status, null_argument) in calls.iter() {
            assert_eq!(
                *status, SOFTMAX_STATUS_NULL_POINTER,
                "{} passed as NULL",
                null_argument
            );
        }
        // Messages are per call: check one freshly.
        softmax_row_stats(xp, sp, nullf, 2, 4, SOFTMAX_DTYPE_F32, ptr::null());
        assert_eq!(cstr(softmax_last_error()), "row_sumexp is NULL");
        softmax_rows_backward_from_stats(xp, xp, yp, nullf, 2, 4, SOFTMAX_DTYPE_F32, ptr::null());
        assert_eq!(cstr(softmax_last_error()), "row_dot is NULL");
        softmax_dropout_backward(xp, xp, yp, 2, 4, SOFTMAX_DTYPE_F32, 1.5, 1, 2, ptr::null());
        assert!(cstr(softmax_last_error()).contains("got 1.5"));
        // Empty: every pointer may be NULL.
        let n = ptr::null();
        assert_eq!(
            softmax_rows_backward(n, n, null, 0, 4, SOFTMAX_DTYPE_F32, n.cast()),
            0
        );
        assert_eq!(
            softmax_row_stats(n, nullf, nullf, 3, 0, SOFTMAX_DTYPE_F32, n.cast()),
            0
        );
    }
}

/// Layout of `softmax_options` against a C program compiled from the header
/// (bindings/abi_layout_probe.c, built by CMake). ctest runs it and passes its output in
/// SOFTMAX_C_LAYOUT, then runs this test with `-- --include-ignored`; a plain `cargo test`
/// shows it as ignored rather than passing it unchecked.
#[test]
#[ignore = "needs SOFTMAX_C_LAYOUT from bindings/abi_layout_probe.c (ctest sets it)"]
fn options_layout_matches_the_c_compiler() {
    let text = std::env::var("SOFTMAX_C_LAYOUT").expect(
        "SOFTMAX_C_LAYOUT is not set: run this test through ctest, or set it to the output of \
         the softmax_abi_layout_probe program from the CMake build",
    );
    let c = |key: &str| -> usize {
        text.split_whitespace()
            .find_map(|kv| {
                let mut it = kv.splitn(2, '=');
                if it.next() == Some(key) {
                    it.next().map(|v| v.parse::<usize>().unwrap())
                } else {
                    None
                }
            })
            .unwrap_or_else(|| panic!("SOFTMAX_C_LAYOUT has no {}: {:?}", key, text))
    };
    let o = MaybeUninit::<softmax_options>::uninit();
    let base = o.as_ptr() as usize;
    // SAFETY: addr_of! takes field addresses without reading the uninitialised struct.
    let off = unsafe {
        [
            (
                "struct_size",
                ptr::addr_of!((*o.as_ptr()).struct_size) as usize - base,
            ),
            (
                "backend",
                ptr::addr_of!((*o.as_ptr()).backend) as usize - base,
            ),
            ("flags", ptr::addr_of!((*o.as_ptr()).flags) as usize - base),
            (
                "stream",
                ptr::addr_of!((*o.as_ptr()).stream) as usize - base,
            ),
            (
                "num_threads",
                ptr::addr_of!((*o.as_ptr()).num_threads) as usize - base,
            ),
            (
                "y_dtype",
                ptr::addr_of!((*o.as_ptr()).y_dtype) as usize - base,
            ),
        ]
    };
    assert_eq!(
        size_of::<softmax_options>(),
        c("sizeof"),
        "sizeof(softmax_options)"
    );
    assert_eq!(
        align_of::<softmax_options>(),
        c("alignof"),
        "alignof(softmax_options)"
    );
    for (field, rust) in off.iter() {
        assert_eq!(*rust, c(field), "offsetof(softmax_options, {})", field);
    }
    assert_eq!(
        size_of::<softmax_status>(),
        c("sizeof_enum"),
        "sizeof(softmax_status)"
    );
    assert_eq!(SOFTMAX_OPTIONS_MAX_SIZE as usize, c("options_max_size"));
}
