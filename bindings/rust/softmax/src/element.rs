// SPDX-License-Identifier: Apache-2.0
//! The element types a slice may hold, and the dtype each stands for.
//!
//! fp16 and bf16 are carried as their bit patterns (`u16` newtypes): this crate does no
//! arithmetic of its own, so it needs no half-precision type; convert with your own code or a
//! crate such as `half` (`half::f16::to_bits`).

use std::os::raw::c_int;

use softmax_sys as sys;

/// Storage type of an array.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE binary32 (`f32`).
    F32,
    /// IEEE binary16 ([`F16`]).
    F16,
    /// bfloat16 ([`Bf16`]).
    Bf16,
    /// IEEE binary64 (`f64`); the arithmetic is fp64 when x or y is stored as f64.
    F64,
}

impl Dtype {
    /// The raw `softmax_dtype` value.
    pub fn raw(self) -> c_int {
        match self {
            Dtype::F32 => sys::SOFTMAX_DTYPE_F32,
            Dtype::F16 => sys::SOFTMAX_DTYPE_F16,
            Dtype::Bf16 => sys::SOFTMAX_DTYPE_BF16,
            Dtype::F64 => sys::SOFTMAX_DTYPE_F64,
        }
    }
}

/// The storage types of a call's two sides: arrays that mirror the forward call's x (x, dx) are
/// stored as `x`, those that mirror its y (y, dy) as `y`. A plain [`Dtype`] converts into the
/// same type on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Storage {
    /// Storage type of x and dx (the C API's `dtype`).
    pub x: Dtype,
    /// Storage type of y and dy (the C API's `options->y_dtype`).
    pub y: Dtype,
}

impl Storage {
    /// x (and dx) stored as `X`, y (and dy) as `Y`.
    pub fn of<X: Element, Y: Element>() -> Storage {
        Storage {
            x: X::DTYPE,
            y: Y::DTYPE,
        }
    }
}

impl From<Dtype> for Storage {
    fn from(d: Dtype) -> Storage {
        Storage { x: d, y: d }
    }
}

/// IEEE binary16, as its bits.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct F16(pub u16);

/// bfloat16 (the upper half of a binary32), as its bits.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bf16(pub u16);

impl F16 {
    /// The value with these bits.
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
    /// The value's bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

impl Bf16 {
    /// The value with these bits.
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    /// The value's bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// A type whose slices can be passed to the library: `f32`, `f64`, [`F16`] or [`Bf16`].
pub trait Element: sealed::Sealed + Copy {
    /// The storage type a slice of this element type is.
    const DTYPE: Dtype;
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
}
impl Element for f64 {
    const DTYPE: Dtype = Dtype::F64;
}
impl Element for F16 {
    const DTYPE: Dtype = Dtype::F16;
}
impl Element for Bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
}
