# SPDX-License-Identifier: Apache-2.0
# CuArray support for LibSoftmax: device pointers handed to the C library with CUDA.jl's current
# task-local stream (`CUDA.stream()`), so the kernel is ordered after the work that produced the
# inputs and before whatever the task queues next. A call returns once the kernel is queued,
# like any CUDA.jl operation. libsoftmax's CUDA runtime uses the device's primary context, which
# is also the context CUDA.jl uses. Every LibSoftmax function takes CuVector/CuMatrix through
# these three methods; dims=2 uses CUDA.jl's permutedims.
module LibSoftmaxCUDAExt

using CUDA
using LibSoftmax

const DeviceArray{T} = Union{CuVector{T},CuMatrix{T}}

LibSoftmax.memptr(a::DeviceArray) = reinterpret(Ptr{Cvoid}, pointer(a))
LibSoftmax.stream_for(::DeviceArray) = reinterpret(Ptr{Cvoid}, CUDA.stream().handle)
LibSoftmax.default_backend(::DeviceArray) = :cuda

end # module
