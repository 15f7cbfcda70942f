/* SPDX-License-Identifier: Apache-2.0 */
// SOFTMAX_CPU_CLONES: compile a function once per x86-64 level (x86-64-v4 = AVX-512, x86-64-v3 =
// AVX2+FMA, baseline SSE2) and let the loader pick one at run time through an ifunc.
// GCC 11+ knows these levels; sanitizer builds use the one baseline version (speed does not
// matter there and ifunc resolvers are best kept out of instrumented code), and so does clang,
// whose target_clones support differs.
#pragma once

// SOFTMAX_CPU_X86_LEVELS is 1 where such per-level code is built (then code may also be compiled
// for a level explicitly, with `#pragma GCC target`), else 0.
#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SOFTMAX_CPU_X86_LEVELS 1
#define SOFTMAX_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SOFTMAX_CPU_X86_LEVELS 0
#define SOFTMAX_CPU_CLONES
#endif
