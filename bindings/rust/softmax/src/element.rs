//! The element types a slice may hold, and the dtype each stands for.
//!
//! fp16 and bf16 are carried as their bit patterns (`u16` newtypes): this crate does no
//! arithmetic of its own, so it needs no half-precision type; convert with your own code or a
//! crate such as `half` (`half::f16::to_bits`).

use std::os::raw::c_int;

use softmax_sys as sys;

/// Storage type of x and y.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}

impl Dtype {
    pub fn raw(self) -> c_int {
        match self {
            Dtype::F32 => sys::SOFTMAX_DTYPE_F32,
            Dtype::F16 => sys::SOFTMAX_DTYPE_F16,
            Dtype::Bf16 => sys::SOFTMAX_DTYPE_BF16,
        }
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
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

impl Bf16 {
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// A type whose slices can be passed to the library: `f32`, [`F16`] or [`Bf16`].
pub trait Element: sealed::Sealed + Copy {
    const DTYPE: Dtype;
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
}
impl Element for F16 {
    const DTYPE: Dtype = Dtype::F16;
}
impl Element for Bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
}
