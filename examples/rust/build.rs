// SPDX-License-Identifier: Apache-2.0
// Lets the program find libsoftmax.so at run time without LD_LIBRARY_PATH: softmax-sys says where
// it linked the library (DEP_SOFTMAX_LIB_DIR) and this puts that directory into the rpath.
fn main() {
    if let Ok(dir) = std::env::var("DEP_SOFTMAX_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
